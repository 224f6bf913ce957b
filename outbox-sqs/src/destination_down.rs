//! A queue or topic down (see `down.rs`): a call to it, and the small calls sent while it ran,
//! went unanswered until it had been silent for 5 s, the call included (`watch.rs`, for
//! `call.rs`), or a call timed out and a small call right after was not answered either. While it is down its events are put
//! back at once, uncounted, without a call, and the other destinations' events go on; a task of
//! its own asks it once per probe interval (`GetQueueAttributes`, `GetTopicAttributes`: what the
//! start-up check already calls, so no new permission) and ends the state when it answers.
//!
//! Why: one destination that stopped answering held every batch with one of its events for its
//! call's time-out, and through per-aggregate order the heads of the other destinations'
//! aggregates too: events of healthy queues arrived 30–45 s late while one topic was
//! black-holed or slow, and the silent destination's events were charged an attempt per claim
//! (black-box run).

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::SdkError;
use aws_sdk_sqs::types::QueueAttributeName;

use crate::destination::DestinationKind;
use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome};

use prometheus_client::metrics::gauge::Gauge;

use crate::down::{Down, Gate, Probe};
use crate::error::{Error, ErrorKind, Result};
use crate::max_message::MaxMessage;
use crate::publisher::SqsPublisher;

/// A call time-out below this is not watched: it ends the call soon enough. (From this one up to
/// three times the watch's first look, 1 s, the watch looks at a third of it: `call.rs`.)
pub(crate) const WATCH_MIN_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether a queue or topic is down.
pub(crate) type DestinationDown = Down<DestinationProbe>;

/// Asks a queue (`GetQueueAttributes` of its `QueueArn`) or a topic (`GetTopicAttributes`).
#[derive(Debug)]
pub(crate) struct DestinationProbe {
    sqs: aws_sdk_sqs::Client,
    sns: aws_sdk_sns::Client,
    url: String,
    kind: DestinationKind,
    /// Its largest message, read from each answer with its attributes.
    max_message: Arc<MaxMessage>,
}

impl DestinationDown {
    /// The state of the queue or topic at `url`, probed every `probe_interval`, each probe given
    /// at most `probe_timeout`; `gauge` is 1 while it is down.
    pub(crate) fn for_destination(
        sqs: aws_sdk_sqs::Client,
        sns: aws_sdk_sns::Client,
        url: &str,
        kind: DestinationKind,
        (probe_interval, probe_timeout): (Duration, Duration),
        gauge: Gauge,
    ) -> Self {
        // One request per probe: the SDK's retries made each probe of a destination answering
        // 5xx three requests (black-box run), and a probe is itself asked again.
        let sqs = aws_sdk_sqs::Client::from_conf(
            sqs.config()
                .to_builder()
                .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled())
                .build(),
        );
        let sns = aws_sdk_sns::Client::from_conf(
            sns.config()
                .to_builder()
                .retry_config(aws_sdk_sns::config::retry::RetryConfig::disabled())
                .build(),
        );
        let probe = DestinationProbe {
            sqs,
            sns,
            url: url.to_owned(),
            kind,
            max_message: Arc::new(MaxMessage::new(kind)),
        };
        Down::new(probe, probe_interval, probe_timeout, gauge)
    }
}

/// How often a worker backing off after every destination was found down looks whether one
/// answers again (see [`SqsPublisher::destination_recovered`]).
const RECOVERED_LOOK: Duration = Duration::from_millis(100);

impl SqsPublisher {
    /// [`Publisher::recovered`](outbox_core::Publisher::recovered): resolves once a queue or
    /// topic found down answers again after this was called (looked at every
    /// [`RECOVERED_LOOK`], while the relay's worker waits for it).
    pub(crate) fn destination_recovered(&self) -> impl Future<Output = ()> + Send + '_ {
        let since = Instant::now();
        async move {
            loop {
                tokio::time::sleep(RECOVERED_LOOK).await;
                if self
                    .inner
                    .queues
                    .iter()
                    .any(|q| q.down.recovered_since(since))
                {
                    return;
                }
            }
        }
    }

    /// Puts back, before anything is done for them, the events at `order` whose destination is
    /// down: their payloads were offloaded to S3 again at every claim while it was down, and its
    /// message limit, read by the probe that finds it back, could change between the offload and
    /// the call (review). With every destination down, the publish fails as a whole, as its calls
    /// would: the relay's outage back-off, no row written per event.
    pub(crate) fn put_back_the_down(
        &self,
        events: &[ClaimedEvent],
        order: &mut Vec<usize>,
        outcomes: &mut [Option<PublishOutcome>],
    ) -> Result<()> {
        // (A publish of events with no route alone settles them, as it did: review.)
        let any_routed = || {
            order
                .iter()
                .any(|&i| self.inner.router.route(&events[i].event_type).is_some())
        };
        if self.inner.queues.iter().all(|q| q.down.is_down()) && any_routed() {
            let failure = self.inner.queues.iter().find_map(|q| match q.down.gate() {
                Gate::Wait(failure) => Some(failure),
                Gate::Go => None,
            });
            if let Some(failure) = failure {
                let kind = match failure.kind() {
                    FailureKind::Timeout => ErrorKind::Timeout,
                    FailureKind::Unreachable => ErrorKind::Unavailable,
                    _ => ErrorKind::Service,
                };
                return Err(Error::new(
                    kind,
                    format!("every queue and topic is down: {}", failure.message()),
                ));
            }
        }
        order.retain(|&i| {
            let Some(queue) = self.inner.router.route(&events[i].event_type) else {
                return true;
            };
            match queue.down.gate() {
                Gate::Go => true,
                Gate::Wait(failure) => {
                    outcomes[i] = Some(PublishOutcome::Unavailable(failure));
                    false
                }
            }
        });
        Ok(())
    }
}

