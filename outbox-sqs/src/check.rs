//! The start-up check: every configured queue and topic exists, the offload bucket too, and the
//! credentials work. A queue or topic that does not answer within [`SILENT_AFTER`] while another
//! destination does, or S3, is not a failure: the relay starts with it down. Nothing answering
//! within the call time-out fails.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use futures::StreamExt;
use futures::stream::FuturesUnordered;

use crate::call::direct_error;
use crate::destination::DestinationKind;
use crate::destination_down::DestinationDown;
use crate::error::{ErrorKind, Result};
use crate::publisher::{Queue, SqsPublisher};
use crate::sdk_error::{sdk_error, timeout_error};
use crate::watch::SILENT_AFTER;
use outbox_core::FailureKind;

/// How long a destination whose service answered nothing at start-up may stay silent before an
/// error says to check its endpoint and network path.
const STILL_SILENT_AFTER: Duration = Duration::from_secs(60);

/// A destination of a service that answered nothing at start-up.
struct StillSilent {
    down: Weak<DestinationDown>,
    destination: String,
    service: &'static str,
}

impl StillSilent {
    /// Logs an error when the destination has answered nothing `after` the start-up check that
    /// began at `started` (nothing, unless the publisher is gone by then).
    async fn after(self, started: Instant, after: Duration) {
        tokio::time::sleep(after).await;
        let Some(down) = self.down.upgrade() else {
            return;
        };
        if !down.heard_since(started) {
            tracing::error!(destination = %self.destination, silent_secs = after.as_secs(),
                "no {} destination has answered since start-up: check its endpoint and network \
                 path; its events wait, uncounted, until it answers", self.service);
        }
    }
}

impl SqsPublisher {
    /// `GetQueueAttributes` on every configured queue and `GetTopicAttributes` on every topic
    /// (both also read its `MaximumMessageSize`), `HeadBucket` on the offload bucket; the first failure,
    /// naming its queue, topic or bucket.
    pub(crate) async fn check_queues(&self) -> Result<()> {
        let started = Instant::now();
        // S3 alongside: it answering or not never decides whether the relay starts.
        let s3_check = async {
            match &self.inner.offload {
                Some(offload) => Some(offload.check(self.check_timeout()).await),
                None => None,
            }
        };
        let (results, s3_result) = futures::join!(self.check_destinations(), s3_check);
        let answers = |kind: DestinationKind| {
            self.inner
                .queues
                .iter()
                .zip(&results)
                .any(|(q, r)| q.kind == kind && r.is_ok())
        };
        let (queues_answer, topics_answer) = (
            answers(DestinationKind::Queue),
            answers(DestinationKind::Topic),
        );
        let answered = |kind: DestinationKind| match kind {
            DestinationKind::Topic => topics_answer,
            _ => queues_answer,
        };
        let any_answered = results.iter().any(Result::is_ok);
        let mut silent = Vec::new();
        // With nothing answering, the unreachable are named together with the silent (a refused
        // connection named the first destination only: black-box run).
        let mut unreachable = Vec::new();
        for (queue, result) in self.inner.queues.iter().zip(results) {
            match result {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Unavailable && !any_answered => {
                    unreachable.push(e)
                }
                // A destination that does not answer, while another does: start with it down,
                // its events waiting uncounted, so that the others' are relayed (black-box runs:
                // one black-holed queue failed every relay's restart, and all delivery with it;
                // so did a topic answering in 2-12 s, the only one of SNS, at half the restarts).
                Err(e) if e.kind() == ErrorKind::Timeout => {
                    silent.push((queue, answered(queue.kind), e))
                }
                // A refusal (missing, access denied) or bad credentials: a setting to fix, said
                // before any silence (which it may explain).
                Err(e) => return Err(e),
            }
        }
        let none_reached = !silent.is_empty() || !unreachable.is_empty();
        if !any_answered && none_reached {
            // Nothing answering fails: a wrong endpoint, or no network.
            unreachable.extend(silent.into_iter().map(|(_, _, e)| e));
            return Err(nothing_answered(unreachable));
        }
        for (queue, service_answered, e) in silent {
            let error = outbox_core::error_chain(&e);
            if service_answered {
                tracing::warn!(destination = %queue.url, kind = %queue.kind, error,
                    "a destination did not answer the start-up check: starting all the same, \
                     with it down; its events wait, uncounted, until it answers");
            } else {
                // No destination of its service answered: as likely a wrong endpoint, or one a
                // firewall blocks, as a slow or failing service; said louder once it has not
                // answered for a minute (review; an error at once paged for a topic answering
                // in 6.6 s, which answered 12 s later: black-box run).
                tracing::warn!(destination = %queue.url, kind = %queue.kind, error,
                    "no {} destination answered the start-up check: starting all the same, with \
                     it down; its events wait, uncounted, until it answers", queue.service());
                let silent = StillSilent {
                    down: Arc::downgrade(&queue.down),
                    destination: queue.url.clone(),
                    service: queue.service(),
                };
                tokio::spawn(silent.after(started, STILL_SILENT_AFTER));
            }
            queue.down.down(started, FailureKind::Timeout, &error);
        }
        if let (Some(offload), Some(Err(e))) = (&self.inner.offload, s3_result) {
            // S3 down (no answer, unreachable, a 5xx): start all the same, its offloaded
            // events waiting until an upload goes through, so that the others are relayed
            // (black-box run: the relay could not start, or restart, during an S3 outage,
            // and relayed nothing). A refusal (the bucket missing, access denied) fails.
            let kind = match e.kind() {
                ErrorKind::Timeout => FailureKind::Timeout,
                ErrorKind::Unavailable => FailureKind::Unreachable,
                ErrorKind::Service if !offload.answers(self.check_timeout()).await => {
                    FailureKind::Broker
                }
                _ => return Err(e),
            };
            let error = outbox_core::error_chain(&e);
            tracing::warn!(bucket = %offload.bucket, error,
                "S3 did not answer the start-up check: starting all the same; offloaded \
                 events wait until an upload goes through");
            offload.down.down(started, kind, &error);
        }
        Ok(())
    }

