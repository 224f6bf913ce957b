//! Uploads that go on without their publish. A publish waits for an offloaded payload's upload
//! at most [`SqsConfig::offload_wait`](crate::SqsConfig::offload_wait) (1 s by default); an
//! upload still running then goes on in a task of its own, its event is put back for
//! [`STILL_UPLOADING_PUT_BACK`] without an attempt counted, and the next claim of the event takes
//! what became of the upload: the pointer (the message is sent without uploading again), or the
//! failure's outcome.
//!
//! Why: a batch ended, and marked its events, when its uploads did, and with per-aggregate order
//! the next events of every aggregate it held waited for that. With S3 answering in 3–4 s, small
//! events bound for healthy queues were 8 s late at the median and 30 s at p99 (black-box run).
//!
//! Kept per publisher, in memory: another relay claiming the event meanwhile uploads it again (to
//! the same key). A result is kept for [`REMEMBER`], at most [`CAPACITY`] of them; past that the
//! next claim uploads again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use outbox_core::{FailureKind, PublishFailure, PublishOutcome};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::offload::Offloaded;

/// How long an event whose upload goes on is put back: its next claim comes about then, and
/// finds the pointer once the upload is done (or is put back again, at no cost to its batch).
pub(crate) const STILL_UPLOADING_PUT_BACK: Duration = Duration::from_secs(1);

/// How long the result of an upload that ended after its publish is kept for the event's next
/// claim (which comes about a second later, unless the relay stops).
const REMEMBER: Duration = Duration::from_secs(600);

/// At most this many results are kept; beyond, the oldest go (their events upload again).
const CAPACITY: usize = 10_000;

/// Expired results are swept out at most this often (when a result is stored).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What an upload came to: the pointer, or the outcome of its event.
pub(crate) type UploadResult = Result<Offloaded, PublishOutcome>;

/// An event's upload, as known here.
#[derive(Debug)]
enum Slot {
    /// It runs, in a task of its own.
    Running,
    /// It ended, at `at`, with `result`.
    Done { result: UploadResult, at: Instant },
}

/// What is known of an event's upload.
#[derive(Debug)]
pub(crate) enum Known {
    /// Nothing: upload it.
    Unknown,
    /// Its upload still runs.
    Running,
    /// Its upload ended with this. A pointer stays for the event's later claims (its message
    /// may not be sent this time: held back, or its call failing); a failure is taken.
    Done(UploadResult),
}

/// The slots, and when expired results were last swept out.
#[derive(Debug, Default)]
struct State {
    slots: HashMap<Uuid, Slot>,
    swept: Option<Instant>,
}

/// The uploads running without their publish, and the results of those that ended.
#[derive(Debug, Default)]
pub(crate) struct DetachedUploads {
    state: Mutex<State>,
}

/// A running upload's registration: [`finish`](Started::finish) it with its result. Dropped
/// unfinished, it keeps a counted failure when the upload panicked, and otherwise (the runtime
/// stopped) forgets the upload, so that the next claim uploads again. Either way the waiting
/// publish is woken.
pub(crate) struct Started {
    uploads: Arc<DetachedUploads>,
    event: Uuid,
    done: Option<oneshot::Sender<()>>,
}

impl Started {
    /// Keeps `result` for whoever looks next, and wakes the waiting publish.
    pub(crate) fn finish(mut self, result: UploadResult) {
        self.uploads.store(self.event, result, Instant::now());
        self.done.take();
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if self.done.is_none() {
            return;
        }
        if std::thread::panicking() {
            // The upload panicked: a counted attempt, as a panic in a publish is (put back
            // uncounted, such an event was uploaded again every second, for ever).
            let failure = PublishOutcome::retry(
                FailureKind::Panic,
                "the upload of its payload to S3 panicked",
            );
            self.uploads.store(self.event, Err(failure), Instant::now());
        } else {
            let mut state = self.uploads.lock();
            if matches!(state.slots.get(&self.event), Some(Slot::Running)) {
                state.slots.remove(&self.event);
            }
        }
    }
}

