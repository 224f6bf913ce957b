//! The typed consumer: receives the relay's messages from SQS, decodes each into your event type
//! ([`DecodeEvent`]), and applies it exactly once to your database with a [`Handler`] running in a
//! transaction that also records the event in the inbox ([`outbox_core::process_once`]).
//!
//! ```no_run
//! use deadpool_postgres::Transaction;
//! use outbox_core::CancellationToken;
//! use outbox_sqs::consumer::{Consumer, Envelope, Handler, HandlerError};
//!
//! #[derive(serde::Serialize, serde::Deserialize, outbox_core::OutboxEvent)]
//! #[outbox(aggregate = "order")]
//! #[serde(tag = "kind")]
//! enum OrderEvent {
//!     #[outbox(event_type = "order.placed")]
//!     Placed { #[outbox(aggregate_id)] order_id: i64, total_cents: i64 },
//!     #[outbox(event_type = "order.shipped")]
//!     Shipped { #[outbox(aggregate_id)] order_id: i64 },
//! }
//!
//! struct Billing;
//!
//! impl Handler<OrderEvent> for Billing {
//!     async fn handle(&self, event: OrderEvent, _: &Envelope, tx: &Transaction<'_>)
//!         -> Result<(), HandlerError> {
//!         if let OrderEvent::Placed { order_id, total_cents } = event {
//!             tx.execute("INSERT INTO invoices (order_id, cents) VALUES ($1, $2)",
//!                 &[&order_id, &total_cents]).await?;
//!         }
//!         Ok(())
//!     }
//! }
//!
//! # async fn run(pool: deadpool_postgres::Pool) -> Result<(), outbox_sqs::Error> {
//! let consumer = Consumer::builder(pool, "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo")
//!     .name("billing")
//!     .concurrency(8)
//!     .build()
//!     .await?;
//! let shutdown = CancellationToken::new();
//! consumer.run(shutdown, Billing).await?; // until `shutdown.cancel()`
//! # Ok(()) }
//! ```
//!
//! # What happens to a message
//!
//! The consumer long-polls `ReceiveMessage` (up to [`max_messages`](ConsumerConfig::max_messages)
//! = 10 at a time, waiting up to [`wait`](ConsumerConfig::wait) = 20 s;
//! [`receivers`](ConsumerConfig::receivers) = 2 such calls may wait at once) and runs up to
//! [`concurrency`](ConsumerConfig::concurrency) handlers at once. It holds at most `concurrency +
//! max_messages` received messages that are not done — a receive waits for room for a whole batch
//! — so a few messages may wait for a free handler, kept hidden by the heartbeat below. For each
//! message:
//!
//! 1. The [`Envelope`] is read from the message attributes and the body decoded with
//!    `T::decode(event_type, body)`. A message that cannot be read is *bad input* (below).
//! 2. A transaction is opened on your pool and the event id recorded in the inbox under the
//!    consumer's name. A **duplicate** (recorded by an earlier delivery) is rolled back, counted,
//!    and its message deleted: the handler is not called.
//! 3. The handler runs with the event, the envelope and the transaction, inside a `tracing` span
//!    `outbox.consume` carrying the event id, type, aggregate, receive count and the producer's
//!    `traceparent`; events the handler emits carry that `traceparent` too
//!    ([`outbox_core::trace::with_traceparent`]), so the trace continues downstream. With this
//!    crate's `opentelemetry` feature, the handler also runs with the producer's span as the
//!    remote parent of the current OpenTelemetry context: spans its tracer starts there join the
//!    producer's trace.
//! 4. `Ok`: the transaction commits — effects and inbox row together — and the message is deleted
//!    (batched `DeleteMessageBatch`, 10 per call). A crash between commit and delete only means
//!    a redelivery that the inbox skips.
//! 5. `Err` (from the handler or the database): rolled back, and the message hidden for
//!    `retry_initial × 2^(receive count − 1)` (1 s, 2 s, 4 s, … up to `retry_max` = 5 min) with
//!    `ChangeMessageVisibility`, then delivered again.
//!
//! While a message waits for a handler or its handler runs, its visibility is extended every third
//! of [`visibility_timeout`](ConsumerConfig::visibility_timeout) (heartbeat), so a slow handler is
//! not raced by a second delivery.
//!
//! # A message that keeps failing
//!
//! The consumer retries with back-off and leaves the final decision to **the queue's redrive
//! policy**: give the queue a dead-letter queue with a `maxReceiveCount`, and SQS moves a message
//! received that many times there. The consumer does not move messages itself, because SQS's move
//! is atomic (no moment where the message is in both queues or in neither), keeps the message
//! intact with its attributes, counts receives the consumer cannot miscount across restarts, and
//! works the same for every consumer of the queue; SQS's own redrive (`StartMessageMoveTask`)
//! brings the messages back once fixed. [`ConsumerBuilder::build`] logs a warning when the queue
//! has no redrive policy. Without one, a failing message is retried forever — at most once per
//! `retry_max`, never in a hot loop.
//!
//! A handler that panics is a failed handler (caught, counted as `reason="handler"`). Each SQS
//! call is given up after [`call_timeout`](ConsumerConfig::call_timeout) (10 s; a receive its
//! long-poll wait more).
//!
//! # Offloaded payloads
//!
//! A message whose payload the publisher offloaded to S3 (attribute `ExtendedPayloadSize`, or the
//! legacy `SQSLargePayloadSize`, and a pointer body in the Extended Client format) is decoded from
//! the S3 object it points to, read with `GetObject` through the same AWS configuration (within
//! the call time-out and a second per MiB begun). S3 failing, slow or missing the object is a failed
//! delivery (`reason="offload"`, retried on the back-off); a pointer it does not read is bad
//! input ([`BadInput::BadPointer`]). A message whose event the inbox already holds is acknowledged as a duplicate without
//! reading its object (which may be large, or expired). The object is not deleted (with SNS
//! fan-out, other queues point to it too): expire the
//! [`OFFLOAD_KEY_PREFIX`](crate::OFFLOAD_KEY_PREFIX) with an S3 lifecycle rule. The consumer's
//! role needs `s3:GetObject` on it.
//!
//! # Database and S3 outages
//!
//! Each delivery counts towards the queue's `maxReceiveCount`, so an outage must not make the
//! consumer receive and fail messages over and over. After a database failure the receivers stop
//! asking SQS for messages and the units wait before their next message (their heartbeat keeps it
//! hidden) until a probe (`SELECT 1`, every 250 ms to 5 s) answers: a message in hand when the
//! database went away fails once; the rest wait untouched. After S3 fails to give an object (no
//! connection, no answer in time, a server error; not a missing object or a refusal), units wait
//! the same way before reading the next offloaded payload, until a `HeadBucket` on its bucket is
//! answered (a refusal is an answer too: no `s3:ListBucket` needed). A waiting message holds its
//! receive slot but no handler permit: messages that carry their payload go on, until waiting
//! messages fill every slot (`concurrency + max_messages`); then receiving waits for S3 too. A
//! message that waited for a handler permit while the database failed waits for the database
//! again, without the permit. Shutdown ends every wait at once. No database step of a delivery
//! waits for ever: BEGIN is given the call time-out (at least 10 s), the transaction check and
//! COMMIT too, not cut at shutdown; a connection from the pool and the inbox record (which waits
//! for a concurrent delivery of the same event) the handler time-out more. BEGIN, the pool and the
//! inbox record are given up at shutdown (nothing is committed yet). A database that stops
//! answering without closing the connection (a partition) fails the delivery as a database
//! failure and its connection is closed. The handler's own statements are bounded by the handler
//! time-out only.
//!
//! # Bad input
//!
//! A message without a valid `event_id`, with an event type `T` does not accept
//! ([`DecodeEvent::accepts`]), whose body does not decode, or whose S3 pointer this consumer does
//! not read ([`BadInput::BadPointer`]) is counted
//! (`outbox_consumer_failures_total{reason="missing_event_id" | "unknown_event_type" |
//! "undecodable" | "bad_pointer"}`) and logged at `warn` with the message id, event id and type — never the body.
//! Then, by [`BadInputPolicy`]: by default ([`Release`](BadInputPolicy::Release)) it is hidden
//! for [`bad_input_delay`](ConsumerConfig::bad_input_delay) (10 min) and so reaches the
//! dead-letter queue after `maxReceiveCount` receives, where it waits for a consumer that can read
//! it — an event is never silently lost because this consumer is older than its producer;
//! [`Delete`](BadInputPolicy::Delete) deletes it at once. Neither is a hot loop. An event the
//! inbox already holds is a duplicate whatever its type: processed before its type was renamed or
//! dropped, and delivered again, it is deleted like any duplicate.
//!
//! # FIFO queues
//!
//! SQS hands out a message group's messages in order and no more of a group while some are in
//! flight. The consumer keeps that order: the messages of one group within a receive batch are
//! handled one after the other on one handler. When one of them fails (or is released bad input),
//! the group's later messages of the batch are not handled: they are made visible again at once
//! ([`Outcome::Released`]) and SQS hands them out again only after the failed message — so a
//! group never overtakes its failed message. Different groups run concurrently.
//!
//! A released message was received, so its next delivery counts towards the queue's
//! `maxReceiveCount` although no handler saw it: the followers of a message that keeps failing
//! climb with it, and so do messages released at shutdown. Give a FIFO queue's redrive policy a
//! `maxReceiveCount` with room for that (the failing message's own retries plus a few), or its
//! followers reach the dead-letter queue together with it.
//!
//! An unreadable message holds its group the same way: with [`BadInputPolicy::Release`] it is
//! hidden for [`bad_input_delay`](ConsumerConfig::bad_input_delay) (10 min) on each receive, so
//! the group waits `bad_input_delay × maxReceiveCount` (50 min with a `maxReceiveCount` of 5;
//! black-box run: 5 h with 30) before the redrive policy moves it aside — order kept, and time
//! for a consumer that reads it (a newer event type) to be deployed. Where a group must not wait
//! that long, give FIFO consumers a short `bad_input_delay` (seconds) or
//! [`BadInputPolicy::Delete`].
//!
//! # Shutdown
//!
//! [`Consumer::run`] returns once its token is cancelled: it stops receiving, lets running
//! handlers finish (a FIFO unit stops after its current message and releases the rest), and sends
//! the pending deletes. A long poll in flight may finish for up to a second, and what it got is
//! handed back at once, unhandled (its receive counted): under traffic a poll answers at once,
//! and one cut short instead still takes messages at SQS — which keeps a poll open until its
//! wait ends — hidden for a whole visibility time-out, for an answer nobody reads. A poll still
//! waiting after that second (an idle queue) is cut short. Messages released unhandled (those
//! still waiting for a handler, the database or S3, and those handed back) become visible once the
//! polls are over: at once when every poll finished, else when the polls cut short end at SQS —
//! `wait` and a second after the stop at most.
//!
//! # Metrics
//!
//! [`Consumer::metrics`] reads the counters; [`Consumer::encode_metrics`] exports them in the
//! Prometheus text format (see [`ConsumerMetrics`] for the names).

