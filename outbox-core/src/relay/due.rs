//! Wake-ups for the events this relay put back: when their `retry_after` comes, an idle worker
//! claims them then, not at its next poll.
//!
//! A failed event (`Retry`, backing off) or one whose destination was unavailable (put back for
//! a few seconds) is due again at a time the relay chose. No insert marks that moment, so no
//! notification comes: an idle relay found such events only at its next fallback poll — with
//! `--poll-interval 60s`, up to a minute after the put-back said "retry in 5 s" (black-box run).
//! Each batch that puts events back schedules a wake-up for each moment they are due, rounded up
//! to a [`SLOT`]: one timer per slot, however many events and batches share it.
//!
//! Due times other relays set, or rows written by hand with a `retry_after`, are still found at
//! the poll (or by the next claim a notification brings).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Wake-ups are rounded up to this: due times within one slot share a timer. Late by at most this
/// (plus the claim), and a backlog of put-back events makes at most one wake-up per slot.
pub(crate) const SLOT: Duration = Duration::from_millis(250);

/// The wake-ups scheduled and not yet fired.
#[derive(Debug)]
pub(crate) struct DueWakes {
    /// Slots are counted from here.
    origin: Instant,
    /// The slots with a timer running.
    pending: Mutex<HashSet<u64>>,
    /// What a timer wakes: one idle worker (`Inner::wake`), or the next to go idle.
    wake: Weak<Notify>,
}

impl DueWakes {
    pub(crate) fn new(wake: &Arc<Notify>) -> Self {
        DueWakes {
            origin: Instant::now(),
            pending: Mutex::new(HashSet::new()),
            wake: Arc::downgrade(wake),
        }
    }

    /// Wakes one idle worker once `after` has passed (rounded up to a slot), unless a wake-up is
    /// already scheduled for that slot. The timer is a task: outside a tokio runtime nothing is
    /// scheduled (the poll finds the events).
    pub(crate) fn schedule(self: &Arc<Self>, after: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // Further than any clock reaches: the poll finds them.
        let Some(slot) = Instant::now().checked_add(after).map(|at| self.slot_of(at)) else {
            return;
        };
        let Some(at) = u32::try_from(slot)
            .ok()
            .and_then(|n| self.origin.checked_add(SLOT.checked_mul(n)?))
        else {
            return;
        };
        {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if !pending.insert(slot) {
                return;
            }
        }
        let this = Arc::downgrade(self);
        runtime.spawn(async move {
            tokio::time::sleep_until(at).await;
            // The relay may be gone (dropped): nothing to wake.
            let Some(this) = this.upgrade() else { return };
            this.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&slot);
            if let Some(wake) = this.wake.upgrade() {
                wake.notify_one();
            }
        });
    }

    /// The slot `at` falls in, rounded up.
    fn slot_of(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin).as_nanos();
        let slot = SLOT.as_nanos();
        u64::try_from(since.div_ceil(slot)).unwrap_or(u64::MAX)
    }

    /// How many wake-ups are scheduled.
    #[cfg(test)]
    pub(crate) fn scheduled(&self) -> usize {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_timer_per_slot_and_each_wakes_once_when_due() {
        let wake = Arc::new(Notify::new());
        let due = Arc::new(DueWakes::new(&wake));
        due.schedule(Duration::from_millis(400));
        due.schedule(Duration::from_millis(401));
        due.schedule(Duration::from_secs(600));
        assert!(
            (2..=3).contains(&due.scheduled()),
            "400 and 401 ms share a slot unless a slot boundary falls between them"
        );
        let woken = wake.notified();
        tokio::pin!(woken);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), woken.as_mut())
                .await
                .is_err(),
            "not before it is due"
        );
        tokio::time::timeout(Duration::from_secs(5), woken)
            .await
            .expect("woken once due");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(due.scheduled(), 1, "the 600 s one is still scheduled");
    }
}
