//! Uploads suspected of a link too slow for their payload: an upload that timed out while S3
//! answered a `HeadBucket` right after. The first such time-out of an event is not charged to it:
//! S3 may have just come back from an outage (a partition that healed) while the upload, started
//! during it, was still caught in it. The second in a row is: the link is too slow for the payload.
//!
//! Kept per publisher, in memory, for an hour and at most 10 000 events: another relay, or this one
//! after a restart, starts over (one more upload for such an event). It cannot see a row across
//! relays: a relay that suspected an event and later sees its upload caught in an outage that ends
//! just before its time-out (the case above) charges it, though another relay's upload of it failed
//! in between. That takes the same race twice for one event.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use uuid::Uuid;

/// How long a suspicion lasts: a second time-out later than this is a first one again.
const REMEMBER: Duration = Duration::from_secs(3600);

/// At most this many events are remembered; beyond, a time-out is charged at once (the old rule),
/// so that memory stays bounded and such an event still ends.
const CAPACITY: usize = 10_000;

/// The events whose last upload timed out while S3 answered.
#[derive(Debug, Default)]
pub(crate) struct SlowUploads {
    suspects: Mutex<HashMap<Uuid, Instant>>,
}

impl SlowUploads {
    /// Notes that the upload of `event` timed out while S3 answered; true from the second time in
    /// a row on (or when no more suspects fit): charge the event an attempt.
    pub(crate) fn timed_out(&self, event: Uuid) -> bool {
        self.timed_out_at(event, Instant::now())
    }

    fn timed_out_at(&self, event: Uuid, now: Instant) -> bool {
        let Ok(mut suspects) = self.suspects.lock() else {
            return true;
        };
        // Charged or not, the event stays a suspect: every time-out after the first of a row is
        // charged (forgetting it once charged made every other upload of a slow link free).
        if let Some(since) = suspects.get_mut(&event) {
            let recent = now.saturating_duration_since(*since) <= REMEMBER;
            *since = now;
            return recent;
        }
        if suspects.len() >= CAPACITY {
            suspects.retain(|_, since| now.saturating_duration_since(*since) <= REMEMBER);
            if suspects.len() >= CAPACITY {
                return true;
            }
        }
        suspects.insert(event, now);
        false
    }

    /// The upload of `event` ended otherwise (written, or failed for another reason): a later
    /// time-out is a first one again.
    pub(crate) fn ended(&self, event: Uuid) {
        if let Ok(mut suspects) = self.suspects.lock() {
            if !suspects.is_empty() {
                suspects.remove(&event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_time_out_in_a_row_is_charged() {
        let slow = SlowUploads::default();
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert!(!slow.timed_out(a), "the first may be S3 coming back");
        assert!(!slow.timed_out(b), "per event");
        assert!(slow.timed_out(a), "the second in a row is the link");
        assert!(slow.timed_out(a), "and so is every one after it");
        // An upload that ended otherwise in between breaks the row.
        slow.ended(b);
        assert!(!slow.timed_out(b));
    }

    #[test]
    fn a_suspicion_expires() {
        let slow = SlowUploads::default();
        let a = Uuid::from_u128(1);
        let t0 = Instant::now();
        assert!(!slow.timed_out_at(a, t0));
        let later = t0 + REMEMBER + Duration::from_secs(1);
        assert!(!slow.timed_out_at(a, later), "too long ago: a first again");
        assert!(slow.timed_out_at(a, later + Duration::from_secs(1)));
    }

    #[test]
    fn a_full_memory_charges_at_once_after_dropping_expired_suspects() {
        let slow = SlowUploads::default();
        let t0 = Instant::now();
        for n in 0..CAPACITY {
            assert!(!slow.timed_out_at(Uuid::from_u128(n as u128), t0));
        }
        let extra = Uuid::from_u128(u128::MAX);
        assert!(slow.timed_out_at(extra, t0), "full: the old rule");
        // Once the old suspicions have expired, there is room again.
        let later = t0 + REMEMBER + Duration::from_secs(1);
        assert!(!slow.timed_out_at(extra, later));
    }
}