mod builder;
mod config;
mod delete;
mod envelope;
mod gate;
mod handler;
mod metrics;
mod notification;
mod payload;
mod polls;
mod process;
mod receive;
mod shared;
mod transaction;
mod unit;
mod visibility;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_sqs::Client;
use deadpool_postgres::Pool;
use outbox_core::{CancellationToken, DecodeEvent};

pub use builder::ConsumerBuilder;
pub use config::{
    BadInputPolicy, ConsumerConfig, DEFAULT_BAD_INPUT_DELAY, DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONCURRENCY, DEFAULT_HANDLER_TIMEOUT, DEFAULT_MAX_MESSAGES, DEFAULT_RECEIVERS,
    DEFAULT_RETRY_INITIAL, DEFAULT_RETRY_MAX, DEFAULT_VISIBILITY_TIMEOUT, DEFAULT_WAIT,
    ENV_CONSUMER_BAD_INPUT_DELAY_SECS, ENV_CONSUMER_CALL_TIMEOUT_MS, ENV_CONSUMER_CONCURRENCY,
    ENV_CONSUMER_HANDLER_TIMEOUT_SECS, ENV_CONSUMER_MAX_MESSAGES, ENV_CONSUMER_OFFLOAD_BUCKETS,
    ENV_CONSUMER_PREFIX, ENV_CONSUMER_RECEIVERS, ENV_CONSUMER_RETRY_INITIAL_MS,
    ENV_CONSUMER_RETRY_MAX_SECS, ENV_CONSUMER_VISIBILITY_TIMEOUT_SECS, ENV_CONSUMER_WAIT_SECS,
    MAX_CONCURRENCY, MAX_VISIBILITY_TIMEOUT,
};
pub use envelope::{BadInput, Envelope};
pub use handler::{Delivery, Handler, HandlerError, Outcome};
pub use metrics::{ConsumerMetrics, FAILURE_REASONS};

