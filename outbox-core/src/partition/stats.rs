//! What `outbox stats` says about the partitions.

use outbox_queries::queries::partition as sql;

use crate::client::GenericClient;
use crate::error::Error;

/// The partitioned layout's figures (see [`partition_stats`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct PartitionStats {
    /// `daily` or `hourly`.
    pub granularity: String,
    /// Partitions holding events (the head and one per period), without the tail.
    pub partitions: i64,
    /// Events in the tail partition: written past the partitions created ahead, because
    /// maintenance has not run for that long. Maintenance moves them back.
    pub tail_events: i64,
    /// Partitions past the retention that the last maintenance kept because they still hold a
    /// pending event or a dead letter (or rows published too recently).
    pub kept_partitions: i32,
    /// The events that keep them.
    pub kept_events: i64,
    /// When maintenance last made the partitions ahead, the relay's included (`None`: never).
    /// The kept figures above are the last retention's.
    pub maintained_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Whether `outbox_events_legacy` (the plain table's published rows after a conversion)
    /// still exists.
    pub legacy_table: bool,
    /// Whether the tail partition (the safety net for rows past the partitions made ahead) is
    /// attached. A maintenance run stopped between its detach and the new tail's leaves it
    /// detached: rows past the partitions made ahead then fail until maintenance runs again.
    pub tail_attached: bool,
}

/// The partitioned layout's figures; `None` on the plain layout.
pub async fn partition_stats<C: GenericClient>(
    client: &C,
) -> Result<Option<PartitionStats>, Error> {
    // The plain layout has nothing to report: not even a look at `outbox_partitioning`, which a
    // read-only role there may not read.
    if !sql::events_partitioned().bind(client).one().await? {
        return Ok(None);
    }
    Ok(sql::partition_stats()
        .bind(client)
        .opt()
        .await?
        .map(|s| PartitionStats {
            granularity: s.granularity,
            partitions: s.partitions,
            tail_events: s.tail_events,
            kept_partitions: s.kept_partitions,
            kept_events: s.kept_events,
            maintained_at: s.maintained_at,
            legacy_table: s.legacy_table,
            tail_attached: s.tail_attached,
        }))
}

/// One partition of `outbox_events` (see [`list_partitions`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct PartitionInfo {
    /// Its table's name.
    pub name: String,
    /// Where its range starts (`None`: MINVALUE, the head).
    pub lo: Option<chrono::DateTime<chrono::Utc>>,
    /// Where its range ends, exclusive (`None`: MAXVALUE, the tail).
    pub hi: Option<chrono::DateTime<chrono::Utc>>,
    /// A `DETACH … CONCURRENTLY` was interrupted; the next maintenance finishes it.
    pub detach_pending: bool,
    /// Rows, as the planner's statistics estimate them, or, for a partition never analysed, as
    /// the cumulative statistics count the rows written to it; `None` when neither knows (rows
    /// that came with the partition, statistics reset: `ANALYZE`, or autovacuum, makes the
    /// estimate).
    pub estimated_rows: Option<i64>,
}

/// The partitions, oldest first; empty on the plain layout.
pub async fn list_partitions<C: GenericClient>(client: &C) -> Result<Vec<PartitionInfo>, Error> {
    Ok(sql::partition_list()
        .bind(client)
        .all()
        .await?
        .into_iter()
        .map(|p| PartitionInfo {
            name: p.name,
            lo: p.lo,
            hi: p.hi,
            detach_pending: p.detach_pending,
            estimated_rows: p.estimated_rows,
        })
        .collect())
}
