//! One publish call, guarded: bounded by the batch's deadline, and a panic inside the publisher
//! caught and reported instead of unwinding through the worker.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tokio::time::Instant;

use crate::publisher::{ClaimedEvent, PublishOutcome, Publisher};

/// How a guarded publish call ended.
pub(crate) enum Guarded<E> {
    /// The publisher returned.
    Done(Result<Vec<PublishOutcome>, E>),
    /// The deadline passed first.
    TimedOut,
    /// The publisher panicked, with this message.
    Panicked(String),
}

/// Calls `publisher.publish(events)` until `deadline`, catching a panic.
pub(crate) async fn publish_guarded<P: Publisher>(
    publisher: &P,
    events: &[ClaimedEvent],
    deadline: Instant,
) -> Guarded<P::Error> {
    let call = AssertUnwindSafe(publisher.publish(events)).catch_unwind();
    match tokio::time::timeout_at(deadline, call).await {
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
