//! What the writers and consumers share while the demo runs: commit and receive times, counters.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use outbox_core::OutboxStats;

use uuid::Uuid;

use super::Report;
use outbox_sqs::Consumer;
use outbox_sqs::consumer::{Delivery, Outcome};

/// Commit and receive times of the events, by id.
#[derive(Default)]
pub(super) struct Times {
    /// Event id → when its transaction committed.
    pub(super) committed: HashMap<Uuid, Instant>,
    /// Event id → when it was first received.
    pub(super) received: HashMap<Uuid, Instant>,
    /// Events both committed and received.
    matched: u64,
}

/// What the writers and consumers share.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) times: Mutex<Times>,
    pub(super) orders_placed: AtomicU64,
    pub(super) messages: AtomicU64,
    pub(super) duplicates: AtomicU64,
    pub(super) left_in_queue: AtomicU64,
    pub(super) unreadable: AtomicU64,
    pub(super) out_of_order: Mutex<HashSet<Uuid>>,
    pub(super) rolled_back_order: Mutex<String>,
    pub(super) rolled_back_event_received: AtomicBool,
    pub(super) consumer_errors: AtomicU64,
    pub(super) last_consumer_error: Mutex<Option<String>>,
}

impl Tally {
    pub(super) fn committed(&self, event_id: Uuid) {
        let now = Instant::now();
        let mut times = self.times.lock().unwrap();
        times.committed.insert(event_id, now);
        // The message may have been received before this writer got here.
        if times.received.contains_key(&event_id) {
            times.matched += 1;
        }
    }

    pub(super) fn record(&self, d: &Delivery) {
        match d.outcome {
            Outcome::Duplicate => {
                self.duplicates.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::BadInput(_) => {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
            }
            // Rolled back: delivered again later (the consumer's failure counters tell why).
            Outcome::Failed => return,
            // Not handled (behind a failed message of its group, or at shutdown): delivered again.
            Outcome::Released => return,
            _ => {}
        }
        self.messages.fetch_add(1, Ordering::Relaxed);
        if d.left_in_queue {
            self.left_in_queue.fetch_add(1, Ordering::Relaxed);
        }
        let Some(envelope) = &d.envelope else {
            return;
        };
        if envelope.aggregate_id == *self.rolled_back_order.lock().unwrap() {
            self.rolled_back_event_received
                .store(true, Ordering::Relaxed);
        }
        let id = envelope.event_id;
        let mut times = self.times.lock().unwrap();
        let Times {
            committed,
            received,
            matched,
        } = &mut *times;
        match received.entry(id) {
            Entry::Vacant(entry) => {
                entry.insert(d.received_at);
                if committed.contains_key(&id) {
                    *matched += 1;
                }
            }
            // Keep the first delivery's time.
            Entry::Occupied(mut entry) => {
                let first = (*entry.get()).min(d.received_at);
                entry.insert(first);
            }
        }
    }

    /// (events written, events of this run received)
    pub(super) fn progress(&self) -> (u64, u64) {
        let times = self.times.lock().unwrap();
        (times.committed.len() as u64, times.matched)
    }
}

impl Tally {
    /// Takes what only the stopped consumer knows: the events its handler found out of order,
    /// and the failures it recovered from (failed receives, handlers, deletes; details in its log).
    pub(super) fn consumer_stopped(&self, consumer: &Consumer, out_of_order: HashSet<Uuid>) {
        self.out_of_order.lock().unwrap().extend(out_of_order);
        let m = consumer.metrics();
        let reasons = ["receive", "handler", "database", "delete", "visibility"];
        let failures: Vec<String> = reasons
            .iter()
            .filter(|r| m.failures(r) > 0)
            .map(|r| format!("{r}: {}", m.failures(r)))
            .collect();
        self.consumer_errors.fetch_add(
            reasons.iter().map(|r| m.failures(r)).sum(),
            Ordering::Relaxed,
        );
        if !failures.is_empty() {
            *self.last_consumer_error.lock().unwrap() =
                Some(format!("{} (see the consumer's log)", failures.join(", ")));
        }
    }

    /// The report's figures from what was tallied: events, latencies, order, duplicates. The
    /// caller fills in what the tally cannot know (times, the read model, the rolled-back order).
    pub(super) fn report(&self, stats: OutboxStats, rolled_back_order: Uuid) -> Report {
        let times = self.times.lock().unwrap();
        let (committed, received) = (&times.committed, &times.received);
        let mut latencies: Vec<Duration> = committed
            .iter()
            .filter_map(|(id, at)| received.get(id).map(|r| r.saturating_duration_since(*at)))
            .collect();
        latencies.sort_unstable();
        let percentile = |p: usize| {
            latencies
                .get((latencies.len() * p).div_ceil(100).saturating_sub(1))
                .copied()
                .unwrap_or_default()
        };
        let events_received = latencies.len() as u64;
        let foreign = received
            .keys()
            .filter(|id| !committed.contains_key(id))
            .count() as u64;
        let order_violations = self
            .out_of_order
            .lock()
            .unwrap()
            .iter()
            .filter(|id| committed.contains_key(id))
            .count() as u64;
        Report {
            orders_placed: self.orders_placed.load(Ordering::Relaxed),
            events_written: committed.len() as u64,
            events_published: stats.published_last_hour,
            events_received,
            messages_received: self.messages.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            redeliveries_injected: self.left_in_queue.load(Ordering::Relaxed),
            lost: committed.len() as u64 - events_received,
            order_violations,
            foreign_messages: foreign + self.unreadable.load(Ordering::Relaxed),
            rolled_back_order,
            rolled_back_refused: false,
            rolled_back_row_exists: false,
            rolled_back_event_received: self.rolled_back_event_received.load(Ordering::Relaxed),
            stale_summaries: 0,
            latency_p50: percentile(50),
            latency_p99: percentile(99),
            latency_max: latencies.last().copied().unwrap_or_default(),
            write_time: Duration::ZERO,
            total_time: Duration::ZERO,
            timed_out: false,
            consumer_errors: (
                self.consumer_errors.load(Ordering::Relaxed),
                self.last_consumer_error.lock().unwrap().clone(),
            ),
            stats,
        }
    }
}
