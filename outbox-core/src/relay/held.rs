//! The heads a relay's batches hold: what one worker's claim skips without probing row locks.
//!
//! With per-aggregate order, every claim looks at the first pending event of each aggregate in the
//! head window, and the heads that the relay's other workers are publishing are among them, locked.
//! `SKIP LOCKED` passes over them correctly, but only after a primary-key probe, the check for an
//! earlier unpublished event and a lock attempt each: with 4 workers × 100 events, about 400 of
//! them per claim, most of the claim's time (benchmark 1, order on). The relay knows which heads
//! its own workers hold, so a claim leaves those out before any probe. Heads held by other relay
//! processes are still skipped by their locks.
//!
//! What this holds is only a hint: a head left out that was released a moment ago waits for the
//! next claim, and a head that is not listed yet is skipped by its lock as before.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};

use crate::publisher::ClaimedEvent;

/// The heads among `events` (in `seq` order): each aggregate's first event.
pub(crate) fn heads(events: &[ClaimedEvent]) -> Vec<i64> {
    let mut seen: HashSet<(&str, &str)> = HashSet::with_capacity(events.len());
    events
        .iter()
        .filter(|e| seen.insert((e.aggregate_type.as_str(), e.aggregate_id.as_str())))
        .map(|e| e.seq)
        .collect()
}

/// The heads (their `seq`) each in-flight batch of a relay holds.
#[derive(Debug, Default)]
pub(crate) struct Held {
    batches: Mutex<Batches>,
}

#[derive(Debug, Default)]
struct Batches {
    next: u64,
    /// One entry per in-flight batch: its token and its heads.
    held: Vec<(u64, Vec<i64>)>,
}

impl Held {
    fn lock(&self) -> MutexGuard<'_, Batches> {
        // The data stays consistent whatever panicked while holding the lock (each change is one
        // push or one removal), so a poisoned lock is used as it is.
        self.batches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every head the relay's in-flight batches hold.
    pub(crate) fn seqs(&self) -> Vec<i64> {
        let batches = self.lock();
        let n = batches.held.iter().map(|(_, s)| s.len()).sum();
        let mut out = Vec::with_capacity(n);
        for (_, seqs) in &batches.held {
            out.extend_from_slice(seqs);
        }
        out
    }

    /// Lists `heads` until the returned guard is dropped (when the batch's transaction has ended).
    pub(crate) fn hold(&self, heads: Vec<i64>) -> HeldGuard<'_> {
        let mut batches = self.lock();
        let token = batches.next;
        batches.next = batches.next.wrapping_add(1);
        if !heads.is_empty() {
            batches.held.push((token, heads));
        }
        HeldGuard { held: self, token }
    }
}

/// Removes a batch's heads from [`Held`] when dropped.
#[derive(Debug)]
pub(crate) struct HeldGuard<'a> {
    held: &'a Held,
    token: u64,
}

impl Drop for HeldGuard<'_> {
    fn drop(&mut self) {
        let mut batches = self.held.lock();
        batches.held.retain(|(t, _)| *t != self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::claim::tests::event;

    #[test]
    fn a_batch_s_heads_are_each_aggregate_s_first_event() {
        let events = [event(3, "a"), event(4, "b"), event(6, "a"), event(9, "c")];
        assert_eq!(heads(&events), vec![3, 4, 9]);
    }

    #[test]
    fn heads_are_listed_while_their_batch_is_in_flight() {
        let held = Held::default();
        let a = held.hold(vec![1, 5]);
        let b = held.hold(vec![7]);
        let empty = held.hold(Vec::new());
        let mut seqs = held.seqs();
        seqs.sort_unstable();
        assert_eq!(seqs, vec![1, 5, 7]);
        drop(a);
        assert_eq!(held.seqs(), vec![7]);
        drop(empty);
        drop(b);
        assert!(held.seqs().is_empty());
    }
}
