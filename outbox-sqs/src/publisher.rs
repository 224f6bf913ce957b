//! [`SqsPublisher`]: the relay's [`Publisher`] on `aws-sdk-sqs` and `aws-sdk-sns`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::Client;
use outbox_core::limits::MessageLimits;
use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome, Publisher};
use tokio::sync::Semaphore;

use crate::batch::MAX_BATCH_BYTES;
use crate::breaker::Breaker;
pub use crate::builder::SqsPublisherBuilder;
use crate::call_pace::CallPace;
use crate::destination::DestinationKind;
use crate::destination_down::DestinationDown;
use crate::detached_call::{DetachedCalls, GoingOnCount, LastAnswer};
use crate::direct::DirectSqs;
use crate::error::{Error, ErrorKind, Result};
use crate::max_message::MaxMessage;
use crate::message::SQS_LIMITS;
use crate::metrics::SqsMetrics;
use crate::offload::Offloader;
use crate::routing::Router;
use crate::sns::SNS_LIMITS;

/// Publishes outbox events to Amazon SQS queues with `SendMessageBatch` and to Amazon SNS topics
/// with `PublishBatch`, optionally offloading large payloads to S3. See the [crate docs](crate) for
/// the message shape, routing, batching and error handling.
///
/// Cheap to clone (the clones share the client and the in-flight limit).
#[derive(Clone)]
pub struct SqsPublisher {
    pub(crate) inner: Arc<Inner>,
}

/// What the clones of a publisher share (built by [`SqsPublisherBuilder::build`]).
pub(crate) struct Inner {
    /// The SDK's SQS client: `GetQueueUrl`, the start-up check, and `SendMessageBatch` with
    /// [`SqsTransport::Sdk`](crate::SqsTransport::Sdk).
    pub(crate) client: Client,
    /// `SendMessageBatch` with [`SqsTransport::Direct`](crate::SqsTransport::Direct).
    pub(crate) direct: Option<DirectSqs>,
    pub(crate) sns: aws_sdk_sns::Client,
    /// Writes large payloads to S3, when configured.
    pub(crate) offload: Option<Arc<Offloader>>,
    /// What `emit` should accept (see [`Publisher::limits`]).
    pub(crate) limits: MessageLimits,
    pub(crate) router: Router<Arc<Queue>>,
    /// Every distinct queue and topic, in configuration order (the default last).
    pub(crate) queues: Vec<Arc<Queue>>,
    pub(crate) permits: Semaphore,
    pub(crate) max_in_flight: usize,
    pub(crate) call_timeout: Duration,
    /// See [`SqsConfig::call_wait`](crate::SqsConfig::call_wait).
    pub(crate) call_wait: Duration,
    /// The calls that went on without their publish (see `detached_call.rs`).
    pub(crate) detached_calls: Arc<DetachedCalls>,
    /// When a batch call last had an answer.
    pub(crate) last_answer: LastAnswer,
    pub(crate) metrics: SqsMetrics,
    /// See [`SqsConfig::batch_aggregates`](crate::SqsConfig::batch_aggregates).
    pub(crate) keeps_aggregate_order: bool,
}

/// A configured destination — an SQS queue or an SNS topic — and its circuit breaker.
#[derive(Debug)]
pub(crate) struct Queue {
    /// The queue's URL, or the topic's ARN.
    pub(crate) url: String,
    pub(crate) kind: DestinationKind,
    pub(crate) fifo: bool,
    pub(crate) breaker: Breaker,
    /// Whether it answers at all (see `destination_down.rs`).
    pub(crate) down: Arc<DestinationDown>,
    /// The largest message it takes (see `max_message.rs`; shared with `down`'s probe).
    max_message: Arc<MaxMessage>,
    /// How many chains of calls to it go on without their publish (see `detached_call.rs`).
    pub(crate) going_on: GoingOnCount,
    /// How long its batch calls take (see `call_pace.rs`).
    pub(crate) call_pace: CallPace,
    /// The in-flight slots its calls may hold, besides the publisher's (see
    /// [`destination_slots`](crate::detached_call::destination_slots)); given once every
    /// destination is known.
    pub(crate) slots: Semaphore,
}