impl DetachedUploads {
    /// The state, even after a panic while it was held: a lock refused would put every large
    /// event back for ever, uncounted.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What is known of the upload of `event`.
    pub(crate) fn take(&self, event: Uuid) -> Known {
        self.take_at(event, Instant::now())
    }

    fn take_at(&self, event: Uuid, now: Instant) -> Known {
        let mut state = self.lock();
        let fresh = |at: &Instant| now.saturating_duration_since(*at) <= REMEMBER;
        match state.slots.get(&event) {
            None => Known::Unknown,
            Some(Slot::Running) => Known::Running,
            Some(Slot::Done {
                result: Ok(pointer),
                at,
            }) if fresh(at) => Known::Done(Ok(pointer.clone())),
            Some(Slot::Done { .. }) => match state.slots.remove(&event) {
                Some(Slot::Done { result, at }) if fresh(&at) => Known::Done(result),
                _ => Known::Unknown,
            },
        }
    }

    /// Registers the upload of `event` as running, and what wakes its publish once it ends;
    /// `None` when it already runs.
    pub(crate) fn start(self: &Arc<Self>, event: Uuid) -> Option<(Started, oneshot::Receiver<()>)> {
        let mut state = self.lock();
        if matches!(state.slots.get(&event), Some(Slot::Running)) {
            return None;
        }
        state.slots.insert(event, Slot::Running);
        let (tx, rx) = oneshot::channel();
        let started = Started {
            uploads: Arc::clone(self),
            event,
            done: Some(tx),
        };
        Some((started, rx))
    }