    /// How long the start-up check waits for S3, or a queue or topic: as long as the in-flight
    /// watch lets a service be silent before it counts as down ([`SILENT_AFTER`]). A service not
    /// answering starts the relay with it down, and each start during an S3 outage waited the
    /// whole call time-out first, relaying nothing meanwhile (black-box run: 10 s per restart;
    /// 9 s for a topic answering in 2-12 s); given 3 s, S3 answering in 3.5 s was taken for down
    /// at every start (black-box run).
    fn check_timeout(&self) -> Duration {
        self.inner.call_timeout.min(SILENT_AFTER)
    }

    /// Every destination's check, each given the call time-out; once one has answered, the
    /// others are given until [`check_timeout`](Self::check_timeout) from the start (or not at
    /// all past it), and those unanswered then time out (and start down). Given 5 s whatever
    /// answered, a relay whose destinations all answered in 6-12 s failed most starts (review).
    async fn check_destinations(&self) -> Vec<Result<()>> {
        let queues = &self.inner.queues;
        let short = tokio::time::Instant::now() + self.check_timeout();
        let mut results: Vec<Option<Result<()>>> = queues.iter().map(|_| None).collect();
        let mut checks: FuturesUnordered<_> = queues
            .iter()
            .enumerate()
            .map(|(i, q)| async move { (i, self.check_queue(q).await) })
            .collect();
        loop {
            let answered = results.iter().any(|r| matches!(r, Some(Ok(()))));
            let next = if answered {
                match tokio::time::timeout_at(short, checks.next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                }
            } else {
                checks.next().await
            };
            let Some((i, result)) = next else {
                break;
            };
            results[i] = Some(result);
        }
        let waited = self.check_timeout();
        queues
            .iter()
            .zip(results)
            .map(|(q, r)| r.unwrap_or_else(|| Err(timeout_error(&check_what(q), waited))))
            .collect()
    }

    /// One destination's check; its answer's time is the destination's pace until its first
    /// call is answered (see `watch.rs`): a destination answering every request in 6 s had its
    /// first call given up as silent after 5 s, no answer having been heard yet, and its events
    /// sent again.
    async fn check_queue(&self, queue: &Queue) -> Result<()> {
        let started = Instant::now();
        let result = self.ask_queue(queue).await;
        if result.is_ok() {
            queue.down.paced_by(started.elapsed());
        }
        result
    }

