//! Transactional outbox for PostgreSQL.
//!
//! Placeholder crate docs; replaced once the README example lands.

mod backoff;
mod dead_letters;
mod emit;
mod error;
mod event;
mod inbox;
pub mod message;
mod metrics;
mod migrate;
mod publisher;
mod relay;
mod retention;
mod stats;
pub mod trace;

#[doc(hidden)]
pub mod __private;

pub use backoff::{Backoff, Disposition, InfraBackoff, RetryPolicy};
pub use dead_letters::{
    DeadLetter, DeadLetterFilter, list_dead_letters, purge_dead_letters, retry_dead_letters,
};
pub use emit::{Emitter, emit, emit_all};
pub use error::{Error, ErrorKind, Result};
pub use event::OutboxEvent;
pub use inbox::process_once;
pub use metrics::RelayMetrics;
pub use migrate::{MigrationReport, SCHEMA_HISTORY_TABLE, migrate};
pub use outbox_macros::OutboxEvent;
pub use outbox_queries::client::GenericClient;
pub use publisher::{ClaimedEvent, PublishOutcome, Publisher};
pub use relay::{
    BatchReport, LISTENER_APPLICATION_NAME, MAX_BATCH_SIZE, Relay, RelayBuilder, RelayConfig,
};
pub use retention::{CLEANUP_BATCH_SIZE, cleanup};
pub use stats::{OutboxStats, stats};
pub use tokio_util::sync::CancellationToken;
