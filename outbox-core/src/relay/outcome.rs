//! Turning publish outcomes into what the batch records: ids to mark processed and failures to
//! record in one statement each.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::BatchReport;
use super::Inner;
use super::clip::Clipped;
use super::line_budget::LineBudget;
use crate::backoff::{Disposition, RetryPolicy};
use crate::failure::FailureKind;
use crate::metrics::RelayMetrics;
use crate::publisher::{
    ClaimedEvent, MAX_PUT_BACK, MIN_PUT_BACK, PublishOutcome, Publisher, UNAVAILABLE_RETRY_DELAY,
};

/// The longest `last_error` stored, in characters; longer errors are cut at a character boundary.
pub const MAX_LAST_ERROR_CHARS: usize = 2_000;

/// A published event, as acknowledged in one statement: its primary key on the partitioned layout
/// (the creation time lets PostgreSQL prune the partitions that cannot hold it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Acked {
    pub(crate) id: Uuid,
    pub(crate) created_at: DateTime<Utc>,
}

/// A failed event, as recorded in one statement.
pub(crate) struct Failure {
    pub(crate) id: Uuid,
    /// The event's creation time (with the id, its key on the partitioned layout).
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) error: String,
    pub(crate) delay_secs: f64,
    pub(crate) dead: bool,
    /// Whether the failure counts as an attempt (not when the destination was unavailable).
    pub(crate) counted: bool,
    /// Put back uncounted because its destination was unavailable (or the deadline came first):
    /// what the relay warns about (see `outage.rs`); not an event the publisher is still
    /// preparing ([`FailureKind::InProgress`]).
    pub(crate) outage: bool,
}

/// What one outcome adds to the metrics, once the batch has committed.
enum Tally {
    Published {
        event_type: String,
        commit_to_publish_secs: f64,
    },
    Failed {
        event_type: String,
        reason: FailureKind,
        dead: bool,
    },
    Deferred {
        event_type: String,
        reason: FailureKind,
    },
}

/// A batch's additions to the metrics: counted only after its commit (a batch rolled back marked
/// nothing and dead-lettered nothing; its events are published again later).
#[must_use = "count them once the batch has committed"]
pub(crate) struct Tallies(Vec<Tally>);

impl Tallies {
    /// Adds them to `metrics`.
    pub(crate) fn count(self, metrics: Option<&RelayMetrics>) {
        let Some(m) = metrics else { return };
        for tally in self.0 {
            match tally {
                Tally::Published {
                    event_type,
                    commit_to_publish_secs,
                } => m.published(event_type, commit_to_publish_secs),
                Tally::Failed {
                    event_type,
                    reason,
                    dead,
                } => m.failed(event_type, reason, dead),
                Tally::Deferred { event_type, reason } => m.deferred(event_type, reason),
            }
        }
    }
}

/// Collects a batch's outcomes.
pub(crate) struct Recorder<'a> {
    policy: &'a RetryPolicy,
    /// Whether there are metrics to tally for.
    metered: bool,
    ordered: bool,
    published: Vec<Acked>,
    failures: Vec<Failure>,
    tallies: Vec<Tally>,
    /// Aggregates with a failed event in this batch: their later events wait.
    blocked: HashSet<(String, String)>,
    /// The relay's budget of retried events logged at `warn`; those of this batch logged at
    /// `debug` instead, and the distinct reasons of the latter (a few).
    warnings: &'a LineBudget,
    retries_quiet: usize,
    quiet_reasons: Vec<String>,
    /// The same for dead-lettered events, logged at `error`.
    dead_letter_lines: &'a LineBudget,
    dead_quiet: usize,
    dead_reasons: Vec<String>,
}

/// How many distinct reasons the count line of a batch's quiet retries names.
const QUIET_REASONS: usize = 4;

/// Adds `reason` to a count line's `reasons`, unless named already or [`QUIET_REASONS`] are.
fn note_reason(reasons: &mut Vec<String>, reason: String) {
    if reasons.len() < QUIET_REASONS && !reasons.contains(&reason) {
        reasons.push(reason);
    }
}

/// `error` as it can be stored in `last_error`: NUL removed (PostgreSQL text cannot hold it, and
/// one such error would fail the whole batch's statement) and cut to [`MAX_LAST_ERROR_CHARS`].
pub(crate) fn clean_error(error: &str) -> String {
    cut(error.chars().filter(|&c| c != '\0'), "…")
}

/// `error` (already [cleaned](clean_error)) in ASCII, for a database whose encoding lacks some
/// Unicode characters (LATIN1, …): each other character written `\u{…}`, cut again to
/// [`MAX_LAST_ERROR_CHARS`].
pub(crate) fn ascii_error(error: &str) -> String {
    if error.is_ascii() {
        return error.to_owned();
    }
    let mut out = String::with_capacity(error.len() * 2);
    for c in error.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            out.extend(c.escape_unicode());
        }
    }
    cut(out.chars(), "...")
}