impl Queue {
    /// `down`: its state, whose probe shares the destination's largest message (of the same
    /// `kind`).
    pub(crate) fn new(
        url: String,
        kind: DestinationKind,
        fifo: bool,
        breaker: Breaker,
        down: DestinationDown,
    ) -> Self {
        debug_assert_eq!(down.probe().kind(), kind, "the probe asks a {kind}");
        Queue {
            url,
            kind,
            fifo,
            breaker,
            max_message: Arc::clone(down.probe().max_message()),
            down: Arc::new(down),
            going_on: GoingOnCount::default(),
            call_pace: CallPace::default(),
            slots: Semaphore::new(0),
        }
    }

    /// A standard SNS topic `t` that no call reaches (its probe's endpoint refuses), with the
    /// service's limits until told otherwise: for unit tests of what its answers make of events.
    #[cfg(test)]
    pub(crate) fn topic_for_test() -> Self {
        Queue::new(
            "arn:aws:sns:us-east-1:000000000000:t".into(),
            DestinationKind::Topic,
            false,
            Breaker::new(
                "t".into(),
                Duration::from_secs(5),
                Duration::from_secs(3600),
                Default::default(),
            ),
            DestinationDown::for_test("t", DestinationKind::Topic),
        )
    }

    /// Takes a `MaximumMessageSize` attribute as the destination answered it (see
    /// [`MaxMessage::take`]).
    pub(crate) fn take_max_message_size(&self, attribute: Option<&str>) {
        self.max_message.take(attribute);
    }

    /// Whether its own limit, lower than its service's, is to be read again for a message of
    /// `size` bytes over it (see [`MaxMessage::read_again_for`]).
    pub(crate) fn read_limit_again_for(&self, size: usize) -> bool {
        self.max_message.read_again_for(size)
    }

    /// The limit its refusal of a message of `size` bytes as too long names, when the message is
    /// over it: the destination's `MaximumMessageSize` was lowered since it was read, and the
    /// named limit is taken as its own now (see [`MaxMessage::lowered_to`]; logged once). `None`
    /// for a message within the named limit (the service counts differently: sending it again
    /// would not help), so an event is put back this way at most once per lowering.
    pub(crate) fn limit_lowered_by(&self, refusal: &str, size: usize) -> Option<usize> {
        let named = crate::max_message::limit_named_in(refusal)?;
        if size <= named {
            return None;
        }
        if self.max_message.lowered_to(named) {
            tracing::info!(destination = %self.url, kind = %self.kind, limit = self.max_message.bytes(),
                "{} refused a message as longer than the destination's limit, lower than when it \
                 was read: taking that limit", self.service());
        }
        let limit = self.max_message.bytes();
        (size > limit).then_some(limit)
    }

    /// Has its limit read again, in a task of its own, after a refusal of a message as too long
    /// that names no limit (at most every few seconds: [`MaxMessage::read_again_now`]), so that
    /// the refused event's next attempt is held to it (offloaded, or refused without a call).
    pub(crate) fn read_limit_again_soon(&self) {
        if !self.max_message.read_again_now() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let down = Arc::clone(&self.down);
        runtime.spawn(async move {
            down.probe().works(crate::watch::SILENT_AFTER).await;
        });
    }

    /// Whether its limit is below the most it could be set to take (see [`MaxMessage::lowered`]).
    pub(crate) fn limit_lowered(&self) -> bool {
        self.max_message.lowered()
    }

    /// Whether its message limit is its own (its `MaximumMessageSize`), not its service's default.
    pub(crate) fn limit_is_own(&self) -> bool {
        self.max_message.is_own()
    }

    /// What the destination accepts in one message.
    pub(crate) fn limits(&self) -> MessageLimits {
        let bytes = self.max_message.bytes();
        match self.kind {
            DestinationKind::Topic => SNS_LIMITS.with_max_message_bytes(bytes),
            _ => SQS_LIMITS.with_max_message_bytes(bytes),
        }
    }

    /// The most bytes of messages in one batch call: for a queue, SQS's batch limit, and no more
    /// than the queue's own message limit if it is lower; for a topic, its message limit
    /// ([`SNS_MAX_BATCH_BYTES`](crate::SNS_MAX_BATCH_BYTES) by default).
    pub(crate) fn max_batch_bytes(&self) -> usize {
        let bytes = self.max_message.bytes();
        match self.kind {
            DestinationKind::Topic => bytes,
            _ => MAX_BATCH_BYTES.min(bytes),
        }
    }

