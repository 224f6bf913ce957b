//! Handling one message: read the envelope, decode, open a transaction, record the event in the
//! inbox, run the handler, commit, acknowledge. Nothing here logs a body.

use std::sync::Arc;
use std::time::Instant;

use aws_sdk_sqs::types::Message;
use outbox_core::{CancellationToken, DecodeEvent};
use tokio::sync::Semaphore;
use tracing::Instrument;

use super::Shared;
use super::config::BadInputPolicy;
use super::envelope::{BadInput, Envelope};
use super::handler::{Delivery, Handler, Outcome};
use super::payload::{self, PayloadError};
use super::transaction::{Failure, apply};
use super::visibility::{self, Pending};

/// What a message's turn in its unit shares with the unit.
#[derive(Clone, Copy)]
pub(crate) struct Turn<'a> {
    /// The heartbeat's receipts.
    pub(crate) pending: &'a Pending,
    /// Shutdown.
    pub(crate) token: &'a CancellationToken,
    /// The handler permits (the consumer's concurrency).
    pub(crate) handlers: &'a Arc<Semaphore>,
}

/// Handles `message` and reports it to the observer; returns its outcome. Its receipt is taken
/// out of `pending` (the heartbeat's) before the message is deleted or hidden again.
/// [`Outcome::Released`] (shutdown came while it waited) leaves both to the unit, which releases
/// it.
pub(crate) async fn handle_message<T, H>(
    shared: &Shared,
    handler: &H,
    message: &Message,
    received_at: Instant,
    turn: Turn<'_>,
) -> Outcome
where
    T: DecodeEvent + Send + 'static,
    H: Handler<T>,
{
    let pending = turn.pending;
    let receipt = message.receipt_handle().unwrap_or_default().to_owned();
    let message_id = message.message_id().unwrap_or_default().to_owned();
    let envelope = Envelope::read(message);
    let (outcome, left_in_queue) = match &envelope {
        Err(bad) => (
            bad_input(shared, *bad, message, None, &receipt, (pending, turn.token)).await,
            false,
        ),
        Ok(env) => {
            let span = span(&shared.config.name, env);
            decode_and_handle::<T, H>(shared, handler, message, env, &receipt, turn)
                .instrument(span)
                .await
        }
    };
    if outcome == Outcome::Released {
        return outcome;
    }
    if let Some(observer) = &shared.observer {
        observer(&Delivery {
            message_id,
            envelope: envelope.ok(),
            outcome,
            received_at,
            left_in_queue,
        });
    }
    outcome
}

/// The span a message with an envelope is handled in. The aggregate and the trace context are
/// left out when the message has none, rather than logged empty.
fn span(consumer: &str, env: &Envelope) -> tracing::Span {
    let span = tracing::info_span!(
        "outbox.consume",
        consumer = %consumer,
        event_id = %env.event_id,
        event_type = %env.event_type,
        aggregate = tracing::field::Empty,
        message_id = %env.message_id,
        receive_count = env.receive_count,
        traceparent = tracing::field::Empty,
    );
    if !(env.aggregate_type.is_empty() && env.aggregate_id.is_empty()) {
        span.record(
            "aggregate",
            tracing::field::display(format_args!("{}:{}", env.aggregate_type, env.aggregate_id)),
        );
    }
    if let Some(traceparent) = &env.traceparent {
        span.record("traceparent", tracing::field::display(traceparent));
    }
    span
}

