//! The consumer's Prometheus metrics, labelled with the consumer's name.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    consumer: String,
    reason: String,
}

/// Every `reason` of `outbox_consumer_failures_total`. Each is exported from the start, at 0: a
/// series that appears only with its first failure hides that failure from `increase()` and
/// `rate()`, so an alert on them missed it (Prometheus counts from a series' first sample).
pub const FAILURE_REASONS: &[&str] = &[
    "handler",
    "database",
    "offload",
    "missing_event_id",
    "unknown_event_type",
    "undecodable",
    "bad_pointer",
    "receive",
    "delete",
    "visibility",
    "unit",
];

/// A consumer's counters, readable while it runs (cheap to clone: shared).
///
/// | name | type | meaning |
/// |---|---|---|
/// | `outbox_consumer_received_total{consumer}` | counter | messages received: each is then handled, a duplicate, released, or one of the failures of a message (`handler`, `database`, `offload`, or a bad-input reason) — a unit of work that ended abnormally (`unit`) leaves its messages uncounted |
/// | `outbox_consumer_released_total{consumer}` | counter | messages given back unhandled, visible again for another receive: at shutdown (waiting for a handler, the database or S3, or got by a poll finishing), or a FIFO message behind a failed one of its group |
/// | `outbox_consumer_handled_total{consumer}` | counter | events handled and committed |
/// | `outbox_consumer_duplicates_total{consumer}` | counter | duplicates skipped by the inbox |
/// | `outbox_consumer_failures_total{consumer,reason}` | counter | failures by reason: `handler`, `database`, `missing_event_id`, `unknown_event_type`, `undecodable`, `bad_pointer` (an S3 pointer not read: see [`BadInput::BadPointer`](super::BadInput::BadPointer)), `receive`, `delete`, `visibility`, `unit` (a unit of work that ended abnormally), `offload` (S3 failed or refused an offloaded payload); each exported at 0 from the start ([`FAILURE_REASONS`]) |
/// | `outbox_consumer_handler_seconds{consumer}` | histogram | time from taking a connection for the event (its wait for one included) to the commit, per handled event |
#[derive(Clone)]
pub struct ConsumerMetrics {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    registry: Registry,
    received: Counter,
    handled: Counter,
    duplicates: Counter,
    released: Counter,
    failures: Family<ReasonLabel, Counter>,
    latency: Histogram,
}

impl std::fmt::Debug for ConsumerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerMetrics")
            .field("consumer", &self.inner.name)
            .field("received", &self.received())
            .field("handled", &self.handled())
            .field("duplicates", &self.duplicates())
            .field("released", &self.released())
            .finish_non_exhaustive()
    }
}

impl ConsumerMetrics {
    pub(crate) fn new(name: &str) -> Self {
        let mut registry = Registry::default();
        let consumer_label = || {
            (
                std::borrow::Cow::Borrowed("consumer"),
                std::borrow::Cow::Owned(name.to_owned()),
            )
        };
        let received = Counter::default();
        let handled = Counter::default();
        let duplicates = Counter::default();
        let released = Counter::default();
        let latency = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        {
            let sub = registry.sub_registry_with_label(consumer_label());
            sub.register(
                "outbox_consumer_received",
                "Messages received",
                received.clone(),
            );
            sub.register(
                "outbox_consumer_handled",
                "Events handled and committed",
                handled.clone(),
            );
            sub.register(
                "outbox_consumer_duplicates",
                "Duplicates the inbox recognised and skipped",
                duplicates.clone(),
            );
            sub.register(
                "outbox_consumer_released",
                "Messages given back unhandled, visible again for another receive",
                released.clone(),
            );
            sub.register(
                "outbox_consumer_handler_seconds",
                "Time from a handled event's connection checkout to its commit",
                latency.clone(),
            );
        }
        let failures = Family::<ReasonLabel, Counter>::default();
        for reason in FAILURE_REASONS {
            // Created at 0; the guard is let go at once.
            drop(failures.get_or_create(&ReasonLabel {
                consumer: name.to_owned(),
                reason: (*reason).to_owned(),
            }));
        }
        registry.register(
            "outbox_consumer_failures",
            "Failures by reason",
            failures.clone(),
        );
        ConsumerMetrics {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                registry,
                received,
                handled,
                duplicates,
                released,
                failures,
                latency,
            }),
        }
    }

    /// Messages received so far.
    pub fn received(&self) -> u64 {
        self.inner.received.get()
    }

    /// Events handled and committed so far.
    pub fn handled(&self) -> u64 {
        self.inner.handled.get()
    }

    /// Duplicates skipped so far.
    pub fn duplicates(&self) -> u64 {
        self.inner.duplicates.get()
    }

    /// Messages given back unhandled so far (see the table above).
    pub fn released(&self) -> u64 {
        self.inner.released.get()
    }

    /// Failures with `reason` so far (one of [`FAILURE_REASONS`]; 0 for any other).
    pub fn failures(&self, reason: &str) -> u64 {
        // Read without creating: a misspelt reason must not become an exported series.
        self.inner
            .failures
            .get(&self.label(reason))
            .map_or(0, |c| c.get())
    }

    /// The metrics in the text exposition format (OpenMetrics, ending in `# EOF`).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.inner.registry);
        out
    }

    fn label(&self, reason: &str) -> ReasonLabel {
        ReasonLabel {
            consumer: self.inner.name.clone(),
            reason: reason.to_owned(),
        }
    }

    pub(crate) fn on_received(&self, n: usize) {
        self.inner.received.inc_by(n as u64);
    }

    pub(crate) fn on_handled(&self, took: Duration) {
        self.inner.handled.inc();
        self.inner.latency.observe(took.as_secs_f64());
    }

    pub(crate) fn on_released(&self, n: usize) {
        self.inner.released.inc_by(n as u64);
    }

    pub(crate) fn on_duplicate(&self) {
        self.inner.duplicates.inc();
    }

    pub(crate) fn on_failure(&self, reason: &str) {
        self.inner.failures.get_or_create(&self.label(reason)).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::BadInput;

    /// Every failure reason is exported at 0 from the start (they appeared only with their first
    /// failure, which `increase()` cannot see); reading one never adds a series.
    #[test]
    fn every_failure_reason_is_exported_from_the_start() {
        let metrics = ConsumerMetrics::new("orders");
        let text = metrics.encode();
        for reason in FAILURE_REASONS {
            let series = format!(
                "outbox_consumer_failures_total{{consumer=\"orders\",reason=\"{reason}\"}} 0"
            );
            assert!(text.contains(&series), "{series} missing from:\n{text}");
        }
        assert_eq!(metrics.failures("no such reason"), 0);
        assert!(!metrics.encode().contains("no such reason"));
        metrics.on_failure("handler");
        assert_eq!(metrics.failures("handler"), 1);
    }

    /// The list names every bad-input reason (a new one would otherwise be missing from it).
    #[test]
    fn the_reasons_include_every_bad_input() {
        // Does not compile once a variant is added, until it is listed here too.
        let _listed = |bad: BadInput| match bad {
            BadInput::MissingEventId
            | BadInput::UnknownEventType
            | BadInput::Undecodable
            | BadInput::BadPointer => {}
        };
        for bad in [
            BadInput::MissingEventId,
            BadInput::UnknownEventType,
            BadInput::Undecodable,
            BadInput::BadPointer,
        ] {
            assert!(FAILURE_REASONS.contains(&bad.as_str()), "{bad:?}");
        }
    }
}
