//! The AWS publisher of the outbox relay: [`SqsPublisher`] implements [`outbox_core::Publisher`]
//! for SQS queues and SNS topics — each event type routed to one — and can offload large payloads
//! to S3 in the format of the AWS Extended Client libraries. `SendMessageBatch` goes out on a
//! lean transport of its own ([`SqsTransport::Direct`]: the request's JSON written straight from
//! the claimed rows, SigV4-signed with `aws-sigv4`, one pooled HTTP/1.1 client); `aws-sdk-sqs`
//! provides the configuration and everything else, and `aws-sdk-sns` / `aws-sdk-s3` the topics and
//! the offload.
//!
//! (One crate rather than `outbox-sqs` plus `outbox-sns`: a relay routes to queues and topics at
//! once, and both share the router, the batching plan, the classification of failures, the
//! circuit breakers and the per-entry settlement; only the batch call and the entry type differ.)
//!
//! On the other side of the queue, [`Consumer`] (module [`consumer`]) receives the relay's
//! messages, decodes them into your event types and applies each event exactly once to your
//! database, with the inbox.
//!
//! ```no_run
//! use outbox_core::Publisher;
//! use outbox_sqs::{SqsConfig, SqsPublisher};
//!
//! # async fn run() -> Result<(), outbox_sqs::Error> {
//! // Credentials, region and endpoint come from the standard AWS configuration.
//! let publisher = SqsPublisher::builder()
//!     .route("order.*", "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo")
//!     .route("payment.captured", "payments") // a queue name: resolved with GetQueueUrl
//!     .route("customer.*", "arn:aws:sns:eu-west-1:123456789012:customers") // an SNS topic
//!     .default_queue("https://sqs.eu-west-1.amazonaws.com/123456789012/events")
//!     .build()
//!     .await?;
//! publisher.check().await?; // every queue and topic exists and the credentials work
//! // … hand `publisher` to the relay.
//!
//! // Or configured from OUTBOX_SQS_* variables:
//! let publisher = SqsPublisher::builder()
//!     .config(SqsConfig::from_env()?)
//!     .build()
//!     .await?;
//! # let _ = publisher;
//! # Ok(())
//! # }
//! ```
//!
//! # Message shape
//!
//! Consumers can rely on this:
//!
//! - **Body**: the event's payload exactly as PostgreSQL prints the stored `jsonb` (the relay never
//!   parses it), e.g. `{"total": "9.90", "order_id": 42}` — keys in `jsonb`'s order, a space after
//!   `:` and `,`.
//! - **Message attributes**, each of data type `String`:
//!
//!   | name             | value                                                                 |
//!   |------------------|-----------------------------------------------------------------------|
//!   | `event_id`       | the event's UUID, hyphenated lower case — the dedupe key              |
//!   | `event_type`     | e.g. `order.created`                                                  |
//!   | `aggregate_type` | e.g. `order`                                                          |
//!   | `aggregate_id`   | the aggregate's id as text                                            |
//!   | `traceparent`    | the W3C trace context; only when the event's metadata has a valid one |
//!
//!   No other attributes (at most 5 of SQS's 10).
//! - **FIFO queues** (URL ending in `.fifo`): `MessageGroupId` =
//!   [`message_group_id`]`(aggregate_type, aggregate_id)`, i.e. `{aggregate_type}:{aggregate_id}`,
//!   or `sha256:<64 hex digits>` of that text when it is longer than 128 characters or holds
//!   characters other than ASCII letters, digits and punctuation; `MessageDeduplicationId` = the
//!   event id, so SQS drops a re-send of the same event within its 5-minute deduplication window.
//! - **Standard queues**: neither id is set. Delivery is at least once (a retried call may have
//!   succeeded): consumers deduplicate on `event_id`.
//!
//! A message larger than SQS's 1 MiB (body plus attributes, counted with
//! [`outbox_core::message::message_size`]) is not sent: its outcome is `Permanent`. The publisher
//! states SQS's limits as [`SQS_LIMITS`] ([`Publisher::limits`](outbox_core::Publisher::limits)):
//! build your emitter with [`Emitter::for_publisher`](outbox_core::Emitter::for_publisher) and such
//! an event is refused by `emit`, in the writer's transaction, instead.
//!
//! # SNS topics
//!
//! A route's target (and the default) is a queue URL, a queue name, or an SNS topic ARN
//! (`arn:aws:sns:REGION:ACCOUNT:TOPIC`); anything else is refused by
//! [`build`](SqsPublisherBuilder::build) with [`ErrorKind::Config`] naming the route. Events for a
//! topic go out with `PublishBatch` (at most 10 entries and [`SNS_MAX_BATCH_BYTES`], 256 KiB, or the
//! topic's own `MaximumMessageSize`, per
//! call) with the same body and message attributes as on a queue; on a FIFO topic (ARN ending in
//! `.fifo`) with the same `MessageGroupId` ([`message_group_id`]) and `MessageDeduplicationId`
//! (the event id). Subscribers see:
//!
//! - an SQS subscription with **raw message delivery**: exactly the message a queue route would
//!   have sent (body and attributes);
//! - without raw delivery: SNS's JSON envelope — the body in `Message`, each attribute in
//!   `MessageAttributes` as `{"Type": "String", "Value": …}`. The typed [`consumer`] reads either.
//!
//! Per-entry failures are classified by [`classify`] with SNS's codes beside SQS's; a topic that
//! is deleted (`NotFound`), denied (`AuthorizationError`) or has its KMS key disabled (`KMS…`) is a
//! broken destination with its own circuit breaker, like a broken queue (gauge
//! `outbox_sns_topic_unavailable{topic}`). The start-up check calls `GetTopicAttributes` on every
//! topic ([`ErrorKind::TopicNotFound`] when one is missing) and reads its `MaximumMessageSize`
//! (so does the probe that finds a topic back when it did not answer then). A
//! topic accepts 256 KiB per message by default ([`SNS_LIMITS`]), or what its `MaximumMessageSize`
//! says (1 KiB to 1 MiB): a publisher with a route to a topic states that limit to `emit` (the
//! default before its check, the topic's own after).
//!
//! # S3 offload of large payloads
//!
//! Opt-in with [`offload_bucket`](SqsPublisherBuilder::offload_bucket) (`OUTBOX_SQS_OFFLOAD_BUCKET`,
//! `outbox relay --offload-bucket`). An event whose message (payload and attributes, counted as
//! [`outbox_core::message::message_size`] counts them) is larger than the threshold — each
//! destination's limit by default (1 MiB for a queue, 256 KiB for a topic, or its own
//! `MaximumMessageSize`), or [`offload_threshold`](SqsPublisherBuilder::offload_threshold) where
//! that is lower (at most 1 MiB) — is written to S3 first, then sent as a pointer, in the
//! format of the AWS SQS/SNS Extended Client libraries (Java `amazon-sqs-java-extended-client-lib`
//! 2.x, `amazon-sns-java-extended-client-lib` 2.x, Python `amazon-sqs-extended-client`), so their
//! consumers read the payload unchanged:
//!
//! - S3 object: bucket as configured, key [`offload_key`]`(event_id)` = `outbox/<event id>`, content
//!   the payload text exactly as it would have been the body (`Content-Type: application/json`).
//!   The key is deterministic: a re-send after a crash overwrites the same object.
//! - body: [`pointer_body`] =
//!   `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"…","s3Key":"…"}]`;
//! - attributes: the usual ones plus [`EXTENDED_PAYLOAD_SIZE_ATTRIBUTE`] (`ExtendedPayloadSize`,
//!   data type `Number`, the payload's size in bytes) — the attribute the libraries look for (the
//!   Python reader also accepts the legacy `SQSLargePayloadSize`; this crate writes the current
//!   name).
//!
//! Behind a topic, consumers using the SQS Extended Client need raw message delivery on their
//! subscription (the library reads message attributes, which SNS's envelope would wrap).
//!
//! The object is written before the message is sent; when that fails, the message is not sent.
//! The events that need no upload are sent meanwhile. A publish waits for an upload at most
//! [`SqsConfig::offload_wait`] (1 s, `OUTBOX_SQS_OFFLOAD_WAIT_MS`): an upload still running then
//! goes on without it, its event is put back for a second without counting an attempt
//! ([`FailureKind::InProgress`](outbox_core::FailureKind::InProgress); not an outage), and its
//! next claim sends the pointer once the upload is done, or counts the upload's failure — so a
//! slow S3 holds the offloaded event and, through per-aggregate order, its aggregate; the batch's
//! other events wait the offload wait at most. (Each publisher remembers those uploads in memory,
//! up to 10 000 for 10 minutes; another relay claiming the event meanwhile uploads it again, to
//! the same key; uploads still running when the relay stops are cut, and uploaded again later.
//! At most `max_uploads` (32) run at once, each holding a copy of its payload; an event finding
//! every slot busy for the whole wait is put back as not sent.)
//! S3 unreachable, too slow or failing (5xx): the event is `Unavailable` — put back without
//! counting an attempt, like a broker outage; once a `HeadBucket` right after such a failure is
//! not answered either, S3 counts as down: the next batches put their offloaded events back at
//! once (never dead-lettered for it), and their other events go on, until an empty upload to
//! `outbox/probe`, tried once per probe interval by a task of its own, goes through. S3 refusing every upload (bucket missing, access or
//! its KMS key denied) opens the bucket's circuit breaker, as a missing queue does: its events are
//! put back without an upload each (one probe per interval) and dead-lettered once it has refused
//! longer than [`SqsConfig::broken_queue_dead_letter_after`]. A refusal of one upload (a slow
//! link's `RequestTimeout`, credentials): `Retry` — a counted attempt, so a lasting problem ends in
//! a visible dead letter; so does an upload that times out, twice in a row, while S3 answers a `HeadBucket` right after (a link too
//! slow for the payload: raise `OUTBOX_SQS_CALL_TIMEOUT_MS`; the first time S3 may have just come
//! back from an outage; never an upload that carried less than 32 KiB/s: stalled, not slow), or
//! that outlasts the publish timeout. The next
//! attempt writes the object again under the same key. Delivery stays at least once: a crash between the
//! send and the relay marking the event re-sends the same pointer to the same (rewritten) object.
//! With offload on, [`Publisher::limits`](outbox_core::Publisher::limits) is [`OFFLOAD_LIMITS`]:
//! messages up to [`OFFLOAD_MAX_MESSAGE_BYTES`] (64 MiB), so build the emitter with
//! [`Emitter::for_publisher`](outbox_core::Emitter::for_publisher) to emit such events. The start-up
//! check calls `HeadBucket` ([`ErrorKind::BucketNotFound`]; S3 not answering it, down, passes with a
//! warning: the offloaded events wait, the others are relayed). Credentials, region and endpoint come
//! from the same AWS configuration as SQS's; with an overridden endpoint S3 uses path-style
//! addressing. The relay needs `s3:PutObject` on `arn:aws:s3:::BUCKET/outbox/*` (and
//! `s3:ListBucket` for the `HeadBucket` check).
//!
//! **Lifecycle**: the relay never deletes offloaded objects, and `outbox cleanup` does not either
//! (a consumer may read a message long after the outbox row is gone). Expire them with an S3
//! lifecycle rule on the prefix `outbox/`, longer than a message can live — the queue's retention
//! (SQS: up to 14 days) plus the relay's retrying — e.g. 30 days. (The Extended Client libraries
//! can delete the object when the consumer deletes the message; with a topic fanning out to several
//! queues, leave that off and let the lifecycle rule do it.)
//!
//! # Configuration
//!
//! [`SqsConfig`] is plain data with defaults; [`SqsConfig::from_env`] reads:
//!
//! | variable                       | meaning                                  | default |
//! |--------------------------------|------------------------------------------|---------|
//! | `OUTBOX_SQS_DEFAULT_QUEUE_URL` | queue for event types no route matches   | none    |
//! | `OUTBOX_SQS_ROUTES`            | `pattern=queue,pattern=queue,…`           | none    |
//! | `OUTBOX_SQS_MAX_IN_FLIGHT`     | most batch calls at once | 8 |
//! | `OUTBOX_SQS_MAX_UPLOADS`       | most S3 uploads at once (256 MiB of payloads at most) | 32 |
//! | `OUTBOX_SQS_CALL_TIMEOUT_MS`   | time limit of one call (retries included) | 10000 |
//! | `OUTBOX_SQS_CALL_WAIT_MS`      | how long a publish waits for its calls before those still running go on without it | 1000 |
//! | `OUTBOX_SQS_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS` | a queue broken this long dead-letters its events | 3600 |
//! | `OUTBOX_SQS_BREAKER_PROBE_INTERVAL_MS` | one probe call per interval to a broken queue or bucket, and to a queue, topic or S3 that is down | 5000 |
//! | `OUTBOX_SQS_OFFLOAD_BUCKET` | S3 bucket for large payloads (turns offload on) | none |
//! | `OUTBOX_SQS_OFFLOAD_THRESHOLD_BYTES` | offload messages larger than this | the destination's limit |
//! | `OUTBOX_SQS_OFFLOAD_WAIT_MS` | how long a publish waits for an upload before its event is put back while the upload goes on | 1000 |
//! | `OUTBOX_SQS_BATCH_AGGREGATES` | several events of one aggregate in one FIFO call | false |
//! | `OUTBOX_SQS_TRANSPORT` | `direct` or `sdk` (how `SendMessageBatch` is sent, see [`SqsTransport`]) | direct |
//!
//! A queue is a URL, or a queue name that [`SqsPublisherBuilder::build`] resolves with
//! `GetQueueUrl`. Everything AWS — credentials, region, endpoint, SDK retries — comes from
//! `aws-config`'s default chains, as in any AWS SDK: `AWS_REGION`, `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY`, `AWS_PROFILE`, web identity, ECS and EC2 instance credentials,
//! `AWS_ENDPOINT_URL_SQS` / `AWS_ENDPOINT_URL_SNS` / `AWS_ENDPOINT_URL_S3` (or `AWS_ENDPOINT_URL`)
//! for local servers, `AWS_MAX_ATTEMPTS`. The builder's
//! [`endpoint_url`](SqsPublisherBuilder::endpoint_url), [`region`](SqsPublisherBuilder::region) and
//! [`max_attempts`](SqsPublisherBuilder::max_attempts) override them;
//! [`sdk_config`](SqsPublisherBuilder::sdk_config) and [`client`](SqsPublisherBuilder::client) supply
//! a configuration of your own. Keys are never part of this crate's configuration. (The lean
//! `aws-config` build used here has no SSO or `credential_process` support.)
//!
//! Both transports read that same configuration: the direct one resolves the endpoint as
//! `aws-sdk-sqs` does (the override, else AWS's regional endpoint, FIPS and dual-stack included),
//! caches the credentials provider's credentials until five minutes before they expire (and fetches
//! them again after SQS refuses them), and retries as the SDK's standard mode does (up to
//! `max_attempts`, exponential backoff with jitter, on server errors, throttling and lost
//! connections). Choose [`SqsTransport::Sdk`] (`OUTBOX_SQS_TRANSPORT=sdk`) to send through
//! `aws-sdk-sqs`'s client instead, e.g. for its HTTP client settings; a
//! [`client`](SqsPublisherBuilder::client) you give is always used as it is.
//!
//! # Routing
//!
//! Each event's type picks its queue or topic: an exact route (`payment.captured`) wins over a prefix route
//! (`order.*`), a longer prefix over a shorter one, and the default queue comes last. An event no
//! route matches and with no default queue gets `PublishOutcome::Permanent` (kind
//! [`NoRoute`](outbox_core::FailureKind::NoRoute), "no SQS route for event type `x`"): a configuration error, dead-lettered (and so visible) rather than retried forever.
//!
//! # Batching, concurrency, ordering
//!
//! One `publish` sends its events with `SendMessageBatch` (queues) and `PublishBatch` (topics):
//! per destination, at most [`MAX_BATCH_ENTRIES`] (10) entries and [`MAX_BATCH_BYTES`] (1 MiB,
//! bodies plus attributes; [`SNS_MAX_BATCH_BYTES`], 256 KiB, for a topic) per call. Calls run concurrently, at most `max_in_flight` at once across every `publish` of the
//! publisher, each within `call_timeout`.
//!
//! Events go out in `seq` order. When the relay keeps per-aggregate order (its default) a `publish`
//! never holds two events of one aggregate, so every call is independent. When it holds several
//! events of one aggregate (the relay running with ordering off) and the queue is FIFO, they are
//! put in the same `SendMessageBatch` call, in `seq` order; when they do not fit in one call, the
//! calls carrying them are sent one after the other, and once one of the group's events fails, the
//! group's later events in that `publish` are not sent (outcome `Retry`), so none overtakes it. On
//! a standard queue SQS keeps no order anyway, and all calls go out concurrently.
//!
//! A `publish` waits for its calls at most [`SqsConfig::call_wait`] (1 s,
//! `OUTBOX_SQS_CALL_WAIT_MS`): a call still running then goes on without it, within its time-out
//! and the publish deadline, and its events are put back without counting an attempt
//! ([`FailureKind::InProgress`](outbox_core::FailureKind::InProgress); not an outage) until the
//! call cannot be running any more (the rest of its time-out). Those it gets accepted are
//! reported settled as it ends ([`Publisher::settled`](outbox_core::Publisher::settled)), and
//! the relay marks them; for the others the next claim takes the call's answer without calling
//! again: the failure counted then, or (put back uncounted by the call) sent again. A call going on that fails as a
//! whole while no call of the publisher had an answer, nor its destination's probes, counts no
//! attempt (an outage, as a publish
//! whose calls all fail), and a publish whose calls that ended all failed fails as a whole. So a destination answering
//! slowly holds its own events, and the batch's others wait the call wait at most. A chain of
//! calls whose publish went on ends with the call it is in. With several destinations, one
//! destination's calls hold at most half of `max_in_flight` at once (so a slow one leaves the
//! others the rest); while its calls going on hold its whole share, its new events are put back
//! until fewer run. While every destination's calls outlast the call wait or hold all the slots
//! they may, [`Publisher::room`](outbox_core::Publisher::room) tells the relay to claim no more
//! than the free slots' calls carry, and nothing until one frees. Each publisher remembers
//! those calls in memory, up to 10 000 events for 10 minutes; another relay claiming the event
//! meanwhile sends it again (a duplicate; a FIFO queue drops it by its deduplication id).
//!
//! # Outcomes and errors
//!
//! `publish` returns one [`PublishOutcome`](outbox_core::PublishOutcome) per event, in order:
//!
//! - `Published`: SQS accepted the message (a FIFO duplicate that SQS drops counts as accepted).
//! - A `SendMessageBatch` response can fail single entries; each is classified by [`classify`]
//!   (code and `SenderFault`): invalid content, too large, other sender faults → `Permanent` with
//!   SQS's code and message as the reason; throttling, server-side failures → `Retry`.
//! - A call that fails as a whole is classified by [`classify_sdk_error`]: 5xx, time-outs,
//!   connection and credentials failures → `Retry` for its entries; a broken queue (see below) →
//!   `Unavailable`. A call refused as a whole for its content is re-sent one entry per call, so
//!   that only the offending events become `Permanent`.
//! - A call unanswered after a second, or timed out, is checked with a small call to its
//!   destination (`GetQueueAttributes`, `GetTopicAttributes`), given until the destination would
//!   count as silent; unanswered, with nothing heard from the destination for 5 s (the call
//!   included), the destination is **down** (see below); the call runs on to its time-out (it
//!   was sent: its answer counts), its events `Unavailable` if it gets none. So is a call failed
//!   as a whole with a refused connection or a 5xx: when the small call right after fails too
//!   and nothing worked for 5 s, the destination is down and the call's events `Unavailable`.
//! - When **every** call of a `publish` failed with a retryable whole-call error (SQS unreachable,
//!   5xx, time-outs, bad credentials, destinations down) — calls to broken queues aside —
//!   `publish` returns `Err`: the relay backs off without counting an attempt. When some calls
//!   succeeded, the failed calls' events are `Retry` (`Unavailable` for a destination down). (With `Err`, the call's unroutable or oversized events are released too;
//!   they get their `Permanent` outcome on a later attempt.)
//!
//! # A broken queue: circuit breaker
//!
//! A queue can break on its own while the others work: deleted, access denied by a policy, its KMS
//! key disabled or denied (`KMS.*`), throttled. [`classify`] calls these [`Class::Unavailable`].
//! Each queue has a circuit breaker:
//!
//! - The first such failure **opens** it (logged at `warn`: "circuit opened", with the queue and
//!   the error). The failed events get `PublishOutcome::Unavailable`: the relay puts them back for
//!   5 s without counting an attempt and holds back only their aggregates.
//! - While it is open, `publish` does not call SQS for that queue: its events get `Unavailable` at
//!   once, so a worker spends no call time or in-flight permits on it and the events of healthy
//!   queues keep flowing. One call per probe interval (default 5 s,
//!   [`breaker_probe_interval`](SqsPublisherBuilder::breaker_probe_interval)) goes through as a
//!   **probe**; the first call the queue answers normally **closes** the breaker (logged at `info`:
//!   "circuit closed").
//! - A queue still broken after
//!   [`broken_queue_dead_letter_after`](SqsPublisherBuilder::broken_queue_dead_letter_after)
//!   (default 1 h, counted from the first failure this publisher saw) makes its events
//!   `Permanent`: dead-lettered with the SQS error, visible to `outbox dead-letters`, retryable
//!   once the queue is fixed. Throttling opens the breaker but never dead-letters: the clock
//!   starts at the first failure that is not throttling.
//!
//! Connection failures, time-outs, 5xx and credential errors do not open a breaker and never
//! dead-letter on a clock. A queue or topic that does not answer at all (the check above) is
//! *down*: its events are `Unavailable` at once, without a call, and the other destinations' go
//! on, until a probe of its own, once per probe interval, is answered (logged at `warn`:
//! "destination does not answer", and at `info`: "destination answers again"). When every
//! destination is down, `publish` returns `Err`, as in an SQS outage. [`SqsPublisher::unavailable_queues`] lists the open
//! breakers ([`SqsPublisher::unavailable_bucket`] the offload bucket's), and
//! [`SqsPublisher::encode_metrics`] exports them as the gauge `outbox_sqs_queue_unavailable{queue}`
//! (1 while open; `outbox relay --metrics-addr` serves it).
//!
//! [`Publisher::check`](outbox_core::Publisher::check) calls `GetQueueAttributes` on every
//! configured queue and fails with an error naming the queue: [`ErrorKind::QueueNotFound`] when it
//! does not exist, [`ErrorKind::Credentials`] when credentials are missing or refused,
//! [`ErrorKind::Unavailable`] / [`ErrorKind::Timeout`] when SQS cannot be reached.
//!
//! # Consuming
//!
//! ```no_run
//! # use outbox_sqs::consumer::{Envelope, Handler, HandlerError};
//! # #[derive(serde::Serialize, serde::Deserialize, outbox_core::OutboxEvent)]
//! # #[outbox(aggregate = "order", event_type = "order.placed")]
//! # struct OrderPlaced { #[outbox(aggregate_id)] order_id: i64 }
//! # struct Billing;
//! # impl Handler<OrderPlaced> for Billing {
//! #     async fn handle(&self, _: OrderPlaced, _: &Envelope, _: &deadpool_postgres::Transaction<'_>)
//! #         -> Result<(), HandlerError> { Ok(()) }
//! # }
//! # async fn run(pool: deadpool_postgres::Pool) -> Result<(), outbox_sqs::Error> {
//! let consumer = outbox_sqs::Consumer::builder(pool, "orders.fifo") // a URL, or a queue name
//!     .name("billing") // the inbox name
//!     .build()
//!     .await?;
//! consumer.run(outbox_core::CancellationToken::new(), Billing).await?;
//! # Ok(()) }
//! ```
//!
//! The [`consumer`] module documents what happens to each message: duplicates, retries with
//! back-off, the redrive policy, bad input, FIFO order, heartbeat, shutdown and metrics.
//!
//! # Logging
//!
//! Failures are logged with `tracing` at `warn`: `destination` (the queue URL or topic ARN), `kind`
//! (`queue` or `topic`), event id, the SQS or SNS error code and message; an S3 offload failure
//! with the bucket and the event id. Payloads, attribute values and credentials are never logged.
//! The consumer logs (and puts on its `outbox.consume` span) a message's id, event id, event
//! type, aggregate and receive count — the metadata an operator needs — and never its body. (The
//! AWS SDK's own `trace` logs hold whole requests and responses, message bodies included: keep
//! `aws_smithy_*` and `aws_sdk_*` at `info` or above in production.)