/// The first [`MAX_LAST_ERROR_CHARS`] characters of `chars`; when there are more, the last ones
/// kept are `marker` (the cut stays within the limit).
fn cut(chars: impl Iterator<Item = char> + Clone, marker: &str) -> String {
    let mut out: String = chars.clone().take(MAX_LAST_ERROR_CHARS).collect();
    if chars.clone().nth(MAX_LAST_ERROR_CHARS).is_some() {
        let keep = MAX_LAST_ERROR_CHARS.saturating_sub(marker.chars().count());
        if let Some((at, _)) = out.char_indices().nth(keep) {
            out.truncate(at);
        }
        out.push_str(marker);
    }
    out
}

impl<'a> Recorder<'a> {
    pub(crate) fn new<P: Publisher>(inner: &'a Inner<P>, ordered: bool) -> Self {
        Recorder {
            policy: &inner.policy,
            metered: inner.metrics.is_some(),
            ordered,
            published: Vec::new(),
            failures: Vec::new(),
            tallies: Vec::new(),
            blocked: HashSet::new(),
            warnings: &inner.retry_warnings,
            retries_quiet: 0,
            quiet_reasons: Vec::new(),
            dead_letter_lines: &inner.dead_letter_lines,
            dead_quiet: 0,
            dead_reasons: Vec::new(),
        }
    }

    /// Whether an earlier event of `event`'s aggregate failed in this batch.
    pub(crate) fn is_blocked(&self, event: &ClaimedEvent) -> bool {
        // No failure yet (the common case): no key to build.
        self.ordered
            && !self.blocked.is_empty()
            && self
                .blocked
                .contains(&(event.aggregate_type.clone(), event.aggregate_id.clone()))
    }

    fn block(&mut self, event: &ClaimedEvent) {
        if self.ordered {
            self.blocked
                .insert((event.aggregate_type.clone(), event.aggregate_id.clone()));
        }
    }

    /// Records one outcome per event of `wave` (a missing outcome counts as a retry).
    pub(crate) fn record_all(
        &mut self,
        wave: &[ClaimedEvent],
        outcomes: Vec<PublishOutcome>,
        report: &mut BatchReport,
    ) {
        let mut outcomes = outcomes.into_iter();
        for event in wave {
            let outcome = outcomes.next().unwrap_or_else(|| {
                PublishOutcome::retry(FailureKind::Other, "the publisher returned no outcome")
            });
            // One call held several events of this aggregate (the publisher keeps their order) and
            // an earlier one failed: this one was held back, not tried. Released without an
            // attempt, like the later waves' events of a failed aggregate.
            if self.is_blocked(event) {
                if outcome == PublishOutcome::Published {
                    tracing::error!(
                        event_id = %event.id, aggregate_id = %Clipped(&event.aggregate_id),
                        "the publisher accepted an event after an earlier one of its aggregate \
                         failed in the same call: per-aggregate order is broken"
                    );
                } else {
                    report.released += 1;
                    continue;
                }
            }
            self.record(event, outcome, report);
        }
    }