    fn store(&self, event: Uuid, result: UploadResult, now: Instant) {
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

/// The outcome of an event whose upload goes on without its publish: put back for
/// [`STILL_UPLOADING_PUT_BACK`], uncounted.
pub(crate) fn still_uploading(bytes: usize, waited: Duration) -> PublishOutcome {
    PublishOutcome::Unavailable(
        PublishFailure::new(
            FailureKind::InProgress,
            format!(
                "the upload of its payload ({bytes} bytes) to S3 was not done within {} ms; it \
                 goes on, and the event is sent at its next claim once it is done",
                waited.as_millis()
            ),
        )
        .with_put_back(STILL_UPLOADING_PUT_BACK),
    )
}

/// The outcome of an event claimed again while its upload still runs: put back for
/// [`STILL_UPLOADING_PUT_BACK`], uncounted.
pub(crate) fn uploading_still(bytes: usize) -> PublishOutcome {
    PublishOutcome::Unavailable(
        PublishFailure::new(
            FailureKind::InProgress,
            format!(
                "the upload of its payload ({bytes} bytes) to S3 still runs; the event is sent at \
                 its next claim once it is done"
            ),
        )
        .with_put_back(STILL_UPLOADING_PUT_BACK),
    )
}

/// The outcome of an event behind one of its FIFO message group whose upload goes on: put back
/// with it, uncounted.
pub(crate) fn behind_an_upload(group: &str) -> PublishOutcome {
    PublishOutcome::Unavailable(
        PublishFailure::new(
            FailureKind::InProgress,
            format!("not sent: the upload of an earlier event of message group `{group}` goes on"),
        )
        .with_put_back(STILL_UPLOADING_PUT_BACK),
    )
}

/// Whether `outcome` puts its event back while its upload goes on.
pub(crate) fn in_progress(outcome: &PublishOutcome) -> bool {
    matches!(outcome, PublishOutcome::Unavailable(f) if f.kind() == FailureKind::InProgress)
}

/// The outcome of an event that found every upload slot busy for the whole wait: put back,
/// and warned about (an outage of sorts: the uploads need more slots, or S3 is too slow).
pub(crate) fn no_upload_slot(waited: Duration) -> PublishOutcome {
    PublishOutcome::Unavailable(
        PublishFailure::new(
            FailureKind::NotSent,
            format!(
                "not offloaded now: every S3 upload slot was busy (waited {} ms; uploads running \
                 slowly: raise OUTBOX_SQS_MAX_UPLOADS, or S3 is too slow; the running uploads \
                 hold at most 256 MiB of payloads between them)",
                waited.as_millis()
            ),
        )
        .with_put_back(STILL_UPLOADING_PUT_BACK),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointer(n: usize) -> UploadResult {
        Ok(Offloaded {
            body: format!("p{n}"),
            payload_len: n,
        })
    }

    #[test]
    fn a_pointer_stays_a_failure_is_taken_once_and_a_running_upload_is_not_started_twice() {
        let uploads = Arc::new(DetachedUploads::default());
        let id = Uuid::from_u128(7);
        assert!(matches!(uploads.take(id), Known::Unknown));
        let (started, mut woken) = uploads.start(id).expect("first start");
        assert!(uploads.start(id).is_none(), "it runs");
        assert!(matches!(uploads.take(id), Known::Running));
        started.finish(pointer(3));
        assert_eq!(
            woken.try_recv(),
            Err(oneshot::error::TryRecvError::Closed),
            "the sender is gone: the waiter wakes"
        );
        for _ in 0..2 {
            match uploads.take(id) {
                Known::Done(Ok(p)) => assert_eq!(p.payload_len, 3),
                other => panic!("the pointer stays for later claims: {other:?}"),
            }
        }
        let failed = Uuid::from_u128(17);
        let (started, _woken) = uploads.start(failed).expect("start");
        started.finish(Err(PublishOutcome::retry(FailureKind::Timeout, "slow")));
        assert!(matches!(uploads.take(failed), Known::Done(Err(_))));
        assert!(
            matches!(uploads.take(failed), Known::Unknown),
            "counted once"
        );
    }

    #[test]
    fn an_upload_dropped_unfinished_is_forgotten() {
        let uploads = Arc::new(DetachedUploads::default());
        let id = Uuid::from_u128(8);
        let (started, mut woken) = uploads.start(id).expect("start");
        assert_eq!(woken.try_recv(), Err(oneshot::error::TryRecvError::Empty));
        drop(started);
        assert_eq!(
            woken.try_recv(),
            Err(oneshot::error::TryRecvError::Closed),
            "woken"
        );
        assert!(matches!(uploads.take(id), Known::Unknown));
        assert!(uploads.start(id).is_some(), "can start again");
    }

    #[test]
    fn an_upload_that_panicked_is_a_counted_failure() {
        let uploads = Arc::new(DetachedUploads::default());
        let id = Uuid::from_u128(9);
        let (started, _woken) = uploads.start(id).expect("start");
        let task = std::thread::spawn(move || {
            let _started = started;
            panic!("in the upload");
        });
        assert!(task.join().is_err());
        match uploads.take(id) {
            Known::Done(Err(PublishOutcome::Retry(f))) => assert_eq!(f.kind(), FailureKind::Panic),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn results_stay_bounded_and_expire() {
        let uploads = DetachedUploads::default();
        let t0 = Instant::now();
        let at = |n: usize| t0 + Duration::from_micros(n as u64);
        for n in 0..CAPACITY + 5 {
            uploads.store(Uuid::from_u128(n as u128), pointer(n), at(n));
        }
        assert_eq!(uploads.lock().slots.len(), CAPACITY);
        // The oldest went.
        for n in 0..5 {
            assert!(matches!(
                uploads.take_at(Uuid::from_u128(n), t0),
                Known::Unknown
            ));
        }
        assert!(matches!(
            uploads.take_at(Uuid::from_u128(5), t0),
            Known::Done(Ok(p)) if p.payload_len == 5
        ));
        // Looked at too late: expired.
        let late = t0 + REMEMBER + Duration::from_secs(1);
        assert!(matches!(
            uploads.take_at(Uuid::from_u128(100), late),
            Known::Unknown
        ));
        // Swept out by a later store, a running upload kept.
        let running = Arc::new(DetachedUploads::default());
        let (_started, _woken) = running.start(Uuid::from_u128(1)).expect("start");
        running.store(Uuid::from_u128(2), pointer(2), t0);
        running.store(Uuid::from_u128(3), pointer(3), late);
        let state = running.lock();
        assert!(matches!(
            state.slots.get(&Uuid::from_u128(1)),
            Some(Slot::Running)
        ));
        assert!(!state.slots.contains_key(&Uuid::from_u128(2)), "swept");
        assert_eq!(state.slots.len(), 2);
    }
}
