//! Room for new events ([`Publisher::room`](outbox_core::Publisher::room)): a publisher whose
//! destinations' calls all hold every in-flight slot they may with chains going on without their
//! publishes (see `detached_call.rs`) would put any new event back at once, without a call; one
//! whose calls all outlast the publish's call wait would put back every event beyond what its
//! free slots' calls carry. The relay is told so, and claims nothing until a slot frees, then no
//! more than the free slots' calls carry.
//!
//! Why: claimed and put back regardless, a backlog bound for a queue answering every call in
//! 4-7 s was claimed and put back about once a second until its turn came, 23 times per event
//! published: 16 KB of WAL per event (black-box run).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::batch::MAX_BATCH_ENTRIES;
use crate::publisher::{Queue, SqsPublisher};

/// How often a publisher without room looks whether a slot freed.
const LOOK_EVERY: Duration = Duration::from_millis(25);

impl SqsPublisher {
    /// [`Publisher::room`](outbox_core::Publisher::room): `None` while any destination may take
    /// a call that would be answered within the call wait (or there is none). Otherwise (every
    /// destination answering slower than that, or its slots held by calls going on): waits at
    /// most the call wait while no slot is free, then the events the free slots' calls carry,
    /// or `Some(0)` if none freed.
    pub(crate) async fn room_for_events(&self) -> Option<usize> {
        let queues = &self.inner.queues;
        let call_wait = self.inner.call_wait;
        if queues.is_empty() || !queues.iter().all(|q| q.saturated() || q.slow(call_wait)) {
            return None;
        }
        // Slots held by calls of publishes still waiting for them count too: a call started
        // now would wait for one of those, and go on holding it.
        let free = || {
            let free: usize = queues.iter().map(|q| q.slots.available_permits()).sum();
            free.min(self.inner.permits.available_permits())
        };
        let until = tokio::time::Instant::now() + call_wait;
        loop {
            let calls = free();
            if calls > 0 {
                return Some(calls.saturating_mul(MAX_BATCH_ENTRIES));
            }
            if tokio::time::Instant::now() >= until {
                return Some(0);
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }
}

impl Queue {
    /// Whether its new events are put back at once, without a call: chains going on without
    /// their publish hold every slot its calls may (see [`SqsPublisher::no_call_for`]).
    pub(crate) fn saturated(&self) -> bool {
        self.going_on.load(Ordering::Relaxed) > 0 && self.slots.available_permits() == 0
    }

    /// Whether its last answered batch call took `call_wait` or longer: a call to it would go on
    /// without its publish, holding its slot, and a claim of more events than its free slots'
    /// calls carry would put the rest back.
    fn slow(&self, call_wait: Duration) -> bool {
        self.call_pace.last().is_some_and(|took| took >= call_wait)
    }
}
