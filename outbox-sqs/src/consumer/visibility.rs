//! Changing how long received messages stay hidden: the retry back-off after a failure, releasing
//! messages at once, and the heartbeat that keeps a slow handler's messages hidden.

use std::time::{Duration, Instant};

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry;
use tokio::sync::Mutex;

use super::config::{ConsumerConfig, MAX_VISIBILITY_TIMEOUT};
use super::metrics::ConsumerMetrics;

/// How far short of SQS's 12-hour limit a message's hiding stops.
const LIMIT_MARGIN: Duration = Duration::from_secs(60);

/// The retry delay after the `receive_count`-th delivery failed:
/// `retry_initial × 2^(receive_count − 1)`, at most `retry_max` (SQS then rounds it up to whole
/// seconds: [`hidden_secs`]).
pub(crate) fn retry_delay(config: &ConsumerConfig, receive_count: u32) -> Duration {
    let doublings = receive_count.saturating_sub(1).min(30);
    config
        .retry_initial
        .saturating_mul(1u32 << doublings)
        .min(config.retry_max)
}

/// `hidden` in the whole seconds SQS takes, rounded up: a delay asked for is never cut short (a
/// 250 ms retry delay hides the message for 1 s, not 0).
pub(crate) fn hidden_secs(hidden: Duration) -> i32 {
    let whole = hidden
        .as_secs()
        .saturating_add(u64::from(hidden.subsec_nanos() > 0));
    i32::try_from(whole).unwrap_or(i32::MAX)
}

/// The receipts of a unit's messages that the heartbeat keeps hidden. Whoever disposes of a
/// message (deletes it, or hides it for a retry, or releases it) [`take`](Self::take)s its receipt
/// first; that waits for a heartbeat call in flight, so the heartbeat's call is answered before
/// the disposal is sent and does not override it (a retry delay or an immediate release
/// stretched to a whole visibility time-out). A heartbeat call given up on after half its interval
/// may still be applied by SQS later: the message then stays hidden for one visibility time-out.
pub(crate) struct Pending {
    receipts: Mutex<Vec<String>>,
    /// When the unit's messages were received: SQS hides a message for at most 12 hours from then.
    received_at: Instant,
}

impl Pending {
    pub(crate) fn new(receipts: Vec<String>, received_at: Instant) -> Self {
        Pending {
            receipts: Mutex::new(receipts),
            received_at,
        }
    }

    /// `hidden`, cut so that the message is hidden no later than 12 hours (less a minute's margin)
    /// after it was received: SQS refuses a longer change outright, and the message would then
    /// come back after its visibility time-out instead of the delay asked for.
    pub(crate) fn within_limit(&self, hidden: Duration) -> Duration {
        let left = MAX_VISIBILITY_TIMEOUT
            .saturating_sub(self.received_at.elapsed())
            .saturating_sub(LIMIT_MARGIN);
        hidden.min(left)
    }

    /// Takes `receipt` out; once this returns no heartbeat call includes it.
    pub(crate) async fn take(&self, receipt: &str) {
        self.take_all(&[receipt]).await;
    }

    /// Takes `receipts` out at once.
    pub(crate) async fn take_all(&self, receipts: &[impl AsRef<str>]) {
        self.receipts
            .lock()
            .await
            .retain(|r| !receipts.iter().any(|t| t.as_ref() == r));
    }
}

/// Where and how visibility changes are sent: the client, the queue, the metrics, and the longest
/// one call may take.
#[derive(Clone, Copy)]
pub(crate) struct Sqs<'a> {
    pub(crate) client: &'a Client,
    pub(crate) queue_url: &'a str,
    pub(crate) metrics: &'a ConsumerMetrics,
    pub(crate) call_timeout: Duration,
}

