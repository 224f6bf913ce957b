//! The opt-in partitioned layout of `outbox_events`, whose retention costs O(partitions), not
//! O(rows).
//!
//! With it, `outbox_events` is range-partitioned on `created_at` (one partition per UTC day or
//! hour), keeping the columns, the view, the trigger and what every query means. Retention then
//! detaches and drops whole partitions instead of deleting rows one by one: no WAL per row, no dead
//! tuples, no index bloat. The plain layout stays the default.
//!
//! - [`migrate_partitioned`] applies the schema and converts the table (new or existing; an existing
//!   table's unpublished rows move over, its published rows stay in `outbox_events_legacy` until
//!   they are past the retention).
//! - [`maintain`] creates partitions ahead and retires the expired ones; the [`Relay`](crate::Relay)
//!   runs it every minute (leader-elected: one relay does the work), `outbox partitions maintain`
//!   from cron.
//! - [`partition_stats`] says what maintenance found, for `outbox stats`; [`layout`] which layout a
//!   database has.
//!
//! ```no_run
//! # async fn run(pool: deadpool_postgres::Pool) -> Result<(), Box<dyn std::error::Error>> {
//! use outbox_core::partition::{self, Granularity, MaintainOptions};
//! let mut client = pool.get().await?;
//! partition::migrate_partitioned(&mut client, Granularity::Daily, None).await?;
//! let week = std::time::Duration::from_secs(7 * 86_400);
//! let report = partition::maintain(&client, &MaintainOptions::new().retention(Some(week))).await?;
//! println!("created {} partitions, dropped {:?}", report.created, report.dropped);
//! # Ok(()) }
//! ```
//!
//! Design (the README's "Partitioned outbox" section has the whole story): the primary key is
//! `(id, created_at)`, because a partitioned table's unique keys must include the partition key,
//! so the id's uniqueness across partitions rests on the ids being random UUIDs (version 7, made by
//! `emit`, or the column's default `outbox_uuidv7()`); there is no DEFAULT
//! partition (PostgreSQL refuses `DETACH … CONCURRENTLY` while one exists) but a `MAXVALUE` tail
//! partition as the safety net, empty as long as maintenance runs and drained back when it is not.

mod ddl;
mod granularity;
mod lock_budget;
mod maintain;
mod retire;
mod stats;

pub use granularity::{AHEAD, Granularity};
pub use lock_budget::CONCURRENT_CLAIMS;
pub(crate) use maintain::refusal as maintenance_refusal;
pub use maintain::{
    DEFAULT_DRAIN_LOCK_TIMEOUT, DEFAULT_SETTLE_TIMEOUT, KeptPartition, MAINTENANCE_LOCK_KEY,
    MaintainOptions, MaintenanceReport, maintain,
};
pub use stats::{PartitionInfo, PartitionStats, list_partitions, partition_stats};

pub use crate::migrate::migrate_partitioned;

use outbox_queries::queries::partition as sql;

use crate::error::Error;

/// Whether `outbox_events` in this database has the partitioned layout (and with which
/// granularity). `None` on the plain layout.
pub async fn layout<C: crate::GenericClient>(client: &C) -> Result<Option<Granularity>, Error> {
    let settings = sql::partitioning_settings().bind(client).opt().await?;
    settings
        .map(|s| s.granularity.parse())
        .transpose()
        .map_err(|e: Error| e.context("outbox_partitioning"))
}
