//! A service down: a call to it failed without an answer (a time-out, unreachable) or with a 5xx,
//! and a small call right after was not answered either (or, for S3, uploads stall while it
//! answers). While it is down, the events that need it are put back at once, uncounted, without a
//! call, so that the other events of their batches go on; a task of its own asks the service once
//! per probe interval ([`Probe`]) and ends the state when it answers. Used for S3 (`s3_down.rs`)
//! and for each queue and topic (`destination_down.rs`).
//!
//! Unlike a circuit breaker (a destination refusing: missing, access denied), being down never
//! dead-letters an event and moves no gauge: the events wait for the service, however long, and
//! count under `outbox_events_deferred_total` with the outage's reason.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use outbox_core::{FailureKind, PublishFailure};
use prometheus_client::metrics::gauge::Gauge;

use crate::shared_probe::SharedProbe;

/// How a service is asked whether it answers, and how its being down is told.
pub(crate) trait Probe: std::fmt::Debug + Send + Sync + 'static {
    /// Whether the service answers a small call within `timeout`: anything but no answer or a
    /// 5xx (a refusal is an answer: the breaker's to handle, not an outage).
    fn answered(&self, timeout: Duration) -> impl Future<Output = bool> + Send;
    /// Why an event waits while the service is down (`error`: how the call that found it down
    /// failed).
    fn waiting(&self, error: &str) -> String;
    /// Logs that the service is down (once per outage), probed every `every`.
    fn log_down(&self, error: &str, every: Duration);
    /// Logs that the service answers again.
    fn log_up(&self);
}

/// Whether a service is down: S3 for one bucket, or one queue or topic. Shared by every `publish`
/// of the publisher.
#[derive(Debug)]
pub(crate) struct Down<P: Probe> {
    /// Asked at most once at a time: whoever asks meanwhile shares the answer.
    probe: SharedProbe<P>,
    probe_interval: Duration,
    /// How long a probe may take (the call time-out).
    probe_timeout: Duration,
    /// 1 while down (`outbox_sqs_queue_down`, `outbox_sns_topic_down`, `outbox_s3_down`).
    gauge: Gauge,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    down: Option<Outage>,
    /// When the service last came back from being down: a failure of a call started before that
    /// is stale, caught in the outage that ended then. (Not any answer: on a link too slow for
    /// one S3 payload, the others' uploads go through meanwhile, and its time-out still counts.)
    recovered_at: Option<Instant>,
    /// When the service last answered a call or a probe.
    heard_at: Option<Instant>,
    /// How long the last call or probe answered with its time kept took (see
    /// [`Down::silent_after`]).
    answer_took: Option<Duration>,
    /// Whether the probing task runs.
    probing: bool,
}

#[derive(Debug)]
struct Outage {
    /// How the call that found the service down failed, and its error.
    kind: FailureKind,
    error: String,
}

/// What a call may do now.
#[derive(Debug)]
pub(crate) enum Gate {
    /// The service is not known to be down.
    Go,
    /// The service is down: do not call; put the event back with this failure.
    Wait(PublishFailure),
}

