//! The relay's per-event retry warnings, shared by its batches: at most [`PER_WINDOW`] in each
//! [`WINDOW`], the rest at `debug` (each batch counts its own in one `warn` line). Per batch, every
//! worker's batch that failed at an outage's onset logged three events and its count: a 30 s SQS
//! outage took 15 warnings to tell on a loaded machine (fault suite).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many retried events are logged at `warn` one by one per [`WINDOW`].
pub(crate) const PER_WINDOW: usize = 3;

/// The window of [`PER_WINDOW`].
pub(crate) const WINDOW: Duration = Duration::from_secs(10);

/// The budget of per-event retry warnings: when the window began, and how many it has used.
#[derive(Debug, Default)]
pub(crate) struct RetryWarnings(Mutex<Option<(Instant, usize)>>);

impl RetryWarnings {
    /// Whether a retried event may be logged at `warn` now.
    pub(crate) fn take(&self) -> bool {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> bool {
        // A plain value: a panic elsewhere cannot leave it half-written.
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (began, used) = match *state {
            Some((began, used)) if now.saturating_duration_since(began) < WINDOW => (began, used),
            _ => (now, 0),
        };
        let allowed = used < PER_WINDOW;
        *state = Some((began, used + usize::from(allowed)));
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_per_window_across_batches() {
        let budget = RetryWarnings::default();
        let t0 = Instant::now();
        for _ in 0..PER_WINDOW {
            assert!(budget.take_at(t0));
        }
        assert!(!budget.take_at(t0 + Duration::from_secs(1)), "spent");
        assert!(!budget.take_at(t0 + WINDOW - Duration::from_millis(1)));
        assert!(budget.take_at(t0 + WINDOW), "a new window");
    }
}