/// Returns the outcome and whether the message was left in the queue on purpose.
async fn decode_and_handle<T, H>(
    shared: &Shared,
    handler: &H,
    message: &Message,
    env: &Envelope,
    receipt: &str,
    turn: Turn<'_>,
) -> (Outcome, bool)
where
    T: DecodeEvent + Send + 'static,
    H: Handler<T>,
{
    let pending = turn.pending;
    if payload::offloaded_size(message).is_some() {
        // A duplicate of an offloaded event is known without reading its payload from S3 (which
        // may be large, or gone by now), S3 down or not.
        if was_processed(shared, env).await {
            return (duplicate(shared, receipt, pending).await, false);
        }
        // Kept hidden by the heartbeat while S3 fails, without a handler permit: messages that
        // carry their payload go on meanwhile.
        if !shared.s3_up(message, turn.token).await {
            return (Outcome::Released, false);
        }
    }
    // The consumer's concurrency bounds what runs from here: reading an offloaded payload (held
    // in memory), decoding, the handler and its transaction.
    let Some(_permit) = permit(shared, turn, message).await else {
        return (Outcome::Released, false);
    };
    let body = match payload::body(&shared.s3, message, &shared.config).await {
        Ok(body) => body,
        Err(PayloadError::Malformed(reason)) => {
            tracing::warn!(reason, "cannot read the offloaded payload");
            let outcome = bad_input(
                shared,
                BadInput::BadPointer,
                message,
                Some(env),
                receipt,
                (pending, turn.token),
            )
            .await;
            return (outcome, false);
        }
        Err(error @ (PayloadError::Fetch(_) | PayloadError::Unavailable(_))) => {
            // S3 down, slow, or the object gone: a failed delivery, retried on the back-off
            // (the queue's redrive policy has the last word), never bad input. While S3 is down,
            // units wait before the next offloaded payload (see `Gate`).
            let reason = match error {
                PayloadError::Unavailable(reason) => {
                    shared.offload.failed();
                    reason
                }
                PayloadError::Fetch(reason) | PayloadError::Malformed(reason) => reason,
            };
            pending.take(receipt).await;
            failed(
                shared,
                env,
                receipt,
                pending,
                turn.token,
                ("offload", &reason),
            )
            .await;
            return (Outcome::Failed, false);
        }
    };
    let event = match T::decode(&env.event_type, &body) {
        Ok(event) => event,
        Err(_) if was_processed(shared, env).await => {
            // Processed before its type was renamed or dropped: a redelivery (its delete failed,
            // or the relay sent it again), not bad input to hide and dead-letter.
            return (duplicate(shared, receipt, pending).await, false);
        }
        Err(e) => {
            let bad = match e.kind() {
                outbox_core::ErrorKind::UnknownEventType => BadInput::UnknownEventType,
                _ => BadInput::Undecodable,
            };
            // The decode error never quotes the body.
            tracing::warn!(error = %e, "cannot decode the event");
            let outcome = bad_input(
                shared,
                bad,
                message,
                Some(env),
                receipt,
                (pending, turn.token),
            )
            .await;
            return (outcome, false);
        }
    };
    let started = Instant::now();
    let applied = match &env.traceparent {
        // Events the handler emits continue the producer's trace.
        Some(tp) => {
            outbox_core::trace::with_traceparent(
                tp.clone(),
                apply::<T, H>(shared, handler, event, env, turn.token),
            )
            .await
        }
        None => apply::<T, H>(shared, handler, event, env, turn.token).await,
    };
    if matches!(applied, Err(Failure::Shutdown)) {
        return (Outcome::Released, false);
    }
    // From here the message is disposed of: the heartbeat must not hide it again after that.
    pending.take(receipt).await;
    match applied {
        Ok(true) => {
            shared.metrics.on_handled(started.elapsed());
            let left = shared.skip_this_delete();
            if left {
                visibility::change(
                    shared.sqs(),
                    &[receipt.to_owned()],
                    std::time::Duration::ZERO,
                )
                .await;
            } else {
                shared.deleter.delete(receipt.to_owned());
            }
            (Outcome::Handled, left)
        }
        Ok(false) => {
            shared.metrics.on_duplicate();
            tracing::debug!("duplicate: skipped");
            shared.deleter.delete(receipt.to_owned());
            (Outcome::Duplicate, false)
        }
        Err(failure) => {
            if matches!(failure, Failure::Database(_)) {
                // Receivers and units wait until it answers again (see `DatabaseGate`).
                shared.database.failed();
            }
            let (reason, error) = match &failure {
                Failure::Database(e) => ("database", outbox_core::error_chain(&**e)),
                Failure::Handler(e) => ("handler", outbox_core::error_chain(&**e)),
                Failure::Shutdown => ("shutdown", "shut down while waiting".to_owned()),
            };
            failed(shared, env, receipt, pending, turn.token, (reason, &error)).await;
            (Outcome::Failed, false)
        }
    }
}

