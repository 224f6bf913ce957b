//! The receive loop: long-poll while there is room for more messages, split each batch into units
//! of work (one message, or on a FIFO queue the batch's messages of one group, in order), run the
//! units on the handler permits, and on shutdown let the running ones finish.
//!
//! Two limits: at most `concurrency` units handle at once (handler permits), and at most
//! `concurrency + max_messages` messages are received and not yet done (message slots). The
//! slack lets a receive ask for a whole batch while the handlers are busy, instead of one message
//! per freed handler; waiting messages are kept hidden by their unit's heartbeat.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use outbox_core::{CancellationToken, DecodeEvent};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::Shared;
use super::config::{BadInputPolicy, secs};
use super::envelope::{Envelope, group_id};
use super::handler::{Delivery, Handler, Outcome};
use super::process::handle_message;
use super::visibility;

/// The longest pause after failed receives.
const MAX_RECEIVE_BACKOFF: Duration = Duration::from_secs(30);

/// Runs the configured number of receivers, sharing the handler permits, until `token` is
/// cancelled and every unit has finished.
pub(crate) async fn receive_loop<T, H>(
    shared: Arc<Shared>,
    handler: Arc<H>,
    token: CancellationToken,
) where
    T: DecodeEvent + Send + 'static,
    H: Handler<T>,
{
    let limits = Limits {
        handlers: Arc::new(Semaphore::new(shared.config.concurrency)),
        slots: Arc::new(Semaphore::new(
            shared.config.concurrency + max_messages(&shared),
        )),
    };
    let receivers = shared.config.receivers.clamp(1, shared.config.concurrency);
    futures::future::join_all((0..receivers).map(|_| {
        receiver::<T, H>(
            shared.clone(),
            handler.clone(),
            token.clone(),
            limits.clone(),
        )
    }))
    .await;
}

/// The receivers' shared limits.
#[derive(Clone)]
struct Limits {
    /// One per running unit: `concurrency`.
    handlers: Arc<Semaphore>,
    /// One per message received and not done: `concurrency + max_messages`.
    slots: Arc<Semaphore>,
}

fn max_messages(shared: &Shared) -> usize {
    usize::try_from(shared.config.max_messages).unwrap_or(10)
}

/// One receiver: long-polls whenever there is room for a message (so that one poll waiting on an
/// empty queue does not keep the other receivers' messages from being handled), until `token` is
/// cancelled; then waits for its units.
async fn receiver<T, H>(
    shared: Arc<Shared>,
    handler: Arc<H>,
    token: CancellationToken,
    limits: Limits,
) where
    T: DecodeEvent + Send + 'static,
    H: Handler<T>,
{
    let mut units = JoinSet::new();
    let mut failures = 0u32;
    let batch = u32::try_from(max_messages(&shared)).unwrap_or(10);
    loop {
        // Room for a whole batch before asking for one: with `concurrency + max_messages` slots
        // the handlers still have up to `concurrency` messages to work on meanwhile, and a batch
        // is one call instead of one call per freed handler.
        let mut free = tokio::select! {
            _ = token.cancelled() => break,
            permit = limits.slots.clone().acquire_many_owned(batch) => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let received = tokio::select! {
            // A long poll cut short: whatever SQS handed out to it comes back after the visibility
            // time-out.
            _ = token.cancelled() => break,
            r = receive(&shared, max_messages(&shared)) => r,
        };
        let messages = match received {
            Ok(messages) => {
                failures = 0;
                messages
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                shared.metrics.on_failure("receive");
                let pause = Duration::from_millis(250)
                    .saturating_mul(1 << failures.min(8))
                    .min(MAX_RECEIVE_BACKOFF);
                tracing::warn!(
                    consumer = %shared.config.name,
                    queue = %shared.queue_url,
                    error = %outbox_core::error_chain(&e),
                    retry_in_ms = pause.as_millis() as u64,
                    "ReceiveMessage failed"
                );
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(pause) => continue,
                }
            }
        };
        while units.try_join_next().is_some() {}
        if messages.is_empty() {
            continue;
        }
        shared.metrics.on_received(messages.len());
        let received_at = Instant::now();
        for unit in split_into_units(messages) {
            // SQS returns no more messages than asked for: a slot for each; the rest are given
            // back when `free` is dropped.
            let slots = free.split(unit.len()).into_iter().collect::<Vec<_>>();
            units.spawn(run_unit::<T, H>(
                shared.clone(),
                handler.clone(),
                unit,
                received_at,
                token.clone(),
                (limits.handlers.clone(), slots),
            ));
        }
    }
    // Shutdown: the units finish what they started; none starts a new message.
    while let Some(joined) = units.join_next().await {
        if let Err(e) = joined {
            tracing::error!(consumer = %shared.config.name, error = %e, "a handler panicked");
        }
    }
}

