//! Prometheus metrics of the relay. The names are a public contract (see the README's "Operating"
//! section); they do not change without a major version.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::stats::Gauges;

/// The most distinct event types the relay's metrics give a label value of their own; events of
/// further types count under [`OTHER_EVENT_TYPES`]. Event types come from the rows: a writer that
/// makes them up per tenant or per entity would otherwise grow every scrape, and the relay's
/// memory, without bound.
pub const MAX_EVENT_TYPE_LABELS: usize = 1000;

/// The `event_type` label value of events past [`MAX_EVENT_TYPE_LABELS`], and of event types
/// longer than [`MAX_EVENT_TYPE_LABEL_BYTES`].
pub const OTHER_EVENT_TYPES: &str = "_other";

/// The longest event type given a label value of its own, in bytes: a row written by hand with a
/// 100 000-character type made every scrape carry it on each of its series.
pub const MAX_EVENT_TYPE_LABEL_BYTES: usize = 256;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventTypeLabel {
    event_type: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabel {
    event_type: String,
    reason: &'static str,
}

/// The relay's metrics. Cheap to clone (clones share the values). Give one to
/// [`RelayBuilder::metrics`](crate::RelayBuilder::metrics) and serve [`encode`](Self::encode) on
/// your metrics endpoint.
///
/// | name | type | meaning |
/// |---|---|---|
/// | `outbox_events_published_total{event_type}` | counter | events the broker accepted |
/// | `outbox_events_failed_total{event_type,reason}` | counter | failed publish attempts of single events, by [`FailureKind`](crate::FailureKind) (`throttled`, `too_large`, …) |
/// | `outbox_events_dead_lettered_total{event_type}` | counter | events dead-lettered |
/// | `outbox_events_deferred_total{event_type,reason}` | counter | events put back unsent without counting an attempt: their destination unavailable (an open circuit breaker, S3 down for an offloaded payload: `reason` as above) or the publish deadline first (`not_sent`), or the publisher still preparing them (`in_progress`: an S3 upload going on past the offload wait) |
/// | `outbox_relay_errors_total` | counter | batches failed by the database or the broker as a whole |
/// | `outbox_relay_worker_restarts_total` | counter | relay workers that died (panic, fatal error) and were restarted |
/// | `outbox_pending_events` | gauge | events not yet published (excluding dead letters) |
/// | `outbox_dead_letter_events` | gauge | dead letters |
/// | `outbox_oldest_pending_age_seconds` | gauge | age of the pending event first in line, the lowest `seq` (commit order), from its `created_at` (its transaction's start); 0 when none |
/// | `outbox_blocked_aggregates` | gauge | aggregates with a dead letter: their later events, written or to come, wait for it |
/// | `outbox_gauges_refreshed_timestamp_seconds` | gauge | Unix time of the gauges' last refresh: the four gauges above keep their last values while the database does not answer, so alert when this stops moving |
/// | `outbox_batch_duration_seconds` | histogram | claim → publish → commit of one batch |
/// | `outbox_commit_to_publish_seconds` | histogram | event written → accepted by the broker (by the database's clock) |
/// | `outbox_database_clock_ahead_seconds` | gauge | how far the database's clock is ahead of the relay's (negative: behind), measured at each gauge refresh |
///
/// Gauges are refreshed from one cheap query on an interval, not per event. The `event_type`
/// label takes at most [`MAX_EVENT_TYPE_LABELS`] values; further types count under
/// [`OTHER_EVENT_TYPES`].
#[derive(Clone)]
pub struct RelayMetrics {
    registry: Arc<Registry>,
    /// The event types with a label value of their own (at most [`MAX_EVENT_TYPE_LABELS`]).
    event_types: Arc<RwLock<HashSet<String>>>,
    published: Family<EventTypeLabel, Counter>,
    failed: Family<FailureLabel, Counter>,
    dead_lettered: Family<EventTypeLabel, Counter>,
    deferred: Family<FailureLabel, Counter>,
    relay_errors: Counter,
    worker_restarts: Counter,
    pending: Gauge,
    dead_letters: Gauge,
    oldest_pending_age: Gauge<f64, AtomicU64>,
    blocked_aggregates: Gauge,
    gauges_refreshed: Gauge<f64, AtomicU64>,
    database_clock_ahead: Gauge<f64, AtomicU64>,
    batch_duration: Histogram,
    commit_to_publish: Histogram,
}

impl std::fmt::Debug for RelayMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayMetrics").finish_non_exhaustive()
    }
}

