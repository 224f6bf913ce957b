//! Work that goes on without its publish: S3 uploads (see `upload.rs`) and batch calls (see
//! `detached_call.rs`). A publish waits for such work a while; what still runs then goes on in a
//! task of its own, its events are put back for [`IN_PROGRESS_PUT_BACK`] without an attempt
//! counted, and the next claim of each event takes what became of it here.
//!
//! Why: a batch ended, and marked its events, when its slowest upload or call did, and with
//! per-aggregate order the next events of every aggregate it held waited for that. With S3
//! answering in 3–4 s, small events bound for healthy queues were 8 s late at the median and 30 s
//! at p99 (black-box run).
//!
//! Kept per publisher, in memory: another relay claiming the event meanwhile does the work again
//! (an upload to the same key; a message with the same deduplication id). A result is kept for
//! [`REMEMBER`], at most [`CAPACITY`] of them; past that the next claim does the work again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use uuid::Uuid;

/// How long an event whose upload or call goes on is put back: its next claim comes about then,
/// and finds the result once the work is done (or is put back again, at no cost to its batch).
pub(crate) const IN_PROGRESS_PUT_BACK: Duration = Duration::from_secs(1);

/// How long the result of work that ended after its publish is kept for the event's next claim
/// (which comes about a second later, unless the relay stops).
const REMEMBER: Duration = Duration::from_secs(600);

/// At most this many results are kept; beyond, the oldest go (their events start over).
const CAPACITY: usize = 10_000;

/// Expired results are swept out at most this often (when a result is stored).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// A result kept for an event's next claim.
pub(crate) trait Remembered: Clone {
    /// Whether it stays for the event's later claims once taken (an upload's pointer: the
    /// message may not be sent this time), rather than being taken once (a failure).
    fn stays(&self) -> bool;
    /// What the work left when it panicked: a counted attempt, as a panic in a publish is (put
    /// back uncounted, its event started over every second, for ever).
    fn panicked() -> Self;
}

/// An event's work, as known here.
#[derive(Debug)]
enum Slot<T> {
    /// It runs, in a task of its own.
    Running,
    /// It ended, at `at`, with `result`.
    Done { result: T, at: Instant },
}

/// What is known of an event's work.
#[derive(Debug)]
pub(crate) enum Known<T> {
    /// Nothing: do it.
    Unknown,
    /// It still runs.
    Running,
    /// It ended with this.
    Done(T),
}

/// The slots, and when expired results were last swept out.
#[derive(Debug)]
struct State<T> {
    slots: HashMap<Uuid, Slot<T>>,
    swept: Option<Instant>,
}

/// The work running without its publish, by event, and the results of the work that ended.
#[derive(Debug)]
pub(crate) struct Detached<T> {
    state: Mutex<State<T>>,
}

impl<T> Default for Detached<T> {
    fn default() -> Self {
        Detached {
            state: Mutex::new(State {
                slots: HashMap::new(),
                swept: None,
            }),
        }
    }
}

/// A running work's registration for one event: [`finish`](Started::finish) it with its
/// result. Dropped unfinished, it keeps [`Remembered::panicked`] when the work panicked, and
/// otherwise (the runtime stopped) forgets the work, so that the next claim starts over. Either
/// way the waiting publish is woken.
pub(crate) struct Started<T: Remembered> {
    registry: Arc<Detached<T>>,
    event: Uuid,
    done: Option<oneshot::Sender<()>>,
}

impl<T: Remembered> Started<T> {
    /// Keeps `result` for whoever looks next, and wakes the waiting publish.
    pub(crate) fn finish(mut self, result: T) {
        self.registry.store(self.event, result, Instant::now());
        self.done.take();
    }
}

impl<T: Remembered> Drop for Started<T> {
    fn drop(&mut self) {
        if self.done.is_none() {
            return;
        }
        if std::thread::panicking() {
            self.registry
                .store(self.event, T::panicked(), Instant::now());
        } else {
            let mut state = self.registry.lock();
            if matches!(state.slots.get(&self.event), Some(Slot::Running)) {
                state.slots.remove(&self.event);
            }
        }
    }
}

impl<T: Remembered> Detached<T> {
    /// The state, even after a panic while it was held: a lock refused would put every event
    /// with work here back for ever, uncounted.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What is known of the work of `event`.
    pub(crate) fn take(&self, event: Uuid) -> Known<T> {
        let mut state = self.lock();
        take_at(&mut state, event, Instant::now())
    }

