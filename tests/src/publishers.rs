//! In-process publishers for relay tests.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use outbox_core::{ClaimedEvent, PublishOutcome, Publisher};
use uuid::Uuid;

/// Records every event it is given, in publish order, and accepts them all.
#[derive(Default)]
pub struct RecordingPublisher {
    published: Mutex<Vec<ClaimedEvent>>,
    calls: AtomicUsize,
    delay: Option<Duration>,
}

impl RecordingPublisher {
    /// A publisher that accepts at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// A publisher that takes `delay` per call (to catch a relay mid-publish).
    pub fn with_delay(delay: Duration) -> Self {
        RecordingPublisher {
            delay: Some(delay),
            ..Self::default()
        }
    }

    /// Everything published so far, in order.
    pub fn published(&self) -> Vec<ClaimedEvent> {
        self.published.lock().unwrap().clone()
    }

    /// The ids published so far, in order.
    pub fn ids(&self) -> Vec<Uuid> {
        self.published
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect()
    }

    /// Publish calls so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Publisher for RecordingPublisher {
    type Error = std::io::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
        self.published
            .lock()
            .unwrap()
            .extend(events.iter().cloned());
        Ok(vec![PublishOutcome::Published; events.len()])
    }
}

/// How a [`FlakyPublisher`] treats an event.
pub type Rule = Box<dyn Fn(&ClaimedEvent) -> Option<PublishOutcome> + Send + Sync>;

/// Fails chosen events (by rule), whole calls at a given rate, and records the rest as published.
pub struct FlakyPublisher {
    rule: Rule,
    call_failure_rate: f64,
    /// Ids that failed once already, for rules that fail only the first time.
    seen: Mutex<HashSet<Uuid>>,
    published: Mutex<Vec<ClaimedEvent>>,
    calls: AtomicUsize,
    failed_calls: AtomicUsize,
}

impl FlakyPublisher {
    /// Applies `rule` to each event: `Some(outcome)` forces that outcome, `None` publishes.
    pub fn new(
        rule: impl Fn(&ClaimedEvent) -> Option<PublishOutcome> + Send + Sync + 'static,
    ) -> Self {
        FlakyPublisher {
            rule: Box::new(rule),
            call_failure_rate: 0.0,
            seen: Mutex::default(),
            published: Mutex::default(),
            calls: AtomicUsize::new(0),
            failed_calls: AtomicUsize::new(0),
        }
    }

    /// Also fails this fraction of whole calls at random (an `Err`, as a broker outage would).
    pub fn failing_calls(mut self, rate: f64) -> Self {
        self.call_failure_rate = rate;
        self
    }

    /// Whether `id` was seen before; records it.
    pub fn first_time(&self, id: Uuid) -> bool {
        self.seen.lock().unwrap().insert(id)
    }

    /// Everything published so far, in order.
    pub fn published(&self) -> Vec<ClaimedEvent> {
        self.published.lock().unwrap().clone()
    }

    /// Calls so far, and calls failed as a whole.
    pub fn calls(&self) -> (usize, usize) {
        (
            self.calls.load(Ordering::SeqCst),
            self.failed_calls.load(Ordering::SeqCst),
        )
    }
}

impl Publisher for FlakyPublisher {
    type Error = std::io::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.call_failure_rate > 0.0 && rand_unit() < self.call_failure_rate {
            self.failed_calls.fetch_add(1, Ordering::SeqCst);
            return Err(std::io::Error::other("injected outage"));
        }
        let mut outcomes = Vec::with_capacity(events.len());
        for event in events {
            let outcome = (self.rule)(event).unwrap_or(PublishOutcome::Published);
            if outcome == PublishOutcome::Published {
                self.published.lock().unwrap().push(event.clone());
            }
            outcomes.push(outcome);
        }
        Ok(outcomes)
    }
}

fn rand_unit() -> f64 {
    // Good enough randomness for fault injection without another dependency.
    let n = Uuid::new_v4().as_u128() >> 75;
    n as f64 / (1u64 << 53) as f64
}
