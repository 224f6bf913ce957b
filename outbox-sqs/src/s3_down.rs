//! S3 down: an upload failed without an answer (a time-out, unreachable) or with a 5xx, and a
//! `HeadBucket` after it was not answered either. Until one upload per probe interval succeeds,
//! offloaded events are put back at once, uncounted, instead of each waiting for an upload's
//! time-out, so that the other events of their batches go on (each batch with an offloaded event
//! waited for an upload's time-out and a probe, about 19 s at the relay's defaults, during an S3
//! outage).
//!
//! Unlike the bucket's circuit breaker (S3 refusing: the bucket missing, access denied), being down
//! never dead-letters an event and moves no gauge: the events wait for S3, however long, and count
//! under `outbox_events_deferred_total` with the outage's reason.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use outbox_core::{FailureKind, PublishFailure};

/// Whether S3 is down, for one bucket. Shared by every `publish` of the publisher.
#[derive(Debug)]
pub(crate) struct S3Down {
    bucket: String,
    probe_interval: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    down: Option<Down>,
    /// When S3 last came back from being down: a failure of a call started before that is
    /// stale, caught in the outage that ended then. (Not any answer: on a link too slow for one
    /// payload, the others' uploads go through meanwhile, and its time-out still counts.)
    recovered_at: Option<Instant>,
}

#[derive(Debug)]
struct Down {
    /// When the next upload may go through as a probe.
    next_probe: Instant,
    /// How the upload that found S3 down failed, and its error.
    kind: FailureKind,
    error: String,
}

/// What an upload may do now.
#[derive(Debug)]
pub(crate) enum Gate {
    /// S3 is not known to be down.
    Go,
    /// S3 is down and this upload is its probe.
    Probe,
    /// S3 is down: do not upload; put the event back with this failure.
    Wait(PublishFailure),
}

impl S3Down {
    pub(crate) fn new(bucket: &str, probe_interval: Duration) -> Self {
        S3Down {
            bucket: bucket.to_owned(),
            probe_interval,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A plain value: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks to upload now.
    pub(crate) fn gate(&self) -> Gate {
        self.gate_at(Instant::now())
    }

    fn gate_at(&self, now: Instant) -> Gate {
        let mut state = self.lock();
        match state.down.as_mut() {
            None => Gate::Go,
            Some(down) if now >= down.next_probe => {
                down.next_probe = now + self.probe_interval;
                Gate::Probe
            }
            Some(down) => Gate::Wait(PublishFailure::new(
                down.kind,
                format!(
                    "not offloaded now: S3 is down (bucket `{}`; an upload and a HeadBucket were \
                     not answered): {}",
                    self.bucket, down.error
                ),
            )),
        }
    }

    /// Whether S3 is known to be down.
    pub(crate) fn is_down(&self) -> bool {
        self.lock().down.is_some()
    }

    /// Whether S3 has come back from being down since `started`: a failure of a call started
    /// before is stale.
    pub(crate) fn recovered_since(&self, started: Instant) -> bool {
        self.lock().recovered_at.is_some_and(|at| at >= started)
    }

    /// S3 did not answer an upload started at `started` (or failed it with a 5xx), nor a
    /// `HeadBucket` after it; or it stalls uploads (see `upload_failure.rs`). Ignored when S3
    /// has come back since `started`: the outage the call was caught in is over.
    pub(crate) fn down(&self, started: Instant, kind: FailureKind, error: &str) {
        let now = Instant::now();
        let mut state = self.lock();
        if state.recovered_at.is_some_and(|at| at >= started) {
            return;
        }
        match state.down.as_mut() {
            Some(down) => {
                down.kind = kind;
                down.error = error.to_owned();
                down.next_probe = down.next_probe.max(now + self.probe_interval);
            }
            None => {
                tracing::warn!(bucket = %self.bucket, error,
                    probe_every_ms = self.probe_interval.as_millis() as u64,
                    "S3 is down: offloaded events are put back without uploading, uncounted, \
                     and one upload per probe interval finds it back");
                state.down = Some(Down {
                    next_probe: now + self.probe_interval,
                    kind,
                    error: error.to_owned(),
                });
            }
        }
    }

    /// S3 answered (an upload went through, or a `HeadBucket` was answered).
    pub(crate) fn up(&self) {
        let mut state = self.lock();
        if state.down.take().is_some() {
            state.recovered_at = Some(Instant::now());
            tracing::info!(bucket = %self.bucket, "S3 answers again: offloading resumes");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_puts_back_until_a_probe_is_due_and_up_ends_it() {
        let d = S3Down::new("b", Duration::from_secs(5));
        assert!(matches!(d.gate(), Gate::Go));
        let started = Instant::now();
        d.down(started, FailureKind::Timeout, "no answer within 2000 ms");
        let now = Instant::now();
        match d.gate_at(now) {
            Gate::Wait(f) => {
                assert_eq!(f.kind(), FailureKind::Timeout);
                assert!(f.message().contains("no answer within 2000 ms"), "{f:?}");
            }
            other => panic!("{other:?}"),
        }
        // One probe per interval: whoever comes first.
        assert!(matches!(
            d.gate_at(now + Duration::from_secs(5)),
            Gate::Probe
        ));
        assert!(matches!(
            d.gate_at(now + Duration::from_secs(6)),
            Gate::Wait(_)
        ));
        d.up();
        assert!(!d.is_down());
        assert!(matches!(d.gate(), Gate::Go));
        // A call started before S3 answered again fails late: stale, S3 stays up.
        assert!(d.recovered_since(started));
        d.down(started, FailureKind::Timeout, "no answer within 2000 ms");
        assert!(!d.is_down(), "a stale failure reopened it");
        d.down(Instant::now(), FailureKind::Timeout, "no answer");
        assert!(d.is_down());
    }
}
