//! Whether the partitions are too many for the server's lock table.
//!
//! A claim (and every other statement on `outbox_events` that is not pruned by `created_at`)
//! locks each attached partition and each of its indexes until its transaction ends. Those locks
//! live in PostgreSQL's shared lock table, `max_locks_per_transaction × (max_connections +
//! max_prepared_transactions)` slots for the whole server: with too many partitions, a few relay
//! workers fill it, and their claims — and other applications' transactions — fail with "out of
//! shared memory".

use outbox_queries::queries::partition as sql;

use crate::error::Error;

/// Claims assumed to run at once: two relays of four workers.
pub const CONCURRENT_CLAIMS: i64 = 8;

/// A warning when [`CONCURRENT_CLAIMS`] claims would take more than the server's whole lock table;
/// `None` when they fit (or the table is not partitioned).
pub(super) async fn check(client: &tokio_postgres::Client) -> Result<Option<String>, Error> {
    let b = sql::partition_lock_budget().bind(client).one().await?;
    let per_claim = b.partitions.saturating_mul(1 + b.indexes);
    if b.partitions == 0 || per_claim.saturating_mul(CONCURRENT_CLAIMS) <= b.lock_slots {
        return Ok(None);
    }
    Ok(Some(format!(
        "{} partitions: each claim locks {per_claim} relations (partitions and their indexes), and \
         {CONCURRENT_CLAIMS} claims at once would exceed the server's lock table ({} slots: \
         max_locks_per_transaction × (max_connections + max_prepared_transactions)), failing \
         with \"out of shared memory\"; use fewer partitions ahead, a shorter retention or daily \
         partitions, or raise max_locks_per_transaction",
        b.partitions, b.lock_slots
    )))
}
