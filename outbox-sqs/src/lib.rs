//! Amazon SQS publisher for the outbox relay: [`SqsPublisher`] implements
//! [`outbox_core::Publisher`] on `aws-sdk-sqs`.
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
//!     .default_queue("https://sqs.eu-west-1.amazonaws.com/123456789012/events")
//!     .build()
//!     .await?;
//! publisher.check().await?; // every queue exists and the credentials work
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
//!   | name             | value                                                          |
//!   |------------------|----------------------------------------------------------------|
//!   | `event_id`       | the event's UUID, hyphenated lower case — the dedupe key       |
//!   | `event_type`     | e.g. `order.created`                                           |
//!   | `aggregate_type` | e.g. `order`                                                   |
//!   | `aggregate_id`   | the aggregate's id as text                                     |
//!   | `traceparent`    | the W3C trace context; only when the event's metadata has one  |
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
//! [`outbox_core::message::message_size`]) is not sent: its outcome is `Permanent`.
//!
//! # Configuration
//!
//! [`SqsConfig`] is plain data with defaults; [`SqsConfig::from_env`] reads:
//!
//! | variable                       | meaning                                  | default |
//! |--------------------------------|------------------------------------------|---------|
//! | `OUTBOX_SQS_DEFAULT_QUEUE_URL` | queue for event types no route matches   | none    |
//! | `OUTBOX_SQS_ROUTES`            | `pattern=queue,pattern=queue,…`           | none    |
//! | `OUTBOX_SQS_MAX_IN_FLIGHT`     | most `SendMessageBatch` calls at once    | 8       |
//! | `OUTBOX_SQS_CALL_TIMEOUT_MS`   | time limit of one call (SDK retries included) | 10000 |
//! | `OUTBOX_SQS_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS` | a queue broken this long dead-letters its events | 3600 |
//! | `OUTBOX_SQS_BREAKER_PROBE_INTERVAL_MS` | one probe call per interval to a broken queue | 5000 |
//!
//! A queue is a URL, or a queue name that [`SqsPublisherBuilder::build`] resolves with
//! `GetQueueUrl`. Everything AWS — credentials, region, endpoint, SDK retries — comes from
//! `aws-config`'s default chains, as in any AWS SDK: `AWS_REGION`, `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY`, `AWS_PROFILE`, web identity, ECS and EC2 instance credentials,
//! `AWS_ENDPOINT_URL_SQS` (or `AWS_ENDPOINT_URL`) for a local SQS, `AWS_MAX_ATTEMPTS`. The builder's
//! [`endpoint_url`](SqsPublisherBuilder::endpoint_url), [`region`](SqsPublisherBuilder::region) and
//! [`max_attempts`](SqsPublisherBuilder::max_attempts) override them;
//! [`sdk_config`](SqsPublisherBuilder::sdk_config) and [`client`](SqsPublisherBuilder::client) supply
//! a configuration of your own. Keys are never part of this crate's configuration. (The lean
//! `aws-config` build used here has no SSO or `credential_process` support.)
//!
//! # Routing
//!
//! Each event's type picks its queue: an exact route (`payment.captured`) wins over a prefix route
//! (`order.*`), a longer prefix over a shorter one, and the default queue comes last. An event no
//! route matches and with no default queue gets `PublishOutcome::Permanent("no SQS route for event
//! type `x`")`: a configuration error, dead-lettered (and so visible) rather than retried forever.
//!
//! # Batching, concurrency, ordering
//!
//! One `publish` sends its events with `SendMessageBatch`: per queue, at most
//! [`MAX_BATCH_ENTRIES`] (10) entries and [`MAX_BATCH_BYTES`] (1 MiB, bodies plus attributes) per
//! call. Calls run concurrently, at most `max_in_flight` at once across every `publish` of the
//! publisher, each within `call_timeout`.
//!
//! Events go out in `seq` order. When the relay keeps per-aggregate order (its default) a `publish`
//! never holds two events of one aggregate, so every call is independent — unless
//! [`group_batches`](SqsConfig::group_batches) is on and every queue is FIFO: then the relay hands
//! over whole batches and the rules below keep each aggregate's order. When it holds several
//! events of one aggregate (the relay running with ordering off) and the queue is FIFO, they are
//! put in the same `SendMessageBatch` call, in `seq` order; when they do not fit in one call, the
//! calls carrying them are sent one after the other, and once one of the group's events fails, the
//! group's later events in that `publish` are not sent (outcome `Retry`), so none overtakes it. On
//! a standard queue SQS keeps no order anyway, and all calls go out concurrently.
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
//! - When **every** call of a `publish` failed with a retryable whole-call error (SQS unreachable,
//!   5xx, time-outs, bad credentials) — calls to broken queues aside — `publish` returns `Err`: the
//!   relay backs off without counting an attempt. When some calls succeeded, the failed calls'
//!   events are `Retry`. (With `Err`, the call's unroutable or oversized events are released too;
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
//!   once the queue is fixed.
//!
//! Connection failures, time-outs, 5xx and credential errors do not open a breaker: they hit every
//! queue alike (one endpoint, one identity), and the relay treats them as an SQS outage — backing
//! off, never dead-lettering on a clock. [`SqsPublisher::unavailable_queues`] lists the open
//! breakers, and [`SqsPublisher::encode_metrics`] exports them as the gauge
//! `outbox_sqs_queue_unavailable{queue}` (1 while open; `outbox relay --metrics-addr` serves it).
//!
//! [`Publisher::check`](outbox_core::Publisher::check) calls `GetQueueAttributes` on every
//! configured queue and fails with an error naming the queue: [`ErrorKind::QueueNotFound`] when it
//! does not exist, [`ErrorKind::Credentials`] when credentials are missing or refused,
//! [`ErrorKind::Unavailable`] / [`ErrorKind::Timeout`] when SQS cannot be reached.
//!
//! # Logging
//!
//! Failures are logged with `tracing` at `warn`: queue URL, event id, SQS error code and message.
//! Payloads, attribute values and credentials are never logged.

mod batch;
mod breaker;
mod builder;
mod check;
mod classify;
mod config;
mod error;
mod message;
mod metrics;
mod publisher;
mod routing;
mod sdk_error;

pub use batch::{MAX_BATCH_BYTES, MAX_BATCH_ENTRIES};
pub use classify::{Class, classify, classify_sdk_error};
pub use config::{
    DEFAULT_BREAKER_PROBE_INTERVAL, DEFAULT_BROKEN_QUEUE_DEAD_LETTER_AFTER, DEFAULT_CALL_TIMEOUT,
    DEFAULT_MAX_IN_FLIGHT, ENV_BREAKER_PROBE_INTERVAL_MS, ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS,
    ENV_CALL_TIMEOUT_MS, ENV_DEFAULT_QUEUE_URL, ENV_MAX_IN_FLIGHT, ENV_ROUTES,
    MAX_BREAKER_PROBE_INTERVAL, MAX_BROKEN_QUEUE_DEAD_LETTER_AFTER, Route, SqsConfig,
};
pub use error::{Error, ErrorKind, Result};
pub use message::{HASHED_GROUP_ID_PREFIX, MAX_GROUP_ID_LEN, message_group_id};
pub use publisher::{SqsPublisher, SqsPublisherBuilder, UnavailableQueue};