    fn record(&mut self, event: &ClaimedEvent, outcome: PublishOutcome, report: &mut BatchReport) {
        let attempt = event.attempts.saturating_add(1);
        let (error, permanent) = match outcome {
            PublishOutcome::Published => {
                tracing::debug!(
                    event_id = %event.id, event_type = %Clipped(&event.event_type),
                    aggregate_id = %Clipped(&event.aggregate_id), attempt, "published"
                );
                self.published.push(Acked {
                    id: event.id,
                    created_at: event.created_at,
                });
                if self.metered {
                    let age = chrono::Utc::now() - event.created_at;
                    self.tallies.push(Tally::Published {
                        event_type: event.event_type.clone(),
                        commit_to_publish_secs: age.as_seconds_f64(),
                    });
                }
                return;
            }
            PublishOutcome::Retry(e) => (e, false),
            PublishOutcome::Permanent(e) => (e, true),
            PublishOutcome::Unavailable(e) => {
                report.deferred += 1;
                if e.kind() == FailureKind::InProgress {
                    report.in_progress += 1;
                }
                let delay = e.put_back().map_or_else(
                    || UNAVAILABLE_RETRY_DELAY.mul_f64(1.0 - 0.2 * rand::random::<f64>()),
                    |d| d.clamp(MIN_PUT_BACK, MAX_PUT_BACK),
                );
                let error = clean_error(e.message());
                tracing::debug!(
                    event_id = %event.id, event_type = %Clipped(&event.event_type),
                    aggregate_id = %Clipped(&event.aggregate_id), attempt,
                    retry_in_ms = delay.as_millis() as u64, error = %error,
                    "event put back without counting an attempt (destination unavailable, or in progress)"
                );
                if self.metered {
                    self.tallies.push(Tally::Deferred {
                        event_type: event.event_type.clone(),
                        reason: e.kind(),
                    });
                }
                self.block(event);
                self.failures.push(Failure {
                    id: event.id,
                    created_at: event.created_at,
                    error,
                    delay_secs: delay.as_secs_f64(),
                    dead: false,
                    counted: false,
                    outage: e.kind() != FailureKind::InProgress,
                });
                return;
            }
        };
        let reason = error.kind();
        let error = clean_error(error.message());
        let disposition = self
            .policy
            .on_failure(event.attempts, permanent, rand::random());
        let (dead, delay_secs) = match disposition {
            Disposition::DeadLetter => {
                report.dead_lettered += 1;
                // A few one by one, relay-wide; the rest at `debug`, counted per batch.
                if self.dead_letter_lines.take() {
                    tracing::error!(
                        event_id = %event.id, event_type = %Clipped(&event.event_type),
                        aggregate_id = %Clipped(&event.aggregate_id), attempt,
                        permanent, %reason, error = %error, "event dead-lettered"
                    );
                } else {
                    self.dead_quiet += 1;
                    note_reason(&mut self.dead_reasons, reason.to_string());
                    tracing::debug!(
                        event_id = %event.id, event_type = %Clipped(&event.event_type),
                        aggregate_id = %Clipped(&event.aggregate_id), attempt,
                        permanent, %reason, error = %error, "event dead-lettered"
                    );
                }
                (true, 0.0)
            }
            Disposition::RetryAfter(d) => {
                report.retried += 1;
                let retry_in_ms = d.as_millis() as u64;
                // A few one by one, relay-wide; the rest at `debug`, counted per batch (a call
                // that fails for a whole batch made a hundred lines).
                if self.warnings.take() {
                    tracing::warn!(
                        event_id = %event.id, event_type = %Clipped(&event.event_type),
                        aggregate_id = %Clipped(&event.aggregate_id), attempt,
                        retry_in_ms, %reason, error = %error, "publish failed; will retry"
                    );
                } else {
                    self.retries_quiet += 1;
                    note_reason(&mut self.quiet_reasons, reason.to_string());
                    tracing::debug!(
                        event_id = %event.id, event_type = %Clipped(&event.event_type),
                        aggregate_id = %Clipped(&event.aggregate_id), attempt,
                        retry_in_ms, %reason, error = %error, "publish failed; will retry"
                    );
                }
                (false, d.as_secs_f64())
            }
        };
        if self.metered {
            self.tallies.push(Tally::Failed {
                event_type: event.event_type.clone(),
                reason,
                dead,
            });
        }
        self.block(event);
        self.failures.push(Failure {
            id: event.id,
            created_at: event.created_at,
            error,
            delay_secs,
            dead,
            counted: true,
            outage: false,
        });
    }

    /// The events to mark processed, the failures to record, and what to add to the metrics once
    /// both are committed.
    pub(crate) fn finish(self) -> (Vec<Acked>, Vec<Failure>, Tallies) {
        if self.dead_quiet > 0 {
            tracing::error!(
                events = self.dead_quiet,
                reasons = %self.dead_reasons.join(", "),
                "{} more events of this batch dead-lettered (each logged at debug level; `outbox \
                 dead-letters list` shows them)",
                self.dead_quiet
            );
        }
        if self.retries_quiet > 0 {
            tracing::warn!(
                events = self.retries_quiet,
                reasons = %self.quiet_reasons.join(", "),
                "publish failed for {} more events of this batch; will retry (each logged at \
                 debug level)",
                self.retries_quiet
            );
        }
        (self.published, self.failures, Tallies(self.tallies))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_lose_nul_and_are_cut_at_a_character_boundary() {
        assert_eq!(clean_error("a\0b"), "ab");
        let long = "é".repeat(MAX_LAST_ERROR_CHARS + 10);
        let cut = clean_error(&long);
        assert_eq!(cut.chars().count(), MAX_LAST_ERROR_CHARS);
        assert!(cut.ends_with('…'));
        let exact = "x".repeat(MAX_LAST_ERROR_CHARS);
        assert_eq!(clean_error(&exact), exact);
        let with_nul = format!("{}\0", "x".repeat(MAX_LAST_ERROR_CHARS));
        assert_eq!(clean_error(&with_nul), "x".repeat(MAX_LAST_ERROR_CHARS));
    }

    #[test]
    fn ascii_errors_escape_every_other_character_and_stay_within_the_limit() {
        assert_eq!(ascii_error("plain"), "plain");
        assert_eq!(
            ascii_error("échec … 失敗"),
            "\\u{e9}chec \\u{2026} \\u{5931}\\u{6557}"
        );
        let long = clean_error(&"é".repeat(MAX_LAST_ERROR_CHARS + 10));
        let ascii = ascii_error(&long);
        assert!(ascii.is_ascii());
        assert_eq!(ascii.chars().count(), MAX_LAST_ERROR_CHARS);
        assert!(ascii.ends_with("..."), "{}", &ascii[ascii.len() - 20..]);
    }
}