/// Hides the messages of `receipts` for `hidden` from now (0: visible at once; rounded up to whole
/// seconds). Failures, and calls that do not answer within the call time-out, are logged and
/// counted; the message then reappears when its current time-out ends.
pub(crate) async fn change(sqs: Sqs<'_>, receipts: &[String], hidden: Duration) {
    let Sqs {
        client,
        queue_url,
        metrics,
        call_timeout,
    } = sqs;
    for chunk in receipts.chunks(10) {
        let entries: Vec<_> = chunk
            .iter()
            .enumerate()
            .filter_map(|(i, handle)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(handle)
                    .visibility_timeout(hidden_secs(hidden))
                    .build()
                    .ok()
            })
            .collect();
        let call = client
            .change_message_visibility_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send();
        let Ok(result) = tokio::time::timeout(call_timeout, call).await else {
            metrics.on_failure("visibility");
            tracing::warn!(
                queue = %queue_url,
                timeout_ms = call_timeout.as_millis() as u64,
                "ChangeMessageVisibilityBatch did not answer in time; given up"
            );
            continue;
        };
        match result {
            Ok(out) => {
                for failed in out.failed() {
                    metrics.on_failure("visibility");
                    tracing::warn!(
                        queue = %queue_url,
                        code = failed.code(),
                        message = failed.message().unwrap_or_default(),
                        "ChangeMessageVisibilityBatch failed an entry"
                    );
                }
            }
            Err(e) => {
                metrics.on_failure("visibility");
                tracing::warn!(
                    queue = %queue_url,
                    error = %outbox_core::error_chain(&e),
                    "ChangeMessageVisibilityBatch failed"
                );
            }
        }
    }
}

/// Every third of the visibility time-out, hides the messages still in `pending` for another
/// whole time-out. Runs until dropped.
pub(crate) async fn heartbeat(sqs: Sqs<'_>, visibility_timeout: Duration, pending: &Pending) {
    let every = (visibility_timeout / 3).max(Duration::from_millis(300));
    // Never past SQS's 12 hours from the receive (it refuses such a change): the last beats hide
    // for what is left, then none (the messages reappear when their time-out ends).
    let hide = |receipts: Vec<String>| async move {
        let hidden = pending.within_limit(visibility_timeout);
        if !hidden.is_zero() {
            change(sqs, &receipts, hidden).await;
        }
    };
    let timed_out = || {
        sqs.metrics.on_failure("visibility");
        tracing::warn!(
            queue = %sqs.queue_url,
            timeout_ms = cut_off(every).as_millis() as u64,
            "a heartbeat's ChangeMessageVisibilityBatch did not answer in time; given up"
        );
    };
    beat(every, pending, hide, timed_out).await;
}

/// How long a heartbeat call every `every` may take before it is given up on: half the interval,
/// so that the next call still goes out on time.
fn cut_off(every: Duration) -> Duration {
    every / 2
}