use crate::error::Result;
use handler::Observer;
use shared::Shared;

/// A typed SQS consumer of one queue; see the [module docs](self).
#[derive(Clone)]
pub struct Consumer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("queue_url", &self.inner.queue_url)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// What every run of a consumer shares.
pub(crate) struct Inner {
    client: Client,
    /// Reads offloaded payloads.
    s3: aws_sdk_s3::Client,
    queue_url: String,
    pool: Pool,
    config: ConsumerConfig,
    metrics: ConsumerMetrics,
    observer: Option<Observer>,
    skip_delete_every: u64,
    handled_count: AtomicU64,
}

impl Inner {
    /// Where visibility changes go, and their time limit.
    pub(crate) fn sqs(&self) -> visibility::Sqs<'_> {
        visibility::Sqs {
            client: &self.client,
            queue_url: &self.queue_url,
            metrics: &self.metrics,
            call_timeout: self.config.call_timeout,
        }
    }

    /// Fault injection: whether this handled message is to be left in the queue.
    fn skip_this_delete(&self) -> bool {
        let n = self.skip_delete_every;
        n > 0 && self.handled_count.fetch_add(1, Ordering::Relaxed) % n == n - 1
    }
}

impl Consumer {
    /// A builder for a consumer of `queue` (a URL, or a queue name resolved with `GetQueueUrl`)
    /// whose handlers write to the database of `pool` (which holds the outbox schema: the inbox
    /// table).
    pub fn builder(pool: Pool, queue: impl Into<String>) -> ConsumerBuilder {
        ConsumerBuilder::new(pool, queue.into())
    }

