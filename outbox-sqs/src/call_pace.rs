//! How long a destination's batch calls take: the last answered one's time, from which a relay
//! whose destinations are all slow claims only what its free slots can carry (`room.rs`), and
//! the events waiting for a slot are put back (`in_progress.rs`). Probes are not counted: a small request may be answered much sooner than
//! a batch of messages.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The time of a destination's last answered batch call.
#[derive(Debug, Default)]
pub(crate) struct CallPace {
    /// In microseconds, plus one; 0 while no call has been answered.
    micros: AtomicU64,
}

impl CallPace {
    /// A batch call was answered after `took`.
    pub(crate) fn answered_in(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX - 1);
        self.micros
            .store(micros.saturating_add(1), Ordering::Relaxed);
    }

    /// How long the last answered batch call took, if any was.
    pub(crate) fn last(&self) -> Option<Duration> {
        match self.micros.load(Ordering::Relaxed) {
            0 => None,
            n => Some(Duration::from_micros(n - 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_until_a_call_is_answered_then_the_last_ones_time() {
        let pace = CallPace::default();
        assert_eq!(pace.last(), None);
        pace.answered_in(Duration::ZERO);
        assert_eq!(pace.last(), Some(Duration::ZERO));
        pace.answered_in(Duration::from_millis(2_500));
        pace.answered_in(Duration::from_millis(4_000));
        assert_eq!(pace.last(), Some(Duration::from_millis(4_000)));
    }
}
