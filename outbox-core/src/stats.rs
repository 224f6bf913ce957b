//! The outbox's state at a glance.

use outbox_queries::client::GenericClient;
use outbox_queries::queries::admin as sql;

use crate::error::Error;

/// Counts of the outbox's state, from one cheap query over partial indexes.
pub use outbox_queries::queries::admin::OutboxStats;

/// Reads the outbox's state: pending events (due now and waiting for a retry), dead letters,
/// the oldest pending event's age, aggregates blocked by a dead letter, and events published in the
/// last hour.
pub async fn stats<C: GenericClient>(client: &C) -> Result<OutboxStats, Error> {
    Ok(sql::outbox_stats().bind(client).one().await?)
}