/// The heartbeat's loop: every `every`, on a fixed schedule from its start, `hide` the receipts
/// still pending, holding them while the call runs but never for longer than half of `every` (a
/// call that hangs must not hold up the unit's disposals: its messages are then left to their
/// current time-out, and `timed_out` is told). The next call still goes out on schedule, so a call
/// given up on leaves two intervals between the calls SQS applied, not three: with `every` a third
/// of the visibility time-out, the messages stay hidden (it slept a whole interval after each
/// call, and a hung one was given up on only at the end of its own interval).
async fn beat<F: Future<Output = ()>>(
    every: Duration,
    pending: &Pending,
    hide: impl Fn(Vec<String>) -> F,
    timed_out: impl Fn(),
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let receipts = pending.receipts.lock().await;
        if receipts.is_empty() {
            continue;
        }
        let on_time = tokio::time::timeout(cut_off(every), hide(receipts.clone()))
            .await
            .is_ok();
        drop(receipts);
        if !on_time {
            timed_out();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_per_receive_up_to_the_maximum() {
        let mut c = ConsumerConfig::new("c");
        c.retry_initial = Duration::from_secs(1);
        c.retry_max = Duration::from_secs(60);
        let delays: Vec<u64> = (0..10).map(|n| retry_delay(&c, n).as_secs()).collect();
        assert_eq!(delays, [1, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(retry_delay(&c, u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn hiding_stops_short_of_twelve_hours_after_the_receive() {
        let hour = Duration::from_secs(3600);
        let fresh = Pending::new(Vec::new(), Instant::now());
        assert_eq!(
            fresh.within_limit(Duration::from_secs(5)),
            Duration::from_secs(5)
        );
        assert!(fresh.within_limit(12 * hour) <= 12 * hour - LIMIT_MARGIN);
        let Some(old) = Instant::now().checked_sub(11 * hour) else {
            return; // a clock too young to go back 11 h: nothing to check here
        };
        let old = Pending::new(Vec::new(), old);
        assert!(old.within_limit(5 * hour) <= hour - LIMIT_MARGIN);
    }

    #[test]
    fn a_delay_is_rounded_up_to_whole_seconds_never_down() {
        let ms = Duration::from_millis;
        assert_eq!(hidden_secs(Duration::ZERO), 0);
        assert_eq!(hidden_secs(ms(250)), 1, "was 0: visible again at once");
        assert_eq!(hidden_secs(ms(1000)), 1);
        assert_eq!(hidden_secs(ms(1500)), 2);
        assert_eq!(hidden_secs(Duration::MAX), i32::MAX);
    }

    /// Drives the heartbeat's loop with a fake call that takes `call` and logs what it hid.
    async fn disposal_during_a_call(call: Duration) -> Vec<String> {
        use std::sync::Mutex as StdMutex;
        use tokio::time::sleep;
        let pending = Pending::new(vec!["a".into(), "b".into()], std::time::Instant::now());
        let log = StdMutex::new(Vec::new());
        let note = |what: String| log.lock().unwrap().push(what);
        let hide = |receipts: Vec<String>| async move {
            note(format!("call {}", receipts.join(",")));
            sleep(call).await;
            note("answer".into());
        };
        let every = Duration::from_millis(100);
        let dispose = async {
            sleep(Duration::from_millis(130)).await; // "a" is disposed of while the first call is out
            pending.take("a").await;
            note("take a".into());
            sleep(Duration::from_millis(200)).await; // the next call
        };
        let run = async {
            tokio::select! {
                _ = beat(every, &pending, hide, || note("timed out".into())) => {}
                _ = dispose => {}
            }
        };
        // A disposal stuck behind the heartbeat fails the test instead of hanging it.
        let _ = tokio::time::timeout(Duration::from_secs(5), run).await;
        log.into_inner().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn taking_a_receipt_waits_for_the_heartbeat_call_in_flight() {
        let log = disposal_during_a_call(Duration::from_millis(40)).await;
        assert_eq!(
            log[..4],
            ["call a,b", "answer", "take a", "call b"],
            "the disposal comes after the call in flight, and the next call leaves it out"
        );
    }

    /// One hung call must not let the messages reappear: the calls SQS answers stay less than a
    /// visibility time-out apart, the first one included (review: the beat slept a whole interval
    /// after a call given up on at the end of its own, so the next call came a whole time-out
    /// after the last one applied, when the messages were visible again).
    #[tokio::test(start_paused = true)]
    async fn a_hung_call_leaves_no_gap_of_a_whole_time_out() {
        use std::sync::Mutex as StdMutex;
        let visibility_timeout = Duration::from_secs(30);
        let every = visibility_timeout / 3;
        let pending = Pending::new(vec!["a".into()], std::time::Instant::now());
        let started = tokio::time::Instant::now();
        let calls = StdMutex::new(Vec::new());
        let hide = |_receipts: Vec<String>| {
            let n = {
                let mut calls = calls.lock().unwrap();
                calls.push(started.elapsed());
                calls.len()
            };
            async move {
                if n == 2 {
                    std::future::pending::<()>().await; // the second call never answers
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(100), beat(every, &pending, hide, || {}))
            .await;
        let calls = calls.into_inner().unwrap();
        let answered: Vec<Duration> = calls
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .map(|(_, t)| *t)
            .collect();
        assert!(answered[0] < visibility_timeout, "{calls:?}");
        for pair in answered.windows(2) {
            assert!(
                pair[1] - pair[0] < visibility_timeout,
                "answered calls a time-out apart: {calls:?}"
            );
        }
        assert!(calls.len() >= 8, "{calls:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_heartbeat_call_does_not_hold_up_the_disposal() {
        let log = disposal_during_a_call(Duration::from_secs(3600)).await;
        assert_eq!(
            log[..4],
            ["call a,b", "timed out", "take a", "call b"],
            "given up after half an interval"
        );
    }
}
