//! Whether uploads outlast the offload wait right now: then a publish does not wait for its
//! uploads at all (they go on without it at once), since waiting would only hold its batch.
//!
//! Why: with S3 answering every request in 3.5 s, each batch holding an offloaded event waited
//! the whole offload wait (1 s) for nothing, and the relay's workers, all in such waits, held
//! the small events of aggregates with no upload for 1.5 s at the median and 6 s at p99
//! (black-box run).
//!
//! Only uploads of at most [`PACE_BYTES`] tell (a larger payload takes longer on any link: the
//! budget gives it a second per MiB). One that outlasts the wait makes S3 slow for [`SLOW_FOR`]
//! (each such upload starts that again); one within the wait makes it quick at once.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The largest upload whose time tells S3's pace: 1 MiB.
pub(crate) const PACE_BYTES: usize = 1024 * 1024;

/// How long S3 stays slow after an upload that outlasted the wait, unless a quick one ends it.
const SLOW_FOR: Duration = Duration::from_secs(10);

/// How the last uploads went against the offload wait.
#[derive(Debug, Default)]
pub(crate) struct UploadPace {
    /// Until when S3 counts as slow.
    slow_until: Mutex<Option<Instant>>,
}

impl UploadPace {
    /// How long a publish waits for an upload: `configured`, or nothing while uploads outlast it.
    pub(crate) fn wait(&self, configured: Duration) -> Duration {
        self.wait_at(configured, Instant::now())
    }

    fn wait_at(&self, configured: Duration, now: Instant) -> Duration {
        let slow = self
            .slow_until
            .lock()
            .map(|until| until.is_some_and(|until| now < until))
            .unwrap_or(false);
        if slow { Duration::ZERO } else { configured }
    }

    /// Notes an upload of `bytes` that took `took` (to its end, however it ended) against the
    /// `configured` wait.
    pub(crate) fn ended(&self, bytes: usize, took: Duration, configured: Duration) {
        self.ended_at(bytes, took, configured, Instant::now());
    }

    fn ended_at(&self, bytes: usize, took: Duration, configured: Duration, now: Instant) {
        if bytes > PACE_BYTES {
            return;
        }
        if let Ok(mut until) = self.slow_until.lock() {
            *until = (took >= configured).then(|| now + SLOW_FOR);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_uploads_outlasting_the_wait_make_the_next_publishes_wait_no_more() {
        let pace = UploadPace::default();
        let wait = Duration::from_secs(1);
        let t0 = Instant::now();
        assert_eq!(pace.wait_at(wait, t0), wait);
        // A large payload takes longer on any link: it does not tell.
        pace.ended_at(PACE_BYTES + 1, Duration::from_secs(5), wait, t0);
        assert_eq!(pace.wait_at(wait, t0), wait, "a large upload");
        pace.ended_at(4096, Duration::from_millis(3_500), wait, t0);
        assert_eq!(pace.wait_at(wait, t0), Duration::ZERO, "S3 is slow");
        assert_eq!(
            pace.wait_at(wait, t0 + SLOW_FOR),
            wait,
            "slow for a while only"
        );
        pace.ended_at(4096, Duration::from_millis(700), wait, t0);
        assert_eq!(pace.wait_at(wait, t0), wait, "quick again: within the wait");
        // A wait long enough is never outlasted.
        let long = Duration::from_secs(3600);
        pace.ended_at(4096, Duration::from_secs(20), long, t0);
        assert_eq!(pace.wait_at(long, t0), long);
    }
}