/// A handler permit; `None` at shutdown. A message that waited for it while the database
/// failed waits, without it, until the database answers again (see `Gate`): the gate it passed
/// before may have closed since. So does an offloaded one while S3 fails: passed before S3's first
/// failure, each such message waiting for a permit took one in turn, to spend a whole call time-out
/// on S3 while messages carrying their payload waited behind (black-box run: 44 s for 8 offloaded
/// messages, two permits).
async fn permit(
    shared: &Shared,
    turn: Turn<'_>,
    message: &Message,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let offloaded = payload::offloaded_size(message).is_some();
    loop {
        let permit = tokio::select! {
            biased;
            _ = turn.token.cancelled() => None,
            p = turn.handlers.clone().acquire_owned() => p.ok(),
        }?;
        let database_down = shared.database.is_down();
        let s3_down = offloaded && shared.offload.is_down();
        if !database_down && !s3_down {
            return Some(permit);
        }
        drop(permit);
        if database_down && !shared.database_up(turn.token).await {
            return None;
        }
        if s3_down && !shared.s3_up(message, turn.token).await {
            return None;
        }
    }
}

/// Skips a duplicate: counted, and deleted.
async fn duplicate(shared: &Shared, receipt: &str, pending: &Pending) -> Outcome {
    pending.take(receipt).await;
    shared.metrics.on_duplicate();
    tracing::debug!("duplicate: skipped");
    shared.deleter.delete(receipt.to_owned());
    Outcome::Duplicate
}

/// Whether the inbox already holds `env`'s event (a hint: see [`outbox_core::was_processed`]);
/// `false` when the database cannot say (the transaction will find out).
async fn was_processed(shared: &Shared, env: &Envelope) -> bool {
    let limit = shared.database_timeout();
    let Ok(Ok(client)) = tokio::time::timeout(limit, shared.pool.get()).await else {
        return false;
    };
    let asked = outbox_core::was_processed(&**client, &shared.config.name, env.event_id);
    match tokio::time::timeout(limit, asked).await {
        Ok(answer) => answer.unwrap_or(false),
        Err(_) => {
            // Mid-statement: closed, not handed back to the pool.
            drop(deadpool_postgres::Object::take(client));
            false
        }
    }
}

/// Counts and logs a failed delivery and hides the message for the retry delay of its receive
/// count (at shutdown, at least until the consumer's own polls are over). Its receipt must be out
/// of the heartbeat's `pending` already.
async fn failed(
    shared: &Shared,
    env: &Envelope,
    receipt: &str,
    pending: &Pending,
    token: &CancellationToken,
    (reason, error): (&str, &str),
) {
    shared.metrics.on_failure(reason);
    let delay = pending.within_limit(
        shared
            .hidden_from_own_polls(
                token,
                visibility::retry_delay(&shared.config, env.receive_count),
            )
            .await,
    );
    tracing::warn!(
        reason,
        error,
        retry_in_ms = delay.as_millis() as u64,
        "handling the event failed; rolled back, it will be delivered again"
    );
    visibility::change(shared.sqs(), &[receipt.to_owned()], delay).await;
}

/// Counts, logs (never the body) and disposes of a message that cannot be read. Without a usable
/// envelope, the log names the event id and type the message's attributes carry as they are (a
/// black-box run read `event_type=""` for a message that had one but no event id).
async fn bad_input(
    shared: &Shared,
    bad: BadInput,
    message: &Message,
    env: Option<&Envelope>,
    receipt: &str,
    (pending, token): (&Pending, &CancellationToken),
) -> Outcome {
    pending.take(receipt).await;
    shared.metrics.on_failure(bad.as_str());
    let policy = shared.config.bad_input;
    let (event_id, event_type) = match env {
        Some(e) => (e.event_id.to_string(), e.event_type.clone()),
        None => super::envelope::carried(message),
    };
    tracing::warn!(
        consumer = %shared.config.name,
        reason = bad.as_str(),
        message_id = message.message_id().unwrap_or_default(),
        event_id,
        event_type,
        policy = ?policy,
        "a message that cannot be handled"
    );
    match policy {
        BadInputPolicy::Delete => shared.deleter.delete(receipt.to_owned()),
        BadInputPolicy::Release => {
            visibility::change(
                shared.sqs(),
                &[receipt.to_owned()],
                pending.within_limit(
                    shared
                        .hidden_from_own_polls(token, shared.config.bad_input_delay)
                        .await,
                ),
            )
            .await
        }
    }
    Outcome::BadInput(bad)
}
