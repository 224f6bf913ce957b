//! Maintenance, step 3: expired partitions detached concurrently and dropped, once no transaction
//! that could still write into them is open and unless they hold leftovers.

use std::time::{Duration, Instant};

use outbox_queries::queries::partition as sql;

use super::ddl;
use super::maintain::{KeptPartition, MaintenanceReport};
use crate::error::Error;

/// How often retirement asks again whether the transactions it waits for have finished.
const SETTLE_POLL: Duration = Duration::from_millis(25);

pub(super) async fn retire(
    client: &tokio_postgres::Client,
    retention: Duration,
    settle_timeout: Duration,
    report: &mut MaintenanceReport,
) -> Result<(), Error> {
    let retention_secs = retention.as_secs_f64();
    settle(client, retention_secs, settle_timeout).await?;
    let expired = sql::partitions_expired()
        .bind(client, &retention_secs)
        .all()
        .await?;
    for p in expired {
        if p.detach_pending {
            // An interrupted retirement: finish the detach; drop_detached drops the partition or,
            // when it got leftovers or may still be written to, attaches it back.
            ddl::finalize_detach(client, &p.name).await?;
            drop_detached(client, &p, retention_secs, report).await?;
        } else if p.leftovers > 0 {
            report.kept.push(KeptPartition {
                name: p.name,
                leftovers: p.leftovers,
                unpublished: p.unpublished,
            });
        } else if p.settling {
            report.waiting.push(p.name);
        } else if !super::maintain::lockers_end(client, settle_timeout).await? {
            // A transaction holds the table (pg_dump, a long report): the detach would wait for
            // it, holding this run (and the maintenance lock) that long.
            report.waiting.push(p.name);
        } else {
            ddl::detach_concurrently(client, &p.name).await?;
            drop_detached(client, &p, retention_secs, report).await?;
        }
    }
    orphans(client, retention_secs, report).await?;
    if !report.kept.is_empty() {
        let kept: Vec<String> = report
            .kept
            .iter()
            .map(|k| format!("{}: {} to keep", k.name, k.leftovers))
            .collect();
        // Kept for pending events or dead letters: they keep it for as long as they stay (a
        // warning, each run). Kept only for rows published within the retention (a converted
        // backlog's head, after every conversion): they go once the retention passes.
        if report.kept.iter().any(|k| k.unpublished > 0) {
            tracing::warn!(kept = %kept.join(", "),
                "partition maintenance kept expired partitions that still hold rows to keep: pending, dead-lettered, or published within the retention");
        } else {
            // Each run (a relay's, every minute) until the retention passes: not worth a line.
            tracing::debug!(kept = %kept.join(", "),
                "partition maintenance kept expired partitions for rows published within the retention; they go once it passes");
        }
    }
    if !report.waiting.is_empty() {
        tracing::info!(waiting = ?report.waiting,
            "partition maintenance left expired partitions for a later run: a transaction that began \
             before their end is still open");
    }
    report.legacy_dropped = sql::partitions_drop_legacy()
        .bind(client, &retention_secs)
        .one()
        .await?;
    if report.legacy_dropped {
        // As a partition's drop is logged (black-box run: a relay dropped the converted table's
        // legacy rows without a word).
        tracing::info!(
            "partition maintenance dropped outbox_events_legacy (the rows from before the \
             conversion to partitions, all published and past the retention)"
        );
    }
    Ok(())
}

/// Advances the horizon before which every transaction has ended until it reaches the end of the
/// newest expired partition, or `timeout` passes. Each call is one short statement; nothing is
/// held between them.
async fn settle(
    client: &tokio_postgres::Client,
    retention_secs: f64,
    timeout: Duration,
) -> Result<(), Error> {
    // A timeout too large for the clock means no limit (never a panic on a setting).
    let deadline = Instant::now().checked_add(timeout);
    loop {
        let Some(s) = sql::partitions_settle()
            .bind(client, &retention_secs)
            .opt()
            .await?
        else {
            return Ok(());
        };
        let reached = match (s.needed, s.settled_before) {
            (None, _) => true,
            (Some(needed), Some(settled)) => settled >= needed,
            (Some(_), None) => false,
        };
        let out_of_time = deadline.is_some_and(|d| Instant::now() + SETTLE_POLL > d);
        if reached || out_of_time {
            return Ok(());
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// Retires the orphans of an earlier run that stopped between a finished detach and the drop.
async fn orphans(
    client: &tokio_postgres::Client,
    retention_secs: f64,
    report: &mut MaintenanceReport,
) -> Result<(), Error> {
    let orphaned = sql::partitions_orphaned()
        .bind(client, &retention_secs)
        .all()
        .await?;
    for o in orphaned {
        let p = sql::PartitionsExpired {
            name: o.name,
            lo: o.lo,
            hi: o.hi,
            droppable: false,
            leftovers: 0,
            detach_pending: false,
            settling: false,
            unpublished: 0,
        };
        tracing::info!(partition = %p.name, "partition maintenance found an expired partition left detached");
        drop_detached(client, &p, retention_secs, report).await?;
    }
    Ok(())
}

async fn drop_detached(
    client: &tokio_postgres::Client,
    p: &sql::PartitionsExpired,
    retention_secs: f64,
    report: &mut MaintenanceReport,
) -> Result<(), Error> {
    let dropped = sql::partition_drop_detached()
        .bind(client, &p.name.as_str(), &p.lo, &p.hi, &retention_secs)
        .one()
        .await?;
    if dropped {
        tracing::info!(partition = %p.name, "partition maintenance dropped an expired partition");
        report.dropped.push(p.name.clone());
    } else if p.settling && p.leftovers == 0 {
        // Attached back: a transaction that began before its end may still write into it.
        report.waiting.push(p.name.clone());
    } else {
        // Attached back: it holds leftovers (some perhaps arrived since it was listed).
        let unpublished = sql::partition_unpublished()
            .bind(client, &p.name.as_str())
            .one()
            .await?;
        report.kept.push(KeptPartition {
            name: p.name.clone(),
            leftovers: p.leftovers.max(1),
            unpublished,
        });
    }
    Ok(())
}