mod answer;
mod batch;
mod breaker;
mod builder;
mod call;
mod call_pace;
mod chain;
mod check;
mod classify;
mod clients;
mod config;
mod config_env;
pub mod consumer;
mod destination;
mod destination_down;
mod detached;
mod detached_call;
mod direct;
mod down;
mod endpoint;
mod error;
mod header_text;
mod idle_breakers;
mod in_progress;
mod limit_again;
mod max_message;
mod message;
mod metrics;
mod offload;
mod offload_settings;
mod publisher;
mod retry_quota;
mod room;
mod routing;
mod s3;
mod s3_down;
mod sdk_error;
mod send;
mod settle;
mod shared_probe;
mod signer;
mod sigv4;
mod slow_upload;
mod sns;
mod sqs_json;
mod transport;
mod unavailable;
mod upload;
mod upload_failure;
mod upload_pace;
mod upload_slots;
mod upload_watch;
mod validate;
mod watch;

pub use batch::{MAX_BATCH_BYTES, MAX_BATCH_ENTRIES};
pub use classify::{Class, classify, classify_sdk_error, failure_kind};
pub use config::{
    DEFAULT_BREAKER_PROBE_INTERVAL, DEFAULT_BROKEN_QUEUE_DEAD_LETTER_AFTER, DEFAULT_CALL_TIMEOUT,
    DEFAULT_CALL_WAIT, DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_UPLOADS, DEFAULT_OFFLOAD_WAIT,
    ENV_BATCH_AGGREGATES, ENV_BREAKER_PROBE_INTERVAL_MS, ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS,
    ENV_CALL_TIMEOUT_MS, ENV_CALL_WAIT_MS, ENV_DEFAULT_QUEUE_URL, ENV_MAX_IN_FLIGHT,
    ENV_MAX_UPLOADS, ENV_OFFLOAD_BUCKET, ENV_OFFLOAD_THRESHOLD_BYTES, ENV_OFFLOAD_WAIT_MS,
    ENV_ROUTES, ENV_TRANSPORT, ENV_VARIABLES, MAX_BREAKER_PROBE_INTERVAL,
    MAX_BROKEN_QUEUE_DEAD_LETTER_AFTER, MAX_CALL_TIMEOUT, MAX_IN_FLIGHT,
    MIN_BREAKER_PROBE_INTERVAL, MIN_BROKEN_QUEUE_DEAD_LETTER_AFTER, MIN_CALL_TIMEOUT, Route,
    SqsConfig,
};
pub use consumer::{Consumer, ConsumerBuilder, ConsumerConfig, Envelope, Handler};
pub use destination::DestinationKind;
pub use error::{Error, ErrorKind, Result};
pub use message::{HASHED_GROUP_ID_PREFIX, MAX_GROUP_ID_LEN, SQS_LIMITS, message_group_id};
pub use offload::{
    EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, OFFLOAD_KEY_PREFIX, OFFLOAD_LIMITS, OFFLOAD_MAX_MESSAGE_BYTES,
    PAYLOAD_POINTER_CLASS, offload_key, pointer_body,
};
pub use publisher::{SqsPublisher, SqsPublisherBuilder};
pub use sns::{SNS_LIMITS, SNS_MAX_BATCH_BYTES, SNS_MAX_TOPIC_MESSAGE_BYTES};
pub use transport::SqsTransport;
pub use unavailable::{UnavailableBucket, UnavailableQueue};