async fn receive(
    shared: &Shared,
    max: usize,
) -> Result<
    Vec<Message>,
    aws_sdk_sqs::error::SdkError<
        aws_sdk_sqs::operation::receive_message::ReceiveMessageError,
        aws_sdk_sqs::config::http::HttpResponse,
    >,
> {
    let out = shared
        .client
        .receive_message()
        .queue_url(&shared.queue_url)
        .max_number_of_messages(i32::try_from(max).unwrap_or(10))
        .wait_time_seconds(secs(shared.config.wait, 0))
        .visibility_timeout(secs(shared.config.visibility_timeout, 1))
        .message_attribute_names("All")
        .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
        .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
        .send()
        .await?;
    Ok(out.messages.unwrap_or_default())
}

/// Messages with the same `MessageGroupId` form one unit, in the order received; every other
/// message is a unit of its own. Units keep the order of their first message.
pub(crate) fn split_into_units(messages: Vec<Message>) -> Vec<Vec<Message>> {
    let mut units: Vec<Vec<Message>> = Vec::new();
    let mut by_group: Vec<(String, usize)> = Vec::new();
    for m in messages {
        match group_id(&m).map(str::to_owned) {
            Some(group) => match by_group.iter().find(|(g, _)| *g == group) {
                Some((_, at)) => units[*at].push(m),
                None => {
                    by_group.push((group, units.len()));
                    units.push(vec![m]);
                }
            },
            None => units.push(vec![m]),
        }
    }
    units
}

/// Waits for a handler permit, then handles a unit's messages one after the other, while a
/// heartbeat keeps the unhandled ones hidden. After a failure (or once shutting down) the unit's
/// later messages are not handled: they are made visible again at once, so SQS hands them out
/// again, still after the failed one. A unit still waiting for a handler at shutdown releases
/// all its messages.
async fn run_unit<T, H>(
    shared: Arc<Shared>,
    handler: Arc<H>,
    unit: Vec<Message>,
    received_at: Instant,
    token: CancellationToken,
    (handlers, _slots): (Arc<Semaphore>, Vec<OwnedSemaphorePermit>),
) where
    T: DecodeEvent + Send + 'static,
    H: Handler<T>,
{
    let receipt = |m: &Message| m.receipt_handle().unwrap_or_default().to_owned();
    let pending = Mutex::new(unit.iter().map(receipt).collect::<Vec<_>>());
    let work = async {
        let stops = |outcome: Outcome| match outcome {
            Outcome::Failed => true,
            Outcome::BadInput(_) => shared.config.bad_input == BadInputPolicy::Release,
            _ => false,
        };
        let permit = tokio::select! {
            biased;
            _ = token.cancelled() => None,
            p = handlers.acquire_owned() => p.ok(),
        };
        let Some(_permit) = permit else {
            return release(&shared, &unit, received_at).await;
        };
        let rest = in_sequence(
            &unit,
            |message| {
                let (shared, handler, pending) = (&shared, &handler, &pending);
                async move {
                    let outcome =
                        handle_message::<T, H>(shared, &**handler, message, received_at).await;
                    if let Ok(mut p) = pending.lock() {
                        p.retain(|r| *r != receipt(message));
                    }
                    outcome
                }
            },
            stops,
            &token,
        )
        .await;
        release(&shared, rest, received_at).await;
    };
    tokio::select! {
        _ = work => {}
        _ = visibility::heartbeat(
            &shared.client,
            &shared.queue_url,
            &shared.metrics,
            shared.config.visibility_timeout,
            &pending,
        ) => {}
    }
}