    /// `SQS` or `SNS`.
    pub(crate) fn service(&self) -> &'static str {
        match self.kind {
            DestinationKind::Topic => "SNS",
            _ => "SQS",
        }
    }

    /// `SendMessageBatch` or `PublishBatch`.
    pub(crate) fn operation(&self) -> &'static str {
        match self.kind {
            DestinationKind::Topic => "PublishBatch",
            _ => "SendMessageBatch",
        }
    }
}

impl fmt::Debug for SqsPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqsPublisher")
            .field("queues", &self.queue_urls())
            .field("max_in_flight", &self.inner.max_in_flight)
            .field("call_timeout", &self.inner.call_timeout)
            .finish_non_exhaustive()
    }
}

impl SqsPublisher {
    /// A builder with the [default settings](crate::SqsConfig::default).
    pub fn builder() -> SqsPublisherBuilder {
        SqsPublisherBuilder::default()
    }

    /// The URLs of every configured queue and the ARNs of every configured topic (routes first,
    /// the default last).
    pub fn queue_urls(&self) -> Vec<&str> {
        self.inner.queues.iter().map(|q| q.url.as_str()).collect()
    }

    /// The publisher's metrics in the Prometheus text format (OpenMetrics, ending in `# EOF`):
    /// `outbox_sqs_queue_unavailable{queue}`, `outbox_sns_topic_unavailable{topic}` and
    /// `outbox_s3_bucket_unavailable{bucket}`, 1 while the queue's, topic's or offload bucket's
    /// circuit breaker is open, else 0; `outbox_sqs_queue_down{queue}`,
    /// `outbox_sns_topic_down{topic}` and `outbox_s3_down{bucket}`, 1 while it does not answer.
    pub fn encode_metrics(&self) -> String {
        self.inner.metrics.encode()
    }

    /// The SQS client the publisher uses.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The SNS client the publisher uses.
    pub fn sns_client(&self) -> &aws_sdk_sns::Client {
        &self.inner.sns
    }
}

impl SqsPublisher {
    async fn publish_events(
        &self,
        events: &[ClaimedEvent],
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Vec<PublishOutcome>> {
        let mut outcomes: Vec<Option<PublishOutcome>> = vec![None; events.len()];

        // In `seq` order; the events of destinations that are down put back first (see `send.rs`).
        let mut order: Vec<usize> = (0..events.len()).collect();
        order.sort_by_key(|&i| events[i].seq);
        // What the calls that went on without their publishes did (see `detached_call.rs`); kept
        // for the events' next claim again when this publish fails as a whole (its outcomes are
        // not applied: a result taken and dropped had a published event sent again).
        let taken = self.take_detached_calls(events, &mut order, &mut outcomes);
        let published = self.publish_rest(events, order, outcomes, deadline).await;
        if published.is_err() {
            self.inner.detached_calls.restore(taken);
        }
        published
    }

    /// Sends the events at `order` (in `seq` order) and fills in `outcomes`; fails as a whole
    /// when every call did (see below).
    async fn publish_rest(
        &self,
        events: &[ClaimedEvent],
        mut order: Vec<usize>,
        mut outcomes: Vec<Option<PublishOutcome>>,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Vec<PublishOutcome>> {
        if self.inner.queues.iter().any(|q| q.down.is_down()) {
            self.put_back_the_down(events, &mut order, &mut outcomes)?;
        }
        let total = self.send_events(events, order, deadline).await;

        // SQS down as a whole (every call failed transiently, bar those to unavailable queues): the
        // relay backs off without counting an attempt. Calls failed only by unavailable queues get
        // their `Unavailable` outcomes instead, so the healthy queues' events keep flowing.
        if total.transient_failures > 0
            && total.transient_failures + total.unavailable_failures == total.calls
        {
            let first = total
                .first_failure
                .unwrap_or_else(|| Error::new(ErrorKind::Service, "every batch call failed"));
            let n = total.calls;
            // The caller logs the error (the relay: once per outage).
            tracing::debug!(calls = n, error = %first, "every SQS/SNS call of this publish failed");
            return Err(first.context(format!(
                "all {n} SendMessageBatch call(s) (PublishBatch for topics) of this publish failed; the first"
            )));
        }
        for (i, outcome) in total.outcomes {
            outcomes[i] = Some(outcome);
        }
        Ok(outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    PublishOutcome::retry(
                        FailureKind::Other,
                        "the SQS publisher lost track of this event",
                    )
                })
            })
            .collect())
    }
}