    /// Receives and handles events with `handler` until `shutdown` is cancelled, then finishes the
    /// running handlers and the pending deletes and returns. Failures of single calls or handlers
    /// are logged, counted and retried; they do not end the run.
    ///
    /// `T` is the event type the queue's messages decode into (often an enum of an aggregate's
    /// events); it is inferred from the handler.
    pub async fn run<T, H>(&self, shutdown: CancellationToken, handler: H) -> Result<()>
    where
        T: DecodeEvent + Send + 'static,
        H: Handler<T>,
    {
        let shared = Arc::new(Shared::new(self.inner.clone()));
        tracing::info!(consumer = %self.inner.config.name, queue = %self.inner.queue_url, "consumer started");
        let m = &self.inner.metrics;
        let before = (m.handled(), m.duplicates(), m.released());
        receive::receive_loop::<T, H>(shared.clone(), Arc::new(handler), shutdown).await;
        // Every unit has finished: this is the last reference.
        if let Ok(shared) = Arc::try_unwrap(shared) {
            shared.deleter.close().await;
        }
        // What this run did; `released` counts the messages given back unhandled (at the stop:
        // visible again once its polls are over, see "Shutdown").
        tracing::info!(
            consumer = %self.inner.config.name,
            handled = m.handled() - before.0,
            duplicates = m.duplicates() - before.1,
            released = m.released() - before.2,
            "consumer stopped"
        );
        Ok(())
    }

    /// The consumer's counters.
    pub fn metrics(&self) -> &ConsumerMetrics {
        &self.inner.metrics
    }

    /// The metrics in the Prometheus text exposition format (OpenMetrics, ending in `# EOF`).
    pub fn encode_metrics(&self) -> String {
        self.inner.metrics.encode()
    }

    /// The queue's URL.
    pub fn queue_url(&self) -> &str {
        &self.inner.queue_url
    }

    /// The consumer's name (its inbox name).
    pub fn name(&self) -> &str {
        &self.inner.config.name
    }
}