impl Default for RelayMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl RelayMetrics {
    /// Creates the metrics in a registry of their own.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let published = Family::<EventTypeLabel, Counter>::default();
        let failed = Family::<FailureLabel, Counter>::default();
        let dead_lettered = Family::<EventTypeLabel, Counter>::default();
        let deferred = Family::<FailureLabel, Counter>::default();
        let relay_errors = Counter::default();
        let worker_restarts = Counter::default();
        let pending = Gauge::default();
        let dead_letters = Gauge::default();
        let oldest_pending_age = Gauge::<f64, AtomicU64>::default();
        let blocked_aggregates = Gauge::default();
        let gauges_refreshed = Gauge::<f64, AtomicU64>::default();
        let database_clock_ahead = Gauge::<f64, AtomicU64>::default();
        // 1 ms … ~33 s.
        let batch_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let commit_to_publish = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "outbox_events_published",
            "Events the broker accepted",
            published.clone(),
        );
        registry.register(
            "outbox_events_failed",
            "Failed publish attempts of single events",
            failed.clone(),
        );
        registry.register(
            "outbox_events_dead_lettered",
            "Events dead-lettered",
            dead_lettered.clone(),
        );
        registry.register(
            "outbox_events_deferred",
            "Events put back unsent without counting an attempt (destination unavailable, or the \
             publish deadline first)",
            deferred.clone(),
        );
        registry.register(
            "outbox_relay_errors",
            "Batches failed by the database or by the broker as a whole",
            relay_errors.clone(),
        );
        registry.register(
            "outbox_relay_worker_restarts",
            "Relay workers that died (a panic or a fatal error) and were restarted",
            worker_restarts.clone(),
        );
        registry.register(
            "outbox_pending_events",
            "Events not yet published, excluding dead letters",
            pending.clone(),
        );
        registry.register(
            "outbox_dead_letter_events",
            "Dead-lettered events",
            dead_letters.clone(),
        );
        registry.register(
            "outbox_oldest_pending_age_seconds",
            "Age of the oldest pending event, 0 when there is none",
            oldest_pending_age.clone(),
        );
        registry.register(
            "outbox_blocked_aggregates",
            "Aggregates held back by a dead letter",
            blocked_aggregates.clone(),
        );
        registry.register(
            "outbox_gauges_refreshed_timestamp_seconds",
            "Unix time of the last refresh of the pending, dead-letter, age and blocked gauges",
            gauges_refreshed.clone(),
        );
        registry.register(
            "outbox_database_clock_ahead_seconds",
            "How far the database's clock is ahead of the relay's (negative: behind)",
            database_clock_ahead.clone(),
        );
        registry.register(
            "outbox_batch_duration_seconds",
            "Duration of one batch: claim, publish, commit",
            batch_duration.clone(),
        );
        registry.register(
            "outbox_commit_to_publish_seconds",
            "Time from an event's transaction to the broker accepting it",
            commit_to_publish.clone(),
        );
        RelayMetrics {
            registry: Arc::new(registry),
            event_types: Arc::default(),
            published,
            failed,
            dead_lettered,
            deferred,
            relay_errors,
            worker_restarts,
            pending,
            dead_letters,
            oldest_pending_age,
            blocked_aggregates,
            gauges_refreshed,
            database_clock_ahead,
            batch_duration,
            commit_to_publish,
        }
    }

    /// The metrics in the Prometheus text exposition format (OpenMetrics flavour).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// `event_type`, or [`OTHER_EVENT_TYPES`] once [`MAX_EVENT_TYPE_LABELS`] others have a label
    /// (or when it is longer than [`MAX_EVENT_TYPE_LABEL_BYTES`]).
    fn label(&self, event_type: String) -> String {
        if event_type.len() > MAX_EVENT_TYPE_LABEL_BYTES {
            return OTHER_EVENT_TYPES.to_owned();
        }
        // Control characters escaped (`\r` as the two characters `\` `r`; a newline the encoder
        // escapes itself): a raw carriage return in a label made a scraper's parser refuse the
        // whole page (black-box run).
        let event_type = if event_type.chars().any(|c| c.is_control() && c != '\n') {
            event_type
                .chars()
                .map(|c| {
                    if c.is_control() && c != '\n' {
                        c.escape_default().to_string()
                    } else {
                        c.to_string()
                    }
                })
                .collect()
        } else {
            event_type
        };
        let known = |seen: &HashSet<String>| seen.contains(&event_type);
        if known(&self.event_types.read().unwrap_or_else(|e| e.into_inner())) {
            return event_type;
        }
        let mut seen = self.event_types.write().unwrap_or_else(|e| e.into_inner());
        if known(&seen) {
            return event_type;
        }
        if seen.len() >= MAX_EVENT_TYPE_LABELS {
            return OTHER_EVENT_TYPES.to_owned();
        }
        seen.insert(event_type.clone());
        event_type
    }

    /// Counts a published event; `age_secs` is its age by the relay's clock (now less its
    /// `created_at`, which the database's clock wrote), corrected here by the last measured offset
    /// between the two clocks.
    pub(crate) fn published(&self, event_type: String, age_secs: f64) {
        let event_type = self.label(event_type);
        self.published
            .get_or_create(&EventTypeLabel { event_type })
            .inc();
        self.commit_to_publish
            .observe((age_secs + self.database_clock_ahead.get()).max(0.0));
    }

    /// Records how far the database's clock is ahead of the relay's.
    pub(crate) fn database_clock(&self, ahead_secs: f64) {
        self.database_clock_ahead.set(ahead_secs);
    }

    pub(crate) fn failed(&self, event_type: String, reason: crate::FailureKind, dead: bool) {
        let label = FailureLabel {
            event_type: self.label(event_type),
            reason: reason.as_str(),
        };
        self.failed.get_or_create(&label).inc();
        if dead {
            self.dead_lettered
                .get_or_create(&EventTypeLabel {
                    event_type: label.event_type,
                })
                .inc();
        }
    }

    pub(crate) fn deferred(&self, event_type: String, reason: crate::FailureKind) {
        let label = FailureLabel {
            event_type: self.label(event_type),
            reason: reason.as_str(),
        };
        self.deferred.get_or_create(&label).inc();
    }

    pub(crate) fn relay_error(&self) {
        self.relay_errors.inc();
    }

    pub(crate) fn worker_restart(&self) {
        self.worker_restarts.inc();
    }

    /// Relay workers restarted so far (`outbox_relay_worker_restarts_total`).
    pub fn worker_restarts(&self) -> u64 {
        self.worker_restarts.get()
    }

    pub(crate) fn batch(&self, secs: f64) {
        self.batch_duration.observe(secs);
    }

    pub(crate) fn refresh(&self, s: &Gauges) {
        self.pending.set(s.pending);
        self.dead_letters.set(s.dead_letters);
        self.oldest_pending_age
            .set(s.oldest_pending_age_secs.unwrap_or(0.0));
        self.blocked_aggregates.set(s.blocked_aggregates);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        self.gauges_refreshed.set(now.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_past_the_limit_count_under_one_label() {
        let m = RelayMetrics::new();
        for i in 0..MAX_EVENT_TYPE_LABELS + 5 {
            m.published(format!("tenant-{i}.created"), 0.01);
        }
        m.published("tenant-0.created".to_owned(), 0.01);
        m.failed(
            "tenant-9999.created".to_owned(),
            crate::FailureKind::Throttled,
            true,
        );
        let text = m.encode();
        assert!(
            text.contains(r#"outbox_events_published_total{event_type="tenant-0.created"} 2"#),
            "a known type keeps its label"
        );
        assert!(text.contains(r#"outbox_events_published_total{event_type="_other"} 5"#));
        assert!(
            text.contains(
                r#"outbox_events_failed_total{event_type="_other",reason="throttled"} 1"#
            )
        );
        assert!(text.contains(r#"outbox_events_dead_lettered_total{event_type="_other"} 1"#));
        let labels = text
            .lines()
            .filter(|l| l.starts_with("outbox_events_published_total{"))
            .count();
        assert_eq!(labels, MAX_EVENT_TYPE_LABELS + 1);
    }

    #[test]
    fn an_over_long_event_type_counts_under_the_other_label() {
        let m = RelayMetrics::new();
        m.published("u".repeat(100_000), 0.01);
        m.published("u".repeat(MAX_EVENT_TYPE_LABEL_BYTES), 0.01);
        let text = m.encode();
        assert!(text.contains(r#"outbox_events_published_total{event_type="_other"} 1"#));
        assert!(!text.contains(&"u".repeat(MAX_EVENT_TYPE_LABEL_BYTES + 1)));
        assert!(text.contains(&format!(
            r#"{{event_type="{}"}} 1"#,
            "u".repeat(MAX_EVENT_TYPE_LABEL_BYTES)
        )));
    }

    #[test]
    fn control_characters_in_an_event_type_are_escaped_in_its_label() {
        let m = RelayMetrics::new();
        m.published("cr\rret\u{1b}".into(), 0.01);
        let text = m.encode();
        assert!(!text.contains('\r') && !text.contains('\u{1b}'), "{text:?}");
        assert!(
            text.contains(r#"{event_type="cr\\rret\\u{1b}"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn event_ages_are_read_on_the_databases_clock() {
        // The relay's clock is 10 s behind the database's: an event written 1 s ago by the
        // database's clock looks 9 s in the future to the relay (it counted as 0 s).
        let m = RelayMetrics::new();
        m.database_clock(10.0);
        m.published("order.placed".to_owned(), -9.0);
        let text = m.encode();
        let sum: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("outbox_commit_to_publish_seconds_sum "))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no histogram sum in {text}"));
        assert!((sum - 1.0).abs() < 1e-9, "{sum}");
        assert!(
            text.contains("outbox_database_clock_ahead_seconds 10.0"),
            "{text}"
        );
    }
}