    /// What is known of the work of each of `events` (position, id) that has any, under one
    /// lock; nothing at all (the common case) costs no lookup.
    pub(crate) fn take_known(
        &self,
        events: impl Iterator<Item = (usize, Uuid)>,
    ) -> Vec<(usize, Known<T>)> {
        let mut state = self.lock();
        if state.slots.is_empty() {
            return Vec::new();
        }
        let now = Instant::now();
        events
            .filter_map(|(i, id)| match take_at(&mut state, id, now) {
                Known::Unknown => None,
                known => Some((i, known)),
            })
            .collect()
    }

    /// Registers the work of `event` as running, and what wakes its publish once it ends;
    /// `None` when it already runs.
    pub(crate) fn start(
        self: &Arc<Self>,
        event: Uuid,
    ) -> Option<(Started<T>, oneshot::Receiver<()>)> {
        let mut state = self.lock();
        if matches!(state.slots.get(&event), Some(Slot::Running)) {
            return None;
        }
        state.slots.insert(event, Slot::Running);
        let (tx, rx) = oneshot::channel();
        let started = Started {
            registry: Arc::clone(self),
            event,
            done: Some(tx),
        };
        Some((started, rx))
    }

    /// Takes every result that `wanted` picks (fresh or not): the events', by id.
    pub(crate) fn take_done_where(&self, wanted: impl Fn(&T) -> bool) -> Vec<Uuid> {
        let mut state = self.lock();
        let mut taken = Vec::new();
        state.slots.retain(|id, slot| match slot {
            Slot::Done { result, .. } if wanted(result) => {
                taken.push(*id);
                false
            }
            _ => true,
        });
        taken
    }

    /// Keeps `results` again, taken by a publish that then failed as a whole.
    pub(crate) fn restore(&self, results: Vec<(Uuid, T)>) {
        let now = Instant::now();
        for (event, result) in results {
            self.store(event, result, now);
        }
    }

    fn store(&self, event: Uuid, result: T, now: Instant) {
        let mut state = self.lock();
        let sweep = state.slots.len() >= CAPACITY
            || state
                .swept
                .is_none_or(|t| now.saturating_duration_since(t) >= SWEEP_EVERY);
        if sweep {
            state.swept = Some(now);
            state.slots.retain(|_, slot| match slot {
                Slot::Running => true,
                Slot::Done { at, .. } => now.saturating_duration_since(*at) <= REMEMBER,
            });
        }
        if state.slots.len() >= CAPACITY {
            // Still full of fresh results: the oldest goes.
            let oldest = state
                .slots
                .iter()
                .filter_map(|(id, slot)| match slot {
                    Slot::Done { at, .. } => Some((*at, *id)),
                    Slot::Running => None,
                })
                .min();
            if let Some((_, id)) = oldest {
                state.slots.remove(&id);
            }
        }
        state.slots.insert(event, Slot::Done { result, at: now });
    }
}