impl<P: Probe> Down<P> {
    /// `gauge`: 1 while down.
    pub(crate) fn new(
        probe: P,
        probe_interval: Duration,
        probe_timeout: Duration,
        gauge: Gauge,
    ) -> Self {
        Down {
            probe: SharedProbe::new(probe),
            probe_interval,
            probe_timeout,
            gauge,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain values: a panic elsewhere cannot leave them half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How the service is asked.
    pub(crate) fn probe(&self) -> &P {
        self.probe.probe()
    }

    /// Whether the service answers a small call within `timeout`, asked with the probe in flight
    /// when that runs at least as long, or a new one (see `shared_probe.rs`).
    pub(crate) async fn answered(&self, timeout: Duration) -> bool {
        self.probe.answered(timeout).await
    }

    /// Asks to call now.
    pub(crate) fn gate(&self) -> Gate {
        match &self.lock().down {
            None => Gate::Go,
            Some(down) => Gate::Wait(PublishFailure::new(
                down.kind,
                self.probe().waiting(&down.error),
            )),
        }
    }

    /// Whether the service is known to be down.
    pub(crate) fn is_down(&self) -> bool {
        self.lock().down.is_some()
    }

    /// Whether the service has come back from being down since `started`: a failure of a call
    /// started before is stale.
    pub(crate) fn recovered_since(&self, started: Instant) -> bool {
        self.lock().recovered_at.is_some_and(|at| at >= started)
    }

    /// The service did not answer a call started at `started` (or failed it with a 5xx), nor a
    /// small call after it; or S3 stalls uploads (see `upload_failure.rs`). Ignored when it
    /// has come back since `started`: the outage the call was caught in is over. Outside a Tokio
    /// runtime (no task could probe) nothing changes.
    pub(crate) fn down(self: &Arc<Self>, started: Instant, kind: FailureKind, error: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut state = self.lock();
        if state.recovered_at.is_some_and(|at| at >= started) {
            return;
        }
        if state.down.is_none() {
            self.probe().log_down(error, self.probe_interval);
            self.gauge.set(1);
        }
        state.down = Some(Outage {
            kind,
            error: error.to_owned(),
        });
        if !state.probing {
            state.probing = true;
            runtime.spawn(Self::probe_until_up(Arc::downgrade(self)));
        }
    }

    /// The service answered (a call went through, or a probe was answered).
    pub(crate) fn up(&self) {
        let mut state = self.lock();
        state.heard_at = Some(Instant::now());
        if state.down.take().is_some() {
            state.recovered_at = Some(Instant::now());
            self.gauge.set(0);
            self.probe().log_up();
        }
    }

    /// Records that the service answered (a probe), without ending an outage.
    pub(crate) fn heard(&self) {
        self.lock().heard_at = Some(Instant::now());
    }

    /// [`up`](Self::up), by an answer that took `took`: its pace kept for
    /// [`silent_after`](Self::silent_after).
    pub(crate) fn up_after(&self, took: Duration) {
        self.lock().answer_took = Some(took);
        self.up();
    }

    /// [`heard`](Self::heard), by an answer that took `took`: its pace kept for
    /// [`silent_after`](Self::silent_after).
    pub(crate) fn heard_after(&self, took: Duration) {
        let mut state = self.lock();
        state.heard_at = Some(Instant::now());
        state.answer_took = Some(took);
    }

    /// Keeps `took`, an answer's time, as the service's pace for
    /// [`silent_after`](Self::silent_after), without counting it heard (the start-up check's
    /// answer: a service silent right after it is still found down at the first call).
    pub(crate) fn paced_by(&self, took: Duration) {
        self.lock().answer_took = Some(took);
    }

    /// How long the last answer with its time kept took.
    pub(crate) fn answer_took(&self) -> Option<Duration> {
        self.lock().answer_took
    }

    /// Whether the service answered a call or a probe at or after `since`.
    pub(crate) fn heard_since(&self, since: Instant) -> bool {
        self.lock().heard_at.is_some_and(|at| at >= since)
    }

    /// When the service last answered a call or a probe.
    pub(crate) fn heard_at(&self) -> Option<Instant> {
        self.lock().heard_at
    }

    /// Whether the service answered a call or a probe within `recently` of now: slow, not silent.
    pub(crate) fn heard_within(&self, recently: Duration) -> bool {
        self.lock()
            .heard_at
            .is_some_and(|at| at.elapsed() < recently)
    }

    /// Once per probe interval, on a fixed schedule, a probe of its own task, given the whole
    /// probe time-out: a slow service answers it (given at most the interval, a service answering
    /// in 2-12 s stayed down: black-box run), and the next still goes on schedule (one awaited in
    /// turn pushed the next a whole call time-out later: black-box run). Ends when the service is
    /// no longer down, or when the publisher is gone (it held the state, and probed on, for the
    /// rest of the process).
    async fn probe_until_up(down: Weak<Self>) {
        let Some(every) = down.upgrade().map(|d| d.probe_interval) else {
            return;
        };
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(this) = down.upgrade() else {
                return;
            };
            {
                let mut state = this.lock();
                if state.down.is_none() {
                    state.probing = false;
                    return;
                }
            }
            tokio::spawn(async move { this.probe_once().await });
        }
    }

    /// One probe: the service is up again once it answers. Not shared with the watches' probes:
    /// each interval's probe is a new one, which a service back since the one before answers,
    /// whatever became of that one.
    async fn probe_once(&self) {
        let asked = Instant::now();
        if self.lock().down.is_some() && self.probe().answered(self.probe_timeout).await {
            self.up_after(asked.elapsed());
        }
    }
}
