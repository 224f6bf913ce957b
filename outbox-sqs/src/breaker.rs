//! The circuit breaker of one queue: a queue that failed as a whole ([`Class::Unavailable`]) is
//! not called again until a probe is due, so its events fail fast and the calls (and the relay's
//! time) go to the healthy queues.
//!
//! States: *closed* (calls go through); *open* since the first whole-queue failure (calls are
//! refused without touching the network, except one probe call per probe interval); a successful
//! call closes it again. Once it has been broken for the configured time, its events become
//! `Permanent` (dead-lettered) instead of `Unavailable`. Throttling opens the breaker too (the
//! queue or its key is overloaded: calling less is the cure) but never starts that clock: a
//! throttled queue's messages are fine and go through once the load passes, however long that
//! takes.
//!
//! [`Class::Unavailable`]: crate::Class::Unavailable

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;

/// Logs at `$level` with the breaker's destination under its own field name: `queue` (a URL),
/// `topic` (an ARN) or `bucket` (the bucket's name), as the gauges name them.
macro_rules! log {
    ($level:ident, $breaker:expr, $($rest:tt)+) => {
        match $breaker.noun() {
            SNS_TOPIC => tracing::$level!(topic = %$breaker.url, $($rest)+),
            S3_BUCKET => tracing::$level!(
                bucket = %$breaker.url.strip_prefix("s3://").unwrap_or(&$breaker.url),
                $($rest)+
            ),
            _ => tracing::$level!(queue = %$breaker.url, $($rest)+),
        }
    };
}

/// A queue's breaker. Shared by every `publish` of the publisher.
#[derive(Debug)]
pub(crate) struct Breaker {
    url: String,
    probe_interval: Duration,
    dead_letter_after: Duration,
    open: Mutex<Option<Open>>,
    /// `outbox_sqs_queue_unavailable{queue}`: 1 while open.
    gauge: Gauge,
}

#[derive(Debug, Clone)]
struct Open {
    /// The first failure of this open period.
    since: Instant,
    /// The first failure of this open period that was not throttling: the dead-letter clock
    /// (`None` while the queue has only been throttled).
    broken_since: Option<Instant>,
    /// When the next call may go through as a probe.
    next_probe: Instant,
    /// The last SQS error seen for the queue.
    last_error: String,
    /// When the last failure was recorded.
    last_failure: Instant,
    /// Whether the last failure said the destination is missing (SQS `QueueDoesNotExist`, SNS
    /// `NotFound`): the one refusal a probe of its own (`idle_breakers.rs`) can see end. A key or
    /// a policy that refuses sends only is not seen by `GetQueueAttributes`.
    missing: bool,
    /// Until when a probe may be under way (one probe interval from its start): refusals wait
    /// for its verdict and dead-letter nothing (events retried by an operator once the
    /// destination was fixed were dead-lettered again, in the millisecond the probe that closed
    /// the breaker was under way: black-box run). Ended by a failure (the destination refused
    /// again, whichever call it answered), or by time: a probe that ends without a verdict (a
    /// time-out, its caller cancelled) must not hold dead-lettering off for good (review).
    probing_until: Option<Instant>,
}

/// Whether a call may go to SQS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admit {
    /// The breaker is closed.
    Call,
    /// The breaker is open and this call is its probe.
    Probe,
    /// The breaker is open: do not call. `dead_letter` once it has been open too long.
    Refuse {
        /// Why, with the queue's last SQS error.
        reason: String,
        /// The queue has been broken longer than the dead-letter limit.
        dead_letter: bool,
    },
}

