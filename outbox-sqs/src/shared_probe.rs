//! One probe in flight per service, shared by whoever asks meanwhile: the watches of a slow
//! destination's calls each asked it with a probe of their own (black-box run: 290 probes for 175
//! calls to a topic answering in 7 s, each probe as slow as the calls, adding to its load; joined
//! only within a second of its start, 69 probes for 83 calls, up to six in flight at once).
//!
//! A probe in flight is joined when it started at most [`JOIN_WITHIN`] ago and was given at least
//! as long as the asker would give one of its own (less [`SLACK`]): started earlier, it is
//! answered no later than a new one would be, and once it gives up it went unanswered for as long
//! as the asker's own would have; its answer says what the asker's would have. (Not an older one:
//! a probe stuck on a dead connection would answer for every later asker, where a new probe, on
//! another connection, might be answered.) Otherwise a new probe is sent, and later askers join
//! that one. Each asker waits at most its own time-out.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio::time::Instant;

use crate::down::Probe;
use crate::watch::SILENT_AFTER;

/// How recently a probe in flight must have started to be joined: within the time a service is
/// given before it counts as silent ([`SILENT_AFTER`]), at most one probe per destination runs
/// at a time but for one given longer.
const JOIN_WITHIN: Duration = SILENT_AFTER;

/// How much shorter than the asker's own a probe joined may have been given: the time-outs of
/// askers that would give their probes the same moment differ by the time between their asks.
const SLACK: Duration = Duration::from_millis(100);

/// `P`, asked at most once at a time (see the module docs).
pub(crate) struct SharedProbe<P> {
    probe: Arc<P>,
    asking: Mutex<Option<Asking>>,
}

/// The probe in flight.
struct Asking {
    /// When it was sent.
    started: Instant,
    /// How long it was given.
    given: Duration,
    /// Whether the service answered it.
    answer: Shared<BoxFuture<'static, bool>>,
}

impl<P: std::fmt::Debug> std::fmt::Debug for SharedProbe<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedProbe")
            .field("probe", &self.probe)
            .finish_non_exhaustive()
    }
}

impl<P: Probe> SharedProbe<P> {
    pub(crate) fn new(probe: P) -> Self {
        SharedProbe {
            probe: Arc::new(probe),
            asking: Mutex::new(None),
        }
    }

    /// The probe itself.
    pub(crate) fn probe(&self) -> &P {
        &self.probe
    }

    /// Whether the service answers a small call within `timeout` ([`Probe::answered`]): the
    /// probe in flight when it may be joined (see the module docs), or a new one.
    pub(crate) async fn answered(&self, timeout: Duration) -> bool {
        let now = Instant::now();
        let answer = {
            // A plain value: a panic elsewhere cannot leave it half-written.
            let mut asking = self.asking.lock().unwrap_or_else(|e| e.into_inner());
            match asking.as_ref() {
                Some(a)
                    if now.saturating_duration_since(a.started) <= JOIN_WITHIN
                        && a.given + SLACK >= timeout
                        && a.answer.peek().is_none() =>
                {
                    a.answer.clone()
                }
                _ => {
                    let probe = Arc::clone(&self.probe);
                    let answer = async move { probe.answered(timeout).await }
                        .boxed()
                        .shared();
                    *asking = Some(Asking {
                        started: now,
                        given: timeout,
                        answer: answer.clone(),
                    });
                    answer
                }
            }
        };
        tokio::time::timeout_at(now + timeout, answer)
            .await
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A service answering each probe `latency` late, counting them.
    #[derive(Debug)]
    struct Counted {
        latency: Duration,
        sent: Arc<AtomicUsize>,
    }

    impl Probe for Counted {
        async fn answered(&self, timeout: Duration) -> bool {
            self.sent.fetch_add(1, Ordering::SeqCst);
            tokio::time::timeout(timeout, tokio::time::sleep(self.latency))
                .await
                .is_ok()
        }
        fn waiting(&self, error: &str) -> String {
            error.to_owned()
        }
        fn log_down(&self, _: &str, _: Duration) {}
        fn log_up(&self) {}
    }

    fn answering_in(latency: Duration) -> (Arc<SharedProbe<Counted>>, Arc<AtomicUsize>) {
        let sent = Arc::new(AtomicUsize::new(0));
        let probe = SharedProbe::new(Counted {
            latency,
            sent: Arc::clone(&sent),
        });
        (Arc::new(probe), sent)
    }

    #[tokio::test(start_paused = true)]
    async fn askers_at_once_share_one_probe_and_its_answer() {
        let (probe, sent) = answering_in(Duration::from_millis(300));
        let asks = (0..10).map(|_| {
            let probe = Arc::clone(&probe);
            tokio::spawn(async move { probe.answered(Duration::from_secs(2)).await })
        });
        for answered in futures::future::join_all(asks).await {
            assert!(matches!(answered, Ok(true)), "{answered:?}");
        }
        assert_eq!(sent.load(Ordering::SeqCst), 1);
        // Ended: the next ask sends a probe of its own.
        assert!(probe.answered(Duration::from_secs(2)).await);
        assert_eq!(sent.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_given_less_time_than_the_askers_own_is_not_joined() {
        let (probe, sent) = answering_in(Duration::from_millis(800));
        let short = probe.answered(Duration::from_millis(500));
        let long = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            probe.answered(Duration::from_secs(2)).await
        };
        let (short, long) = tokio::join!(short, long);
        assert!(!short, "given 500 ms, answered in 800");
        assert!(long, "a probe of its own, given 2 s");
        assert_eq!(sent.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_probe_sent_a_few_seconds_ago_is_joined() {
        let (probe, sent) = answering_in(Duration::from_secs(6));
        let first = probe.answered(Duration::from_secs(8));
        let later = async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            probe.answered(Duration::from_secs(4)).await
        };
        let (first, later) = tokio::join!(first, later);
        assert!(first && later, "answered 6 s after the first ask");
        assert_eq!(sent.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_sent_longer_ago_than_a_service_has_before_it_is_silent_is_not_joined() {
        let (probe, sent) = answering_in(Duration::from_secs(8));
        let first = probe.answered(Duration::from_secs(10));
        let late = async {
            tokio::time::sleep(JOIN_WITHIN + Duration::from_millis(100)).await;
            probe.answered(Duration::from_secs(10)).await
        };
        let (first, late) = tokio::join!(first, late);
        assert!(first && late);
        assert_eq!(sent.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_joiner_waits_no_longer_than_its_own_time_out() {
        let (probe, sent) = answering_in(Duration::from_millis(1_000));
        let first = probe.answered(Duration::from_secs(3));
        let joiner = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let asked = Instant::now();
            let answered = probe.answered(Duration::from_millis(300)).await;
            (answered, asked.elapsed())
        };
        let (first, (joined, took)) = tokio::join!(first, joiner);
        assert!(first);
        assert!(!joined, "not answered within its 300 ms");
        assert!(took < Duration::from_millis(700), "{took:?}");
        assert_eq!(sent.load(Ordering::SeqCst), 1, "joined");
    }
}
