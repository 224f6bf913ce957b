//! The orders example: a small order service built on the transactional outbox, as a user of the
//! `outbox` crates would write it.
//!
//! - [`args`] is the command-line parsing the binaries (`demo`, `fanout`) share.
//! - [`migrate()`] applies the service's own schema (`migrations/*.sql`, next to the outbox's).
//! - [`events`] are the order aggregate's domain events, derived with `#[derive(OutboxEvent)]`.
//! - [`service`] writes orders through the queries cornucopia generated from `queries/*.sql` (the
//!   `orders-queries` crate) and emits the matching event in the same transaction.
//! - [`consumer`] reads the events back from SQS and applies each one once, in order, to a read
//!   model (`order_summaries`), with the outbox's consumer inbox
//!   ([`outbox_core::process_once`]).
//! - [`demo`] puts it all together with the relay: `scripts/demo` runs it.
//! - [`fanout`] publishes the same events to an SNS topic that fans them out to two queues: the
//!   read model's and the [`shipping`] service's, each consumer applying every event once:
//!   `scripts/demo --fan-out` runs it.

pub mod args;
pub mod consumer;
pub mod demo;
pub mod events;
pub mod fanout;
pub mod migrate;
pub mod service;
pub mod shipping;

pub use migrate::migrate;

/// The errors of this example: anything, boxed. (A real service would have its own error type.)
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// `error` and its sources on one line (the `Display` of a database error alone is only
/// "db error").
pub use outbox_core::error_chain;