    async fn ask_queue(&self, queue: &Queue) -> Result<()> {
        let timeout = self.inner.call_timeout;
        match queue.kind {
            DestinationKind::Topic => {
                let call = self
                    .inner
                    .sns
                    .get_topic_attributes()
                    .topic_arn(&queue.url)
                    .send();
                let what = check_what(queue);
                match tokio::time::timeout(timeout, call).await {
                    Ok(Ok(out)) => {
                        // A topic's own limit: anywhere from 1 KiB to 1 MiB (256 KiB when the
                        // attribute is absent, as on topics made before SNS had it).
                        queue.take_max_message_size(
                            out.attributes()
                                .and_then(|a| a.get("MaximumMessageSize"))
                                .map(String::as_str),
                        );
                        Ok(())
                    }
                    Ok(Err(e)) => Err(sdk_error(&what, e)),
                    Err(_) => Err(timeout_error(&what, timeout)),
                }
            }
            _ if self.inner.direct.is_some() => self.check_queue_direct(queue).await,
            _ => {
                let call = self
                    .inner
                    .client
                    .get_queue_attributes()
                    .queue_url(&queue.url)
                    .attribute_names(QueueAttributeName::QueueArn)
                    .attribute_names(QueueAttributeName::MaximumMessageSize)
                    .send();
                let what = check_what(queue);
                match tokio::time::timeout(timeout, call).await {
                    Ok(Ok(out)) => {
                        // A queue may take less than SQS's limit: larger messages are then
                        // offloaded, or refused without a call, instead of failing at SQS.
                        queue.take_max_message_size(
                            out.attributes()
                                .and_then(|a| a.get(&QueueAttributeName::MaximumMessageSize))
                                .map(String::as_str),
                        );
                        Ok(())
                    }
                    Ok(Err(e)) => Err(sdk_error(&what, e)),
                    Err(_) => Err(timeout_error(&what, timeout)),
                }
            }
        }
    }

    /// The queue's check through the direct transport, which publishing will use: its own HTTP
    /// client, TLS roots and signing (not the SDK's), so that a network path only the SDK's
    /// client has (a proxy, a private CA set on the `SdkConfig`) fails here, at start-up, instead
    /// of every publish later.
    async fn check_queue_direct(&self, queue: &Queue) -> Result<()> {
        let Some(direct) = &self.inner.direct else {
            return Ok(());
        };
        let timeout = self.inner.call_timeout;
        let what = check_what(queue);
        let call = direct.get_queue_attributes(&queue.url, &["QueueArn", "MaximumMessageSize"]);
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(attributes)) => {
                queue.take_max_message_size(
                    attributes.get("MaximumMessageSize").map(String::as_str),
                );
                Ok(())
            }
            Ok(Err(e)) => Err(direct_error(&what, e).1),
            Err(_) => Err(timeout_error(&what, timeout)),
        }
    }
}

/// The start-up check's error when no destination answered: every one named (black-box run:
/// with every destination black-holed, the error named only the first, as if the others were
/// fine).
fn nothing_answered(mut silent: Vec<crate::Error>) -> crate::Error {
    if silent.len() == 1 {
        return silent.remove(0);
    }
    let each: Vec<&str> = silent.iter().map(crate::Error::message).collect();
    crate::Error::new(
        silent
            .first()
            .map_or(ErrorKind::Timeout, crate::Error::kind),
        format!(
            "none of the {} queues and topics answered the start-up check: {}",
            each.len(),
            each.join("; ")
        ),
    )
}

/// What the start-up check of `queue` calls, for errors.
fn check_what(queue: &Queue) -> String {
    match queue.kind {
        DestinationKind::Topic => format!("GetTopicAttributes on topic `{}`", queue.url),
        _ => format!("GetQueueAttributes on queue `{}`", queue.url),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outbox_tests::LogCapture;

    fn still_silent(down: &Arc<DestinationDown>) -> StillSilent {
        StillSilent {
            down: Arc::downgrade(down),
            destination: "arn:aws:sns:us-east-1:000000000000:t".into(),
            service: "SNS",
        }
    }

    #[tokio::test]
    async fn a_destination_silent_since_start_up_is_an_error_one_that_answered_is_not() {
        let logs = LogCapture::default();
        let _guard = logs.install();
        let down = Arc::new(DestinationDown::for_test("t", DestinationKind::Topic));
        let started = Instant::now();
        still_silent(&down)
            .after(started, Duration::from_millis(20))
            .await;
        assert!(
            logs.text().contains("ERROR") && logs.text().contains("since start-up"),
            "{}",
            logs.text()
        );

        let logs = LogCapture::default();
        let _guard = logs.install();
        let started = Instant::now();
        down.up();
        still_silent(&down)
            .after(started, Duration::from_millis(20))
            .await;
        assert!(!logs.text().contains("ERROR"), "{}", logs.text());
    }
}
