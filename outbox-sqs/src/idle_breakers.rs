//! The probes of breakers nothing calls: a queue or topic whose breaker is open and whose events
//! are all dead-lettered (or held back behind those) gets no call, so no call can probe it, and its
//! breaker and gauge stayed open however long ago it was fixed (black-box run: the
//! `OutboxQueueUnavailable` alert fired on for a topic that was back). Once per probe interval, a
//! task asks each such destination (`GetQueueAttributes`, `GetTopicAttributes`) and closes its
//! breaker when it works; the task ends with the publisher. Only a breaker opened because its
//! destination was missing: those calls cannot see a key or a policy that refuses sends only (a
//! breaker closed so reopened at the next send, again and again, its dead-letter clock restarted
//! each time: review).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::publisher::Inner;

/// Starts the task for the publisher's `inner`, probing every `every` (outside a Tokio runtime,
/// nothing: there is no publishing either).
pub(crate) fn spawn(inner: &Arc<Inner>, every: Duration) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(run(Arc::downgrade(inner), every));
    }
}

async fn run(inner: Weak<Inner>, every: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let timeout = inner.call_timeout.min(every);
        for queue in &inner.queues {
            let started = Instant::now();
            if queue.breaker.idle_at(started) && queue.down.probe().works(timeout).await {
                queue.breaker.found_back(started);
            }
        }
    }
}
