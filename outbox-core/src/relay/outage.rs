//! How the relay reports batches failing as a whole (the database or the publisher down): one
//! warning when they start, a reminder each minute while they go on, and one line when a batch
//! succeeds again, instead of a warning for every failed batch of every worker.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, ErrorKind};

/// How often a reminder is logged while batches keep failing.
pub(crate) const REMINDER_EVERY: Duration = Duration::from_secs(60);

/// The failures since the last batch that succeeded.
#[derive(Debug, Clone, Copy)]
struct Failing {
    since: Instant,
    batches: u64,
    reminded: Instant,
    /// The last failure was the publisher's: only a batch that claimed events (and so published
    /// them) shows it works again; a claim that finds nothing (the others' events locked) does not.
    publisher: bool,
}

/// The relay's failing batches, shared by its workers.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    state: Mutex<Option<Failing>>,
}

/// What a failure or success is to be logged as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    /// The first failure after a success: a warning.
    Started,
    /// Failing for a minute more: a warning with the count.
    StillFailing { for_: Duration, batches: u64 },
    /// Another failure within the minute, or a claim that found nothing while the publisher
    /// fails: debug only, or nothing.
    Quiet,
    /// The first success after failures: an info line.
    Recovered { after: Duration, batches: u64 },
    /// A success after a success: nothing.
    Fine,
}

impl Outage {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Failing>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a failed batch at `now`; `publisher`: the publisher failed (not the database).
    pub(crate) fn failed_at(&self, now: Instant, publisher: bool) -> Report {
        let mut state = self.lock();
        match state.as_mut() {
            None => {
                *state = Some(Failing {
                    since: now,
                    batches: 1,
                    reminded: now,
                    publisher,
                });
                Report::Started
            }
            Some(f) => {
                f.batches += 1;
                f.publisher = publisher;
                if now.saturating_duration_since(f.reminded) >= REMINDER_EVERY {
                    f.reminded = now;
                    Report::StillFailing {
                        for_: now.saturating_duration_since(f.since),
                        batches: f.batches,
                    }
                } else {
                    Report::Quiet
                }
            }
        }
    }

    /// Records a batch that succeeded at `now`; `claimed`: it claimed events.
    pub(crate) fn succeeded_at(&self, now: Instant, claimed: bool) -> Report {
        let mut state = self.lock();
        match *state {
            Some(f) if claimed || !f.publisher => {
                *state = None;
                Report::Recovered {
                    after: now.saturating_duration_since(f.since),
                    batches: f.batches,
                }
            }
            Some(_) => Report::Quiet,
            None => Report::Fine,
        }
    }

    /// Records and logs a failed batch; `retry_in` is the failing worker's back-off.
    pub(crate) fn failed(&self, error: &Error, consecutive: u32, retry_in: Duration) {
        let retry_in_ms = retry_in.as_millis() as u64;
        let publisher = error.kind() == ErrorKind::Publish;
        match self.failed_at(Instant::now(), publisher) {
            Report::Started => tracing::warn!(
                error = %error, retry_in_ms,
                "relay batch failed; the workers retry with back-off (while batches keep failing, \
                 a reminder is logged each minute, and a line when they succeed again)"
            ),
            Report::StillFailing { for_, batches } => tracing::warn!(
                error = %error, failing_for_secs = for_.as_secs(), failed_batches = batches,
                retry_in_ms, "relay batches still failing"
            ),
            _ => tracing::debug!(
                error = %error, consecutive_failures = consecutive, retry_in_ms,
                "relay batch failed"
            ),
        }
    }

    /// Records a batch that succeeded (`claimed`: it claimed events), and logs the end of an
    /// outage.
    pub(crate) fn succeeded(&self, claimed: bool) {
        if let Report::Recovered { after, batches } = self.succeeded_at(Instant::now(), claimed) {
            tracing::info!(
                failed_for_ms = after.as_millis() as u64,
                failed_batches = batches,
                "relay batches succeed again"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_a_reminder_a_minute_and_one_recovery_line() {
        let o = Outage::default();
        let t0 = Instant::now();
        assert_eq!(o.succeeded_at(t0, true), Report::Fine);
        assert_eq!(o.failed_at(t0, true), Report::Started);
        // Four workers failing with back-off for 23 s: no more warnings.
        for i in 1..40 {
            let at = t0 + Duration::from_millis(i * 500);
            assert_eq!(o.failed_at(at, true), Report::Quiet, "{i}");
        }
        // A worker that claims nothing (the others hold the events) proves nothing of SQS.
        assert_eq!(
            o.succeeded_at(t0 + Duration::from_secs(30), false),
            Report::Quiet
        );
        assert_eq!(
            o.failed_at(t0 + Duration::from_secs(61), true),
            Report::StillFailing {
                for_: Duration::from_secs(61),
                batches: 41
            }
        );
        assert_eq!(
            o.failed_at(t0 + Duration::from_secs(62), true),
            Report::Quiet
        );
        assert_eq!(
            o.succeeded_at(t0 + Duration::from_secs(70), true),
            Report::Recovered {
                after: Duration::from_secs(70),
                batches: 42
            }
        );
        assert_eq!(
            o.succeeded_at(t0 + Duration::from_secs(71), true),
            Report::Fine
        );
        // The database failing: any claim that works ends it, one that finds nothing too.
        assert_eq!(
            o.failed_at(t0 + Duration::from_secs(72), false),
            Report::Started
        );
        assert_eq!(
            o.succeeded_at(t0 + Duration::from_secs(73), false),
            Report::Recovered {
                after: Duration::from_secs(1),
                batches: 1
            }
        );
    }
}
