//! `outbox cleanup`.

use crate::output::out;
use std::time::Duration;

use crate::{Failure, db, usage};

/// Deletes old processed rows and/or old inbox records, in bounded batches.
pub async fn run(
    url: Option<&str>,
    older_than: Option<Duration>,
    inbox_older_than: Option<Duration>,
) -> Result<(), Failure> {
    // Refused before anything is deleted.
    if let Some(inbox) = inbox_older_than {
        outbox_core::check_inbox_retention(inbox).map_err(usage)?;
    }
    let conn = db::connect_bounded(url).await?;
    let client = conn.client();
    if let Some(older_than) = older_than {
        // Each batch watched: a stall after some says how many rows those deleted.
        let deleted = outbox_core::cleanup_watched(&conn, older_than).await?;
        out!(
            "deleted {deleted} processed events older than {}",
            crate::duration::display(older_than)
        );
        // After a conversion to partitions, the plain table's published rows are elsewhere: a
        // black-box run read "deleted 0" as nothing left. Best effort: a role that may not read
        // the partitioning's settings just goes without the line.
        let partitions = conn.answer(outbox_core::partition::partition_stats(client));
        if let Ok(Some(partitions)) = partitions.await {
            if partitions.legacy_table {
                out!(
                    "outbox_events_legacy, the published rows of the table converted to \
                     partitions, is not cleaned up here: `outbox partitions maintain --retention \
                     …` (or a relay with --retention) drops it once they are past the retention"
                );
            }
        }
    }
    if let Some(older_than) = inbox_older_than {
        let deleted = outbox_core::cleanup_inbox_watched(&conn, older_than).await?;
        out!(
            "deleted {deleted} inbox records (processed_events) older than {}",
            crate::duration::display(older_than)
        );
    }
    Ok(())
}
