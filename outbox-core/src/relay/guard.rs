//! One publish call, guarded: bounded by the batch's deadline, and a panic inside the publisher
//! caught and reported instead of unwinding through the worker.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tokio::time::Instant;

use crate::publisher::{ClaimedEvent, PUBLISH_OVERRUN, PublishOutcome, Publisher};

/// How a guarded publish call ended.
pub(crate) enum Guarded<E> {
    /// The publisher returned.
    Done(Result<Vec<PublishOutcome>, E>),
    /// The deadline passed first.
    TimedOut,
    /// The publisher panicked, with this message.
    Panicked(String),
}

/// How long past its deadline a publish call is waited for: a tenth of the publish timeout, at most
/// [`PUBLISH_OVERRUN`].
pub(crate) fn overrun(publish_timeout: std::time::Duration) -> std::time::Duration {
    (publish_timeout / 10).min(PUBLISH_OVERRUN)
}

/// Calls `publisher.publish_within(events, deadline)`, waiting for it until `deadline` plus
/// `overrun`, catching a panic.
pub(crate) async fn publish_guarded<P: Publisher>(
    publisher: &P,
    events: &[ClaimedEvent],
    deadline: Instant,
    overrun: std::time::Duration,
) -> Guarded<P::Error> {
    // The call itself inside the guarded future: a publisher whose `publish` panics before it
    // returns its future (eager work ahead of an `async` block) is caught too.
    let call = AssertUnwindSafe(async move { publisher.publish_within(events, deadline).await })
        .catch_unwind();
    let hard = deadline.checked_add(overrun).unwrap_or(deadline);
    match tokio::time::timeout_at(hard, call).await {
        Err(_) => Guarded::TimedOut,
        Ok(Ok(result)) => Guarded::Done(result),
        Ok(Err(payload)) => Guarded::Panicked(panic_message(payload.as_ref())),
    }
}

/// The message of a panic payload (`&str` or `String`, as `panic!` makes them).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