#[cfg(test)]
impl DestinationDown {
    /// A state for a destination of `kind` at `url` whose probe goes nowhere (no endpoint
    /// answers).
    pub(crate) fn for_test(url: &str, kind: DestinationKind) -> Self {
        let creds = aws_sdk_sqs::config::Credentials::new("test", "test", None, None, "test");
        let sqs = aws_sdk_sqs::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .credentials_provider(creds.clone())
            .build();
        let sns = aws_sdk_sns::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_sns::config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .credentials_provider(creds)
            .build();
        Self::for_destination(
            aws_sdk_sqs::Client::from_conf(sqs),
            aws_sdk_sns::Client::from_conf(sns),
            url,
            kind,
            (Duration::from_secs(3600), Duration::from_millis(100)),
            Gauge::default(),
        )
    }
}

/// What the probe's call got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heard {
    /// The destination's attributes: it works.
    Works,
    /// A refusal (missing, access denied): an answer all the same.
    Refused,
    /// No answer in time, unreachable, or a 5xx.
    Nothing,
}

/// What a call's result says; `attributes` of an answer go to `max_message`.
fn heard<T, E>(
    result: Result<Result<T, SdkError<E, HttpResponse>>, tokio::time::error::Elapsed>,
    max_message: &MaxMessage,
    attribute: impl FnOnce(&T) -> Option<&str>,
) -> Heard {
    match result {
        Ok(Ok(out)) => {
            max_message.take(attribute(&out));
            Heard::Works
        }
        Ok(Err(SdkError::ServiceError(ctx))) if !ctx.raw().status().is_server_error() => {
            Heard::Refused
        }
        Ok(Err(_)) | Err(_) => Heard::Nothing,
    }
}

impl DestinationProbe {
    /// What the probe asks: a queue or a topic.
    pub(crate) fn kind(&self) -> DestinationKind {
        self.kind
    }

    /// The destination's largest message, which each answer of the probe updates.
    pub(crate) fn max_message(&self) -> &Arc<MaxMessage> {
        &self.max_message
    }

    /// Asks the destination, within `timeout`; an answer's `MaximumMessageSize` is taken.
    async fn ask(&self, timeout: Duration) -> Heard {
        match self.kind {
            DestinationKind::Topic => {
                let call = self.sns.get_topic_attributes().topic_arn(&self.url).send();
                heard(
                    tokio::time::timeout(timeout, call).await,
                    &self.max_message,
                    |out| {
                        out.attributes()
                            .and_then(|a| a.get("MaximumMessageSize"))
                            .map(String::as_str)
                    },
                )
            }
            _ => {
                let call = self
                    .sqs
                    .get_queue_attributes()
                    .queue_url(&self.url)
                    .attribute_names(QueueAttributeName::QueueArn)
                    .attribute_names(QueueAttributeName::MaximumMessageSize)
                    .send();
                heard(
                    tokio::time::timeout(timeout, call).await,
                    &self.max_message,
                    |out| {
                        out.attributes()
                            .and_then(|a| a.get(&QueueAttributeName::MaximumMessageSize))
                            .map(String::as_str)
                    },
                )
            }
        }
    }

    /// Whether the destination works: it answers the probe's call within `timeout` without a
    /// refusal (it exists, and the relay may use it).
    pub(crate) async fn works(&self, timeout: Duration) -> bool {
        self.ask(timeout).await == Heard::Works
    }
}

impl Probe for DestinationProbe {
    /// A refusal (the queue missing, access denied) is an answer: the breaker's to handle.
    async fn answered(&self, timeout: Duration) -> bool {
        self.ask(timeout).await != Heard::Nothing
    }

    fn waiting(&self, error: &str) -> String {
        format!(
            "not sent now: {} `{}` does not answer: {error}",
            self.kind, self.url
        )
    }

    fn log_down(&self, error: &str, every: Duration) {
        tracing::warn!(destination = %self.url, kind = %self.kind, error,
            probe_every_ms = every.as_millis() as u64,
            "destination does not answer: its events are put back without a call, uncounted, and \
             a small call once per probe interval finds it back; the other destinations go on");
    }

    fn log_up(&self) {
        tracing::info!(destination = %self.url, kind = %self.kind,
            "destination answers again: its events are sent");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outbox_sqs_fixture::{CallFault, SqsFixture};

    /// A probe is one request, whatever the client's retries: each probe of a destination
    /// answering 5xx was three (black-box run).
    #[tokio::test]
    async fn a_probe_is_one_request() {
        let fx = SqsFixture::start().await;
        let url = fx.create_queue("q");
        let creds = aws_sdk_sqs::config::Credentials::new("test", "test", None, None, "test");
        let sqs = aws_sdk_sqs::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .endpoint_url(fx.endpoint_url())
            .credentials_provider(creds.clone())
            .retry_config(aws_sdk_sqs::config::retry::RetryConfig::standard().with_max_attempts(3))
            .build();
        let sns = aws_sdk_sns::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_sns::config::Region::new("us-east-1"))
            .endpoint_url(fx.endpoint_url())
            .credentials_provider(creds)
            .build();
        let down = DestinationDown::for_destination(
            aws_sdk_sqs::Client::from_conf(sqs),
            aws_sdk_sns::Client::from_conf(sns),
            &url,
            DestinationKind::Queue,
            (Duration::from_secs(3600), Duration::from_secs(10)),
            Gauge::default(),
        );
        fx.fail_action_for(
            "GetQueueAttributes",
            Duration::from_secs(60),
            CallFault::ServiceUnavailable,
        );
        assert!(!down.probe().answered(Duration::from_secs(10)).await);
        assert_eq!(fx.calls_to("GetQueueAttributes"), 1);
    }
}