impl Breaker {
    pub(crate) fn new(
        url: String,
        probe_interval: Duration,
        dead_letter_after: Duration,
        gauge: Gauge,
    ) -> Self {
        gauge.set(0);
        Breaker {
            url,
            probe_interval,
            dead_letter_after,
            open: Mutex::new(None),
            gauge,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Open>> {
        // The state is a plain value: a panic elsewhere cannot leave it half-written.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the breaker is open now.
    #[cfg(test)]
    pub(crate) fn is_open(&self) -> bool {
        self.lock().is_some()
    }

    /// Asks to make a call now.
    pub(crate) fn admit(&self) -> Admit {
        self.admit_at(Instant::now())
    }

    pub(crate) fn admit_at(&self, now: Instant) -> Admit {
        let mut state = self.lock();
        let Some(open) = state.as_mut() else {
            return Admit::Call;
        };
        if now >= open.next_probe {
            // Whoever comes first probes; a probe whose caller is cancelled just lets the next
            // probe come one interval later.
            open.next_probe = now + self.probe_interval;
            open.probing_until = Some(now + self.probe_interval);
            log!(debug, self, "probing an unavailable destination");
            return Admit::Probe;
        }
        let (reason, dead_letter) = self.refuse(open, now);
        Admit::Refuse {
            reason,
            dead_letter,
        }
    }

    /// While open: why a call is refused now and whether past the dead-letter limit, without
    /// taking the probe (`None` when closed).
    pub(crate) fn refusal(&self) -> Option<(String, bool)> {
        self.refusal_at(Instant::now())
    }

    pub(crate) fn refusal_at(&self, now: Instant) -> Option<(String, bool)> {
        let state = self.lock();
        state.as_ref().map(|open| self.refuse(open, now))
    }

    fn refuse(&self, open: &Open, now: Instant) -> (String, bool) {
        let probing = open.probing_until.is_some_and(|until| now < until);
        let dead_letter = self.over_limit(open, now) && !probing;
        // Broken for: since the first failure that was not throttling, if any.
        let broken_for = now.saturating_duration_since(open.broken_since.unwrap_or(open.since));
        (
            self.reason(broken_for, dead_letter, &open.last_error),
            dead_letter,
        )
    }

    /// Whether `open` has been broken (not merely throttled) longer than the dead-letter limit.
    fn over_limit(&self, open: &Open, now: Instant) -> bool {
        open.broken_since
            .is_some_and(|b| now.saturating_duration_since(b) >= self.dead_letter_after)
    }

    /// Whether the breaker is open and no call has probed the destination for a whole probe
    /// interval after a probe was due: nothing is sent to it (its events dead-lettered, or held
    /// back behind those), so only a probe of its own can find it back (`idle_breakers.rs`).
    pub(crate) fn idle_at(&self, now: Instant) -> bool {
        self.lock()
            .as_ref()
            .is_some_and(|open| self.idle(open, now))
    }

    fn idle(&self, open: &Open, now: Instant) -> bool {
        open.missing && now >= open.next_probe + self.probe_interval
    }

    /// Records that the last failure said the destination is missing (see [`Open::missing`]).
    pub(crate) fn missing(&self) {
        if let Some(open) = self.lock().as_mut() {
            open.missing = true;
        }
    }

    /// Closes the breaker after a probe of its own found the destination back, `started` when the
    /// probe began, unless a call failed since (it may have found it missing again while the probe
    /// ran: review) or it is no longer idle.
    pub(crate) fn found_back(&self, started: Instant) {
        let closable = self
            .lock()
            .as_ref()
            .is_some_and(|open| open.last_failure <= started && self.idle(open, started));
        if closable {
            self.succeeded();
        }
    }

    /// Records a whole-queue failure (`throttled`: the queue or its key throttled the call);
    /// returns `true` when the queue has now been broken longer than the dead-letter limit (its
    /// events are to be dead-lettered).
    pub(crate) fn failed(&self, error: &str, throttled: bool) -> bool {
        self.failed_at(Instant::now(), error, throttled)
    }

    pub(crate) fn failed_at(&self, now: Instant, error: &str, throttled: bool) -> bool {
        let mut state = self.lock();
        match state.as_mut() {
            None => {
                log!(
                    warn,
                    self,
                    error,
                    probe_every_ms = self.probe_interval.as_millis() as u64,
                    dead_letter_after_secs = self.dead_letter_after.as_secs(),
                    "destination unavailable: circuit opened; its events are put back without \
                     counting an attempt and it is probed until it works again"
                );
                self.gauge.set(1);
                let open = Open {
                    since: now,
                    broken_since: (!throttled).then_some(now),
                    next_probe: now + self.probe_interval,
                    last_error: error.to_owned(),
                    missing: false,
                    last_failure: now,
                    probing_until: None,
                };
                let dead = self.over_limit(&open, now);
                *state = Some(open);
                dead
            }
            Some(open) => {
                open.last_error = error.to_owned();
                open.missing = false;
                open.last_failure = now;
                open.probing_until = None;
                open.next_probe = open.next_probe.max(now + self.probe_interval);
                if !throttled {
                    open.broken_since.get_or_insert(now);
                }
                self.over_limit(open, now)
            }
        }
    }

    /// Records a call the queue answered normally: closes the breaker.
    pub(crate) fn succeeded(&self) {
        self.succeeded_at(Instant::now())
    }

    pub(crate) fn succeeded_at(&self, now: Instant) {
        let mut state = self.lock();
        if let Some(open) = state.take() {
            self.gauge.set(0);
            log!(
                info,
                self,
                unavailable_for_ms = now.saturating_duration_since(open.since).as_millis() as u64,
                "destination available again: circuit closed"
            );
        }
    }

    /// The reason given for an event refused or failed while the breaker has been open for
    /// `broken_for` (`dead_letter`: broken past the limit).
    pub(crate) fn reason(
        &self,
        broken_for: Duration,
        dead_letter: bool,
        last_error: &str,
    ) -> String {
        if dead_letter {
            format!(
                "{} `{}` unavailable for {} s, longer than the limit of {} s: {last_error}",
                self.noun(),
                self.url,
                broken_for.as_secs(),
                self.dead_letter_after.as_secs()
            )
        } else {
            format!(
                "{} `{}` unavailable for {} s (circuit open, not called): {last_error}",
                self.noun(),
                self.url,
                broken_for.as_secs()
            )
        }
    }

    /// How long the breaker has been open, and the last error (`None` when closed).
    pub(crate) fn broken_for(&self) -> Option<(Duration, String)> {
        self.lock()
            .as_ref()
            .map(|o| (o.since.elapsed(), o.last_error.clone()))
    }
}

const SNS_TOPIC: &str = "SNS topic";
const S3_BUCKET: &str = "S3 offload bucket";
const SQS_QUEUE: &str = "SQS queue";

impl Breaker {
    /// What the destination is, for messages: an SNS topic (an ARN), the S3 offload bucket
    /// (`s3://BUCKET`) or an SQS queue (a URL).
    fn noun(&self) -> &'static str {
        if self.url.starts_with("arn:") {
            SNS_TOPIC
        } else if self.url.starts_with("s3://") {
            S3_BUCKET
        } else {
            SQS_QUEUE
        }
    }
}

#[cfg(test)]
mod tests;
