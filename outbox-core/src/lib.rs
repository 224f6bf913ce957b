//! Transactional outbox for PostgreSQL: write events in the same transaction as your business
//! data, and let a relay publish them to a broker (AWS SQS with the `outbox-sqs` crate).
//!
//! A service that saves an order and then publishes `order.placed` loses the event when it
//! crashes between the two writes. With an outbox, the event is a row of `outbox_events` written
//! in the order's own transaction; the [`Relay`] claims committed rows, publishes them and marks
//! them processed. Delivery is at-least-once; the event id is the consumer's dedupe key (see
//! [`process_once`]).
//!
//! ```
//! use outbox_core::OutboxEvent;
//! use serde::Serialize;
//!
//! #[derive(Serialize, OutboxEvent)]
//! #[outbox(aggregate = "order", event_type = "order.placed")]
//! struct OrderPlaced {
//!     #[outbox(aggregate_id)]
//!     order_id: u64,
//!     total_cents: i64,
//! }
//!
//! let event = OrderPlaced { order_id: 42, total_cents: 1999 };
//! assert_eq!(event.event_type(), "order.placed");
//! assert_eq!(event.aggregate_type(), "order");
//! assert_eq!(event.aggregate_id().to_string(), "42");
//! ```
//!
//! Emitting it inside your transaction, and relaying (needs a database, so not run here):
//!
//! ```no_run
//! # use outbox_core::OutboxEvent;
//! # #[derive(serde::Serialize, OutboxEvent)]
//! # #[outbox(aggregate = "order", event_type = "order.placed")]
//! # struct OrderPlaced { #[outbox(aggregate_id)] order_id: u64 }
//! # struct Broker;
//! # impl outbox_core::Publisher for Broker {
//! #     type Error = std::io::Error;
//! #     async fn publish(&self, events: &[outbox_core::ClaimedEvent])
//! #         -> Result<Vec<outbox_core::PublishOutcome>, Self::Error> {
//! #         Ok(vec![outbox_core::PublishOutcome::Published; events.len()])
//! #     }
//! # }
//! # async fn run(pool: deadpool_postgres::Pool, pg: tokio_postgres::Config)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! let mut client = pool.get().await?;
//! outbox_core::migrate(&mut client).await?;
//!
//! // In the service: business rows and the event commit (or roll back) together.
//! let tx = client.transaction().await?;
//! // ... insert the order with your own (generated) queries ...
//! let event_id = OrderPlaced { order_id: 42 }.emit(&tx).await?;
//! tx.commit().await?;
//!
//! // In the relay process: publish until shut down.
//! let relay = outbox_core::Relay::builder(pool.clone(), Broker).listen(pg).build()?;
//! let shutdown = outbox_core::CancellationToken::new();
//! relay.run(shutdown).await?;
//! # let _ = event_id; Ok(()) }
//! ```
//!
//! Pieces: [`OutboxEvent`] (derive it), [`emit`] / [`emit_all`] / [`Emitter`] (write events,
//! refusing what the broker would reject), [`migrate()`] (the schema), [`Relay`] and [`Publisher`]
//! (publishing), [`stats()`], the dead-letter functions, [`cleanup`] and [`cleanup_inbox`] (operating),
//! [`process_once`] (consumers), [`RelayMetrics`] (Prometheus), [`PgConnector`] (connections: TLS with
//! libpq's `sslmode`, one connector for the pool and the relay's LISTEN connection, RDS IAM tokens
//! with the `rds-iam` feature), [`check_relay_database`] (start-up checks) and [`partition`] (the
//! opt-in partitioned layout, whose retention drops partitions instead of deleting rows).

mod backoff;
mod chain;
mod claimed_event;
mod client;
pub mod connect;
mod dead_letters;
mod decode;
mod emit;
pub mod env;
pub mod error;
mod event;
mod failure;
mod inbox;
pub mod limits;
pub mod message;
mod metrics;
mod migrate;
pub mod partition;
mod pipeline;
mod preflight;
mod publisher;
mod relay;
mod retention;
mod stats;
pub mod trace;

#[doc(hidden)]
pub mod __private;

pub use chain::{error_chain, redact_signed_request};
pub use client::GenericClient;
pub use connect::{
    ConnectConfig, Password, PasswordProvider, PgConnection, PgConnector, RootCerts, SslMode, Tls,
    WatchedClient,
};
pub use dead_letters::{
    DeadLetter, DeadLetterFilter, PURGE_BATCH_SIZE, dead_letter_ids, list_dead_letters,
    purge_dead_letter_ids, purge_dead_letters, retry_dead_letters,
};
pub use decode::DecodeEvent;
pub use emit::{Emitter, MAX_AGGREGATE_KEY_BYTES, emit, emit_all};
pub use error::{Error, ErrorKind, Result};
pub use event::OutboxEvent;
pub use failure::{FailureKind, PublishFailure};
pub use inbox::{
    ensure_transaction_usable, process_once, recorded_in_this_transaction, was_processed,
};
pub use metrics::{
    MAX_EVENT_TYPE_LABEL_BYTES, MAX_EVENT_TYPE_LABELS, OTHER_EVENT_TYPES, RelayMetrics,
};
#[doc(hidden)]
pub use migrate::migrate_up_to;
pub use migrate::{MigrationReport, SCHEMA_HISTORY_TABLE, migrate, schema_version};
pub use outbox_macros::OutboxEvent;
pub use pipeline::emit_with;
pub use preflight::{
    DatabaseReport, check_inbox_database, check_inbox_retention_database, check_listen_connection,
    check_relay_database,
};
pub use publisher::{
    ClaimedEvent, MAX_PUT_BACK, MIN_PUT_BACK, PUBLISH_OVERRUN, PublishOutcome, Publisher,
    UNAVAILABLE_RETRY_DELAY,
};
pub use relay::{
    BatchReport, CLAIM_IDLE_MARGIN, LISTENER_APPLICATION_NAME, MAX_BACKOFF, MAX_BATCH_MAX_BYTES,
    MAX_BATCH_SIZE, MAX_LAST_ERROR_CHARS, MAX_RETENTION, MAX_TIMEOUT, MAX_WORKER_RESTARTS,
    MIN_INTERVAL, RELAY_APPLICATION_NAME, Relay, RelayBuilder, RelayConfig,
    WAITING_APPLICATION_NAME, WAITING_LOCK, WORKER_RESTART_WINDOW,
};
pub use retention::{
    CLEANUP_BATCH_SIZE, INBOX_RETENTION_INTERVAL, MIN_INBOX_RETENTION, check_inbox_retention,
    cleanup, cleanup_inbox, cleanup_inbox_watched, cleanup_watched, run_inbox_retention,
};
pub use stats::{OutboxStats, stats};
pub use tokio_util::sync::CancellationToken;
