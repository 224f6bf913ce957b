//! Whether uploads outlast the offload wait right now: then a publish does not wait for its
//! uploads at all (they go on without it at once), since waiting would only hold its batch.
//!
//! Why: with S3 answering every request in 3.5 s, each batch holding an offloaded event waited
//! the whole offload wait (1 s) for nothing, and the relay's workers, all in such waits, held
//! the small events of aggregates with no upload for 1.5 s at the median and 6 s at p99
//! (black-box run). An upload ending within half the wait ends it: S3 is quick again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How the last uploads went against the offload wait.
#[derive(Debug, Default)]
pub(crate) struct UploadPace {
    /// The last upload that told outlasted the wait.
    slow: AtomicBool,
}

impl UploadPace {
    /// How long a publish waits for an upload: `configured`, or nothing while uploads outlast it.
    pub(crate) fn wait(&self, configured: Duration) -> Duration {
        if self.slow.load(Ordering::Relaxed) {
            Duration::ZERO
        } else {
            configured
        }
    }

    /// Notes an upload that took `took` (to its end, however it ended) against the `configured`
    /// wait: slow from one that outlasted it, quick again from one within half of it.
    pub(crate) fn ended(&self, took: Duration, configured: Duration) {
        if took >= configured {
            self.slow.store(true, Ordering::Relaxed);
        } else if took < configured / 2 {
            self.slow.store(false, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_outlasting_the_wait_make_the_next_publishes_wait_no_more() {
        let pace = UploadPace::default();
        let wait = Duration::from_secs(1);
        assert_eq!(pace.wait(wait), wait);
        pace.ended(Duration::from_millis(3_500), wait);
        assert_eq!(pace.wait(wait), Duration::ZERO, "S3 is slow");
        pace.ended(Duration::from_millis(700), wait);
        assert_eq!(pace.wait(wait), Duration::ZERO, "not quick yet");
        pace.ended(Duration::from_millis(100), wait);
        assert_eq!(pace.wait(wait), wait, "quick again");
        // A wait of zero stays zero; a long one is never outlasted by a quick upload.
        pace.ended(Duration::from_millis(100), Duration::ZERO);
        assert_eq!(pace.wait(Duration::ZERO), Duration::ZERO);
    }
}
