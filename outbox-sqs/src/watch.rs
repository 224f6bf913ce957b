//! The watch over a call in flight, for S3 uploads (`upload_watch.rs`) and for batch calls to a
//! queue or topic (`call.rs`): a service that stops answering is found down seconds into the
//! call, not at its time-out. The call, unanswered after a first look, is checked with a small
//! call given until the service would count as silent ([`WATCH_PROBE`] once it could), and again at
//! each later look while it runs. The service is down when that is not answered either and
//! nothing else was heard from the service for [`SILENT_AFTER`], the call having run that long
//! too; or when another call found it down meanwhile. The watch then ends, the call given back to
//! its caller: an upload is given up (its future dropped), a batch call runs on to its time-out
//! (it was sent, and may be carried out: `call.rs`). A service that answers, however slowly, is
//! slow, not silent: the call goes on to its own time-out.
//!
//! Why: a batch that met an outage waited for the call's time-out, and per-aggregate order held
//! the heads of every aggregate it had claimed behind it (black-box runs: about 15 s at an S3
//! outage's onset, 39 s for a black-holed topic). And why heard-within: a topic answering in
//! 2-12 s was taken for down at every probe and got almost nothing through (black-box run); S3
//! answering so was given up at each look the same way (test).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_core::{FailureKind, PublishFailure};

use crate::down::{Down, Gate, Probe};

/// How long a call runs unanswered before its service is first asked whether it answers at all.
pub(crate) const WATCH_AFTER: Duration = Duration::from_secs(1);

/// The longest probe of the watch, or after a failed call: a tiny call, which a working service
/// answers at once, even on a link busy with uploads.
pub(crate) const WATCH_PROBE: Duration = Duration::from_secs(2);

/// A service that answered a call or a probe within this is slow, not silent: never taken for
/// down, its calls go on to their time-out.
pub(crate) const SILENT_AFTER: Duration = Duration::from_secs(5);

/// When a watch looks at its call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Looks {
    /// The first look, after the call started.
    pub(crate) first: Duration,
    /// Each later look, after the last one's probe.
    pub(crate) every: Duration,
    /// How long the call must have run unanswered before its service counts as silent:
    /// [`SILENT_AFTER`], or its time-out less a second when that is shorter (a look must still
    /// find it silent before the time-out ends the call).
    pub(crate) silent: Duration,
}

/// How a watched call ended.
#[derive(Debug)]
pub(crate) enum Watched<T> {
    /// The call ended on its own, with this.
    Done(T),
    /// Another call found the service down meanwhile: the watch ends, with the down state's
    /// failure.
    Found(PublishFailure),
    /// Neither the call, nor the probe, nor anything else answered for a while: the watch ends,
    /// the service now down, with this error.
    Silent(String),
}

/// The least time between two looks: probes that fail at once (a 503, a refused connection)
/// followed each other without a pause until the service counted as silent (review).
const LEAST_GAP: Duration = Duration::from_millis(500);

/// The next look after a probe went unanswered while the service was heard lately or the call
/// began lately: when a probe started then ends as the service turns silent (`silent_at`), no
/// later than `every` from now, and [`LEAST_GAP`] at the soonest.
fn next_look_when_unanswered(silent_at: Instant, every: Duration) -> tokio::time::Instant {
    let wait = silent_at.saturating_duration_since(Instant::now() + WATCH_PROBE);
    tokio::time::Instant::now() + wait.min(every).max(LEAST_GAP)
}

impl<P: Probe> Down<P> {
    /// How long the service may go unheard before it counts as silent: [`SILENT_AFTER`], or half
    /// as long again as its last answer took when that is longer (a destination answering every
    /// call and probe in 6-7 s was taken for down 5 s into each call, its calls given up, and
    /// sent again: black-box run). A call's time-out still ends the call.
    pub(crate) fn silent_after(&self) -> Duration {
        self.answer_took().map_or(SILENT_AFTER, |took| {
            SILENT_AFTER.max(took.saturating_mul(3) / 2)
        })
    }

    /// When the service counts as silent for a call that started at `started` and must run
    /// `silent` unanswered: [`silent_after`](Self::silent_after) after it was last heard, and not
    /// before the call has run that long.
    fn silent_at(&self, started: Instant, silent: Duration) -> Instant {
        let own = started + silent;
        self.heard_at()
            .map_or(own, |at| (at + self.silent_after()).max(own))
    }

    /// Runs `call` (started at `started`), watched at `looks`: each look asks the service with
    /// `ask` (given until it would count as silent, or [`WATCH_PROBE`] once it could: whether it
    /// answered). `silent` says, from how long
    /// the call ran, why the service counts as down. The caller bounds the whole with the call's
    /// time-out (and caps `ask` by it), or the call does.
    pub(crate) async fn watch<T, F, A, AF>(
        self: &Arc<Self>,
        mut call: F,
        started: Instant,
        looks: Looks,
        mut ask: A,
        silent: impl FnOnce(Duration) -> String,
    ) -> Watched<T>
    where
        F: Future<Output = T> + Unpin,
        A: FnMut(Duration) -> AF,
        AF: Future<Output = bool>,
    {
        let mut look_at = tokio::time::Instant::now() + looks.first;
        loop {
            tokio::select! {
                biased;
                done = &mut call => return Watched::Done(done),
                () = tokio::time::sleep_until(look_at) => {}
            }
            if let Gate::Wait(failure) = self.gate() {
                return Watched::Found(failure);
            }
            // The probe is given until the service would count as silent: a service answering in 3.5 s answers it, however long ago it was
            // last heard (a 2 s probe went unanswered, and a multipart upload to such an S3 was
            // given up between its parts: review).
            // (Past that moment already, as after an idle spell's look: WATCH_PROBE.)
            let until_silent = self
                .silent_at(started, looks.silent)
                .saturating_duration_since(Instant::now());
            let probe = if until_silent.is_zero() {
                WATCH_PROBE
            } else {
                until_silent
            };
            let asked = Instant::now();
            tokio::select! {
                biased;
                done = &mut call => return Watched::Done(done),
                answered = ask(probe) => {
                    // Silent: nothing heard for a while, the call included (a call that began
                    // after an idle spell is not given up before it has run that long: S3
                    // answering every request in 3.5 s was taken for down at the first upload
                    // after idling, black-box run).
                    let silent_at = self.silent_at(started, looks.silent);
                    if answered {
                        let took = asked.elapsed();
                        self.heard_after(took);
                        // The next probe is answered before the service could count as silent,
                        // if it takes as long as this one did (a slow S3 answers a probe in
                        // 3.5 s: one asked a whole `every` later came too late, review).
                        let next = self
                            .silent_after()
                            .saturating_sub(took.saturating_mul(2))
                            .clamp(LEAST_GAP, looks.every.max(LEAST_GAP));
                        look_at = tokio::time::Instant::now() + next;
                    } else if Instant::now() >= silent_at {
                        let error = silent(started.elapsed());
                        self.down(started, FailureKind::Timeout, &error);
                        return Watched::Silent(error);
                    } else {
                        // Unanswered (cut short by the call's time-out), but heard from lately:
                        // looked at again so that the probe ends as the service turns silent,
                        // not a whole `every` later (S3 went unanswered for 8 s after an upload
                        // that went through, instead of 5 s: review).
                        look_at = next_look_when_unanswered(silent_at, looks.every);
                    }
                }
            }
        }
    }
}