/// What is known of `event`'s work at `now`: a result that [stays](Remembered::stays) is copied,
/// any other taken; an expired one is forgotten.
fn take_at<T: Remembered>(state: &mut State<T>, event: Uuid, now: Instant) -> Known<T> {
    let fresh = |at: &Instant| now.saturating_duration_since(*at) <= REMEMBER;
    match state.slots.get(&event) {
        None => Known::Unknown,
        Some(Slot::Running) => Known::Running,
        Some(Slot::Done { result, at }) if fresh(at) && result.stays() => {
            Known::Done(result.clone())
        }
        Some(Slot::Done { .. }) => match state.slots.remove(&event) {
            Some(Slot::Done { result, at }) if fresh(&at) => Known::Done(result),
            _ => Known::Unknown,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result: `Ok` stays, `Err` is taken once.
    type Result = std::result::Result<usize, &'static str>;

    impl Remembered for Result {
        fn stays(&self) -> bool {
            self.is_ok()
        }
        fn panicked() -> Self {
            Err("panicked")
        }
    }

    fn take_at_time(registry: &Detached<Result>, id: u128, now: Instant) -> Known<Result> {
        take_at(&mut registry.lock(), Uuid::from_u128(id), now)
    }

    #[test]
    fn a_lasting_result_stays_a_failure_is_taken_once_and_running_work_is_not_started_twice() {
        let registry = Arc::new(Detached::<Result>::default());
        let id = Uuid::from_u128(7);
        assert!(matches!(registry.take(id), Known::Unknown));
        let (started, mut woken) = registry.start(id).expect("first start");
        assert!(registry.start(id).is_none(), "it runs");
        assert!(matches!(registry.take(id), Known::Running));
        started.finish(Ok(3));
        assert_eq!(
            woken.try_recv(),
            Err(oneshot::error::TryRecvError::Closed),
            "the sender is gone: the waiter wakes"
        );
        for _ in 0..2 {
            assert!(
                matches!(registry.take(id), Known::Done(Ok(3))),
                "it stays for later claims"
            );
        }
        let failed = Uuid::from_u128(17);
        let (started, _woken) = registry.start(failed).expect("start");
        started.finish(Err("slow"));
        let known =
            registry.take_known([(0, id), (1, failed), (2, Uuid::from_u128(99))].into_iter());
        assert!(
            matches!(
                known.as_slice(),
                [(0, Known::Done(Ok(3))), (1, Known::Done(Err("slow")))]
            ),
            "{known:?}"
        );
        assert!(
            matches!(registry.take(failed), Known::Unknown),
            "counted once"
        );
    }

    #[test]
    fn results_are_taken_where_wanted_and_running_work_is_left() {
        let registry = Arc::new(Detached::<Result>::default());
        let (_running, _woken) = registry.start(Uuid::from_u128(1)).expect("start");
        registry.store(Uuid::from_u128(2), Ok(2), Instant::now());
        registry.store(Uuid::from_u128(3), Err("failed"), Instant::now());
        assert_eq!(
            registry.take_done_where(|r| r.is_ok()),
            vec![Uuid::from_u128(2)]
        );
        assert!(matches!(registry.take(Uuid::from_u128(2)), Known::Unknown));
        assert!(matches!(registry.take(Uuid::from_u128(1)), Known::Running));
        assert!(matches!(
            registry.take(Uuid::from_u128(3)),
            Known::Done(Err("failed"))
        ));
    }

    #[test]
    fn work_dropped_unfinished_is_forgotten() {
        let registry = Arc::new(Detached::<Result>::default());
        let id = Uuid::from_u128(8);
        let (started, mut woken) = registry.start(id).expect("start");
        assert_eq!(woken.try_recv(), Err(oneshot::error::TryRecvError::Empty));
        drop(started);
        assert_eq!(
            woken.try_recv(),
            Err(oneshot::error::TryRecvError::Closed),
            "woken"
        );
        assert!(matches!(registry.take(id), Known::Unknown));
        assert!(registry.start(id).is_some(), "can start again");
    }

    #[test]
    fn work_that_panicked_leaves_its_panic_result() {
        let registry = Arc::new(Detached::<Result>::default());
        let id = Uuid::from_u128(9);
        let (started, _woken) = registry.start(id).expect("start");
        let task = std::thread::spawn(move || {
            let _started = started;
            panic!("in the work");
        });
        assert!(task.join().is_err());
        assert!(matches!(registry.take(id), Known::Done(Err("panicked"))));
    }

    #[test]
    fn results_stay_bounded_and_expire() {
        let registry = Detached::<Result>::default();
        let t0 = Instant::now();
        let at = |n: usize| t0 + Duration::from_micros(n as u64);
        for n in 0..CAPACITY + 5 {
            registry.store(Uuid::from_u128(n as u128), Ok(n), at(n));
        }
        assert_eq!(registry.lock().slots.len(), CAPACITY);
        // The oldest went.
        for n in 0..5 {
            assert!(matches!(take_at_time(&registry, n, t0), Known::Unknown));
        }
        assert!(matches!(take_at_time(&registry, 5, t0), Known::Done(Ok(5))));
        // Looked at too late: expired.
        let late = t0 + REMEMBER + Duration::from_secs(1);
        assert!(matches!(take_at_time(&registry, 100, late), Known::Unknown));
        // Swept out by a later store, running work kept.
        let running = Arc::new(Detached::<Result>::default());
        let (_started, _woken) = running.start(Uuid::from_u128(1)).expect("start");
        running.store(Uuid::from_u128(2), Ok(2), t0);
        running.store(Uuid::from_u128(3), Ok(3), late);
        let state = running.lock();
        assert!(matches!(
            state.slots.get(&Uuid::from_u128(1)),
            Some(Slot::Running)
        ));
        assert!(!state.slots.contains_key(&Uuid::from_u128(2)), "swept");
        assert_eq!(state.slots.len(), 2);
    }
}
