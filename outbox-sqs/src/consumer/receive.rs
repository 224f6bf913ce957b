//! The receive loop: long-poll while there is room for more messages, split each batch into units
//! of work (see `unit.rs`), run the units on the handler permits, and on shutdown let the running
//! ones finish.
//!
//! Two limits: at most `concurrency` messages are handled at once (handler permits), and at most
//! `concurrency + max_messages` messages are received and not yet done (message slots). The
//! slack lets a receive ask for a whole batch while the handlers are busy, instead of one message
//! per freed handler; waiting messages are kept hidden by their unit's heartbeat. When a whole
//! batch does not fit within a second (messages waiting for S3 hold their slots), a receive asks
//! for what fits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use outbox_core::{CancellationToken, DecodeEvent};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::Shared;
use super::config::secs;
use super::handler::Handler;
use super::polls::SHUTDOWN_POLL_GRACE;
use super::unit::{hand_back, run_unit, split_into_units};

/// The pause after a short poll (`wait` 0) found the queue empty.
const EMPTY_SHORT_POLL_PAUSE: Duration = Duration::from_secs(1);

/// How long a receiver waits for room for a whole batch before it asks for fewer messages.
const WHOLE_BATCH_WAIT: Duration = Duration::from_secs(1);

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
    /// One per message being read, decoded and handled: `concurrency`.
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
            biased;
            _ = token.cancelled() => break,
            permit = room(&limits.slots, batch) => match permit {
                Some(p) => p,
                None => break,
            },
        };
        // While the database fails, asking for messages would only fail them (each delivery
        // counting towards the queue's maxReceiveCount): wait until it answers.
        if !shared.database_up(&token).await {
            break;
        }
        // Counted in flight before the last look at the token: a unit releasing its messages
        // after the cancel either sees this poll (and waits it out) or the poll is never sent.
        let poll = shared.polls.start(shared.config.wait);
        if token.is_cancelled() {
            poll.answered();
            break;
        }
        // Whether the request may have been sent: never polled, it is not drained at shutdown
        // (that would send it after the stop).
        let sent = std::sync::atomic::AtomicBool::new(false);
        let asked = free.num_permits();
        let receiving = async {
            sent.store(true, std::sync::atomic::Ordering::Relaxed);
            receive(&shared, asked).await
        };
        tokio::pin!(receiving);
        let received = tokio::select! {
            biased;
            // Shutdown: the poll in flight may finish, briefly, and what it got is handed back at
            // once; cut short, whatever SQS hands out to it comes back after the visibility
            // time-out, so units releasing their messages wait it out (see `polls.rs`).
            _ = token.cancelled() => {
                if !sent.load(std::sync::atomic::Ordering::Relaxed) {
                    poll.answered();
                    break;
                }
                if let Ok(Ok(messages)) =
                    tokio::time::timeout(SHUTDOWN_POLL_GRACE, &mut receiving).await
                {
                    poll.answered();
                    hand_back(&shared, messages, &token).await;
                }
                break;
            }
            r = &mut receiving => r,
        };
        let messages = match received {
            Ok(messages) => {
                // Answered. (A failed call may have been sent, and may still be held at SQS:
                // counted as cut short.)
                poll.answered();
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
                    error = %outbox_core::error_chain(&*e),
                    retry_in_ms = pause.as_millis() as u64,
                    "ReceiveMessage failed"
                );
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(pause) => continue,
                }
            }
        };
        while let Some(joined) = units.try_join_next() {
            unit_ended(&shared, joined);
        }
        if messages.is_empty() {
            // A short poll (`wait` 0) answers at once: without a pause an empty queue would be
            // asked again and again, as fast as the network allows (each call billed).
            if shared.config.wait.is_zero() {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(EMPTY_SHORT_POLL_PAUSE) => {}
                }
            }
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
        unit_ended(&shared, joined);
    }
}

/// Logs a unit that did not end normally (handler panics are caught in the unit: this is a bug of
/// the consumer itself, or an observer that panicked). Its messages reappear after their
/// visibility time-out.
fn unit_ended(shared: &Shared, joined: Result<(), tokio::task::JoinError>) {
    if let Err(e) = joined {
        shared.metrics.on_failure("unit");
        tracing::error!(consumer = %shared.config.name, error = %e,
            "a unit of work ended abnormally; its messages reappear after their visibility time-out");
    }
}

/// Slots for the next receive: a whole `batch` when that many are free within
/// [`WHOLE_BATCH_WAIT`], else what is free then, at least one. Messages that wait (for S3, behind
/// a long handler of their FIFO group) hold their slots; a receiver that insisted on a whole batch
/// stopped receiving while fewer slots than a batch were free, and messages that could be handled
/// sat in the queue. `None` when the semaphore is closed.
async fn room(slots: &Arc<Semaphore>, batch: u32) -> Option<OwnedSemaphorePermit> {
    let whole = tokio::time::timeout(WHOLE_BATCH_WAIT, slots.clone().acquire_many_owned(batch));
    if let Ok(permit) = whole.await {
        return permit.ok();
    }
    let mut some = slots.clone().acquire_owned().await.ok()?;
    let extra = u32::try_from(slots.available_permits())
        .unwrap_or(u32::MAX)
        .min(batch.saturating_sub(1));
    if extra > 0 {
        if let Ok(more) = slots.clone().try_acquire_many_owned(extra) {
            some.merge(more);
        }
    }
    Some(some)
}

/// One `ReceiveMessage`, given up when it has not answered within its wait plus the call
/// time-out (whatever SQS handed out to a call given up comes back after the visibility time-out).
async fn receive(
    shared: &Shared,
    max: usize,
) -> Result<Vec<Message>, Box<dyn std::error::Error + Send + Sync>> {
    let limit = shared
        .config
        .wait
        .saturating_add(shared.config.call_timeout);
    let call = shared
        .client
        .receive_message()
        .queue_url(&shared.queue_url)
        .max_number_of_messages(i32::try_from(max).unwrap_or(10))
        .wait_time_seconds(secs(shared.config.wait, 0))
        .visibility_timeout(secs(shared.config.visibility_timeout, 1))
        .message_attribute_names("All")
        .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
        .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
        .send();
    let out = tokio::time::timeout(limit, call)
        .await
        .map_err(|_| format!("no answer within {limit:?}"))??;
    // A non-raw SNS subscription's notifications, read as the messages SNS was given.
    Ok(out
        .messages
        .unwrap_or_default()
        .into_iter()
        .map(super::notification::unwrapped)
        .collect())
}