/// Makes `messages` visible again at once, unhandled, and tells the observer.
async fn release(shared: &Shared, messages: &[Message], received_at: Instant) {
    if messages.is_empty() {
        return;
    }
    let receipts: Vec<String> = messages
        .iter()
        .map(|m| m.receipt_handle().unwrap_or_default().to_owned())
        .collect();
    visibility::change(
        &shared.client,
        &shared.queue_url,
        &shared.metrics,
        &receipts,
        Duration::ZERO,
    )
    .await;
    if let Some(observer) = &shared.observer {
        for m in messages {
            observer(&Delivery {
                message_id: m.message_id().unwrap_or_default().to_owned(),
                envelope: Envelope::read(m).ok(),
                outcome: Outcome::Released,
                received_at,
                left_in_queue: false,
            });
        }
    }
}

/// Calls `handle` on the messages of `unit` one after the other, until an outcome `stops` the unit
/// or `token` is cancelled; returns the messages not handled.
pub(crate) async fn in_sequence<'m, F: Future<Output = Outcome>>(
    unit: &'m [Message],
    mut handle: impl FnMut(&'m Message) -> F,
    stops: impl Fn(Outcome) -> bool,
    token: &CancellationToken,
) -> &'m [Message] {
    for (i, message) in unit.iter().enumerate() {
        let outcome = handle(message).await;
        if stops(outcome) || token.is_cancelled() {
            return &unit[i + 1..];
        }
    }
    &[]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, group: Option<&str>) -> Message {
        let mut m = Message::builder().message_id(id);
        if let Some(g) = group {
            m = m.attributes(MessageSystemAttributeName::MessageGroupId, g);
        }
        m.build()
    }

    fn ids(unit: &[Message]) -> Vec<&str> {
        unit.iter().filter_map(|m| m.message_id()).collect()
    }

    #[test]
    fn a_groups_messages_form_one_unit_in_order() {
        let units = split_into_units(vec![
            message("a1", Some("a")),
            message("b1", Some("b")),
            message("a2", Some("a")),
            message("s1", None),
            message("a3", Some("a")),
            message("s2", None),
        ]);
        let units: Vec<Vec<&str>> = units.iter().map(|u| ids(u)).collect();
        assert_eq!(
            units,
            [vec!["a1", "a2", "a3"], vec!["b1"], vec!["s1"], vec!["s2"]]
        );
    }

    #[tokio::test]
    async fn a_failure_stops_the_unit_and_returns_the_later_messages() {
        let unit = vec![
            message("a1", Some("a")),
            message("a2", Some("a")),
            message("a3", Some("a")),
        ];
        let token = CancellationToken::new();
        let handled = std::sync::Mutex::new(Vec::new());
        let stops = |o: Outcome| o == Outcome::Failed;
        let rest = in_sequence(
            &unit,
            |m| {
                let handled = &handled;
                async move {
                    let id = m.message_id().unwrap_or_default().to_owned();
                    // A later message must not start before an earlier one ends.
                    handled.lock().unwrap().push(format!("start {id}"));
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    handled.lock().unwrap().push(format!("end {id}"));
                    if id == "a2" {
                        Outcome::Failed
                    } else {
                        Outcome::Handled
                    }
                }
            },
            stops,
            &token,
        )
        .await;
        assert_eq!(
            *handled.lock().unwrap(),
            ["start a1", "end a1", "start a2", "end a2"]
        );
        assert_eq!(ids(rest), ["a3"]);

        // All handled: nothing left.
        let rest = in_sequence(&unit, |_| async { Outcome::Duplicate }, stops, &token).await;
        assert!(rest.is_empty());

        // Shutting down: the message in hand finishes, the rest is returned.
        token.cancel();
        let calls = std::sync::atomic::AtomicU32::new(0);
        let rest = in_sequence(
            &unit,
            |_| {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async { Outcome::Handled }
            },
            stops,
            &token,
        )
        .await;
        assert_eq!(calls.into_inner(), 1);
        assert_eq!(ids(rest), ["a2", "a3"]);
    }
}
