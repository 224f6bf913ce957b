//! Budgets of the relay's per-event log lines, shared by its batches: at most a few in each
//! [`WINDOW`], the rest at `debug` (each batch counts its own in one line).
//!
//! Retried events: per batch, every worker's batch that failed at an outage's onset logged three
//! events and its count, so a 30 s SQS outage took 15 warnings to tell on a loaded machine (fault
//! suite). Dead letters: one `error` line each, so 100 000 events refused by their queue made
//! 100 000 lines, 28 MB, and as much again when retried (black-box run).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many retried events are logged at `warn` one by one per [`WINDOW`].
pub(crate) const RETRY_LINES: usize = 3;

/// How many dead-lettered events are logged at `error` one by one per [`WINDOW`].
pub(crate) const DEAD_LETTER_LINES: usize = 10;

/// The window of a budget.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);

/// A budget of per-event lines: how many a window allows, when the window began, and how many it
/// has used.
#[derive(Debug)]
pub(crate) struct LineBudget {
    per_window: usize,
    state: Mutex<Option<(Instant, usize)>>,
}

impl LineBudget {
    /// A budget of `per_window` lines every [`WINDOW`].
    pub(crate) fn new(per_window: usize) -> Self {
        LineBudget {
            per_window,
            state: Mutex::new(None),
        }
    }

    /// Whether an event may be logged one by one now.
    pub(crate) fn take(&self) -> bool {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> bool {
        // A plain value: a panic elsewhere cannot leave it half-written.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (began, used) = match *state {
            Some((began, used)) if now.saturating_duration_since(began) < WINDOW => (began, used),
            _ => (now, 0),
        };
        let allowed = used < self.per_window;
        *state = Some((began, used + usize::from(allowed)));
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_per_window_across_batches() {
        let budget = LineBudget::new(RETRY_LINES);
        let t0 = Instant::now();
        for _ in 0..RETRY_LINES {
            assert!(budget.take_at(t0));
        }
        assert!(!budget.take_at(t0 + Duration::from_secs(1)), "spent");
        assert!(!budget.take_at(t0 + WINDOW - Duration::from_millis(1)));
        assert!(budget.take_at(t0 + WINDOW), "a new window");
    }
}