impl Publisher for SqsPublisher {
    type Error = Error;

    fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Error>> + Send {
        self.publish_events(events, None)
    }

    fn publish_within(
        &self,
        events: &[ClaimedEvent],
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Error>> + Send {
        self.publish_events(events, Some(deadline))
    }

    /// One call timeout per round of batch calls (10 entries each, `max_in_flight` at a time),
    /// and one more for the S3 uploads before them when offload is on (the uploads must leave the
    /// messages' calls their time): [`SqsConfig::min_publish_timeout`](crate::SqsConfig::min_publish_timeout).
    fn min_publish_timeout(&self, events: usize) -> Duration {
        crate::config::time_needed(
            self.inner.call_timeout,
            self.inner.max_in_flight,
            self.inner.offload.is_some(),
            events,
        )
    }

    fn check(&self) -> impl Future<Output = Result<(), Error>> + Send {
        self.check_queues()
    }

    /// Without offload: [`SQS_LIMITS`](crate::SQS_LIMITS), or [`SNS_LIMITS`] when a route goes
    /// to a topic (the smaller limit of the configured destinations); once
    /// [`check`](Publisher::check) has read the destinations' own `MaximumMessageSize`, the
    /// smallest of those (a topic's may be raised to 1 MiB): make the
    /// [`Emitter`](outbox_core::Emitter) after the check. With offload: up to
    /// [`OFFLOAD_MAX_MESSAGE_BYTES`](crate::OFFLOAD_MAX_MESSAGE_BYTES).
    fn limits(&self) -> MessageLimits {
        let limits = self.inner.limits;
        if self.inner.offload.is_some() {
            return limits;
        }
        let queues = &self.inner.queues;
        let Some(smallest) = queues.iter().min_by_key(|q| q.limits().max_message_bytes()) else {
            return limits;
        };
        let lowered = limits.with_max_message_bytes(smallest.limits().max_message_bytes());
        if !smallest.limit_is_own() {
            return lowered;
        }
        // The destination's own setting, which its owner may raise: said so, as the relay says
        // it (an emit refused by a queue's lowered limit said "SQS accepts at most …": black-box
        // run).
        lowered.with_limit_holder(match (queues.len(), smallest.kind) {
            (1, DestinationKind::Topic) => "the topic's MaximumMessageSize",
            (1, _) => "the queue's MaximumMessageSize",
            _ => "the smallest MaximumMessageSize of the publisher's queues and topics",
        })
    }

    /// With [`SqsConfig::batch_aggregates`](crate::SqsConfig::batch_aggregates) on and a single
    /// FIFO destination.
    fn keeps_aggregate_order(&self) -> bool {
        self.inner.keeps_aggregate_order
    }

    /// Waits for the batch calls that went on after their publish (see
    /// [`SqsConfig::call_wait`](crate::SqsConfig::call_wait)); the events they got accepted.
    fn settle(&self, within: Duration) -> impl Future<Output = Vec<uuid::Uuid>> + Send {
        self.settle_calls(within)
    }

    /// `None` while any destination may take a call; while every one's calls hold all the
    /// slots they may with calls that went on after their publish (a destination answering
    /// slowly), waits at most the call wait for a slot, then the events the free slots' calls
    /// carry (10 each), or `Some(0)`.
    fn room(&self) -> impl Future<Output = Option<usize>> + Send {
        self.room_for_events()
    }

    /// The events the batch calls that went on after their publish got accepted since last
    /// asked.
    fn settled(&self) -> Vec<uuid::Uuid> {
        self.settled_calls()
    }

    /// Resolves once a queue or topic that was down answers again (see `destination_down.rs`).
    fn recovered(&self) -> impl Future<Output = ()> + Send {
        self.destination_recovered()
    }
}

/// The `MessageGroupId` of an event on a FIFO destination.
pub(crate) fn group_of(event: &ClaimedEvent) -> String {
    crate::message::message_group_id(&event.aggregate_type, &event.aggregate_id)
}
