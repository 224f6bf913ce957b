//! Retention: deleting processed events in short, bounded statements.

use std::time::Duration;

use outbox_queries::client::GenericClient;
use outbox_queries::queries::admin as sql;

use crate::error::Error;

/// Rows deleted per statement: short statements, no long locks.
pub const CLEANUP_BATCH_SIZE: i64 = 1_000;

/// Deletes processed events older than `older_than` (by `processed_at`, on the database clock), in
/// batches of [`CLEANUP_BATCH_SIZE`], each its own statement. Pending and dead-lettered events are
/// never touched. Returns how many rows were deleted.
pub async fn cleanup<C: GenericClient>(client: &C, older_than: Duration) -> Result<u64, Error> {
    let secs = older_than.as_secs_f64();
    let mut total = 0u64;
    loop {
        let deleted = sql::delete_processed_before()
            .bind(client, &secs, &CLEANUP_BATCH_SIZE)
            .all()
            .await?
            .len();
        total += deleted as u64;
        if (deleted as i64) < CLEANUP_BATCH_SIZE {
            return Ok(total);
        }
    }
}
