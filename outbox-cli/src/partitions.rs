//! `outbox partitions maintain | list`.

use crate::output::out;
use outbox_core::partition::{self, MaintainOptions};

use crate::cli::PartitionsCommand;
use crate::{Failure, db};

/// What both commands say on the plain layout (said by `maintain` as a configuration error, it
/// read like a usage error, whose exit status is 2: black-box run).
const NOT_PARTITIONED: &str =
    "outbox_events is not partitioned: run `outbox migrate --partitioned` first";

/// Runs one partition command.
pub async fn run(url: Option<&str>, cmd: PartitionsCommand) -> Result<(), Failure> {
    match cmd {
        PartitionsCommand::Maintain {
            retention,
            drain_lock_timeout,
            settle_timeout,
            json,
        } => {
            // It bounds its own lock waits (a drain's lock timeout, the settle timeout).
            let client = db::connect(url).await?;
            partitioned(&client).await?;
            let options = MaintainOptions::new()
                .retention(retention)
                .drain_lock_timeout(drain_lock_timeout)
                .settle_timeout(settle_timeout);
            let r = partition::maintain(&client, &options).await?;
            if json {
                out!("{}", serde_json::to_string_pretty(&r)?);
            } else if r.skipped {
                out!("another maintainer is at work; nothing done");
            } else {
                out!("created {} partitions ahead", r.created);
                if r.drained > 0 {
                    out!("moved {} events out of the tail partition", r.drained);
                }
                for name in &r.dropped {
                    out!("dropped {name}");
                }
                for k in &r.kept {
                    out!(
                        "kept {} past the retention: {} {} to keep (pending, dead-lettered, or published within the retention)",
                        k.name,
                        k.leftovers,
                        crate::output::rows(k.leftovers)
                    );
                }
                for name in &r.waiting {
                    out!(
                        "left {name} for the next run: a transaction that began before its end is still open"
                    );
                }
                if r.legacy_dropped {
                    out!("dropped outbox_events_legacy");
                } else if let Ok(Some(stats)) = partition::partition_stats(&client).await {
                    // Said, not left to `stats` ("present"): a black-box run could not tell why it
                    // stayed. Best effort, like cleanup's line.
                    if stats.legacy_table {
                        out!(
                            "{}",
                            if retention.is_some() {
                                "kept outbox_events_legacy (the published rows from before the \
                                 conversion to partitions): some are within the retention; it \
                                 is dropped once they are all older"
                            } else {
                                "outbox_events_legacy (the published rows from before the \
                                 conversion to partitions) stays: --retention drops it once they \
                                 are all older than the retention"
                            }
                        );
                    }
                }
            }
        }
        PartitionsCommand::List { json } => {
            let conn = db::connect_bounded(url).await?;
            let client = conn.client();
            let list = conn
                .answer(async {
                    partitioned(client).await?;
                    Ok::<_, Failure>(partition::list_partitions(client).await?)
                })
                .await?;
            if json {
                out!("{}", serde_json::to_string_pretty(&list)?);
                return Ok(());
            }
            let bound = |b: Option<chrono::DateTime<chrono::Utc>>, open: &str| {
                b.map_or_else(
                    || open.to_string(),
                    |t| t.format("%Y-%m-%d %H:%M").to_string(),
                )
            };
            out!(
                "{:<28} {:<17} {:<17} {:>12}",
                "partition",
                "from (UTC)",
                "to (UTC)",
                "rows (est.)"
            );
            for p in &list {
                let pending = if p.detach_pending {
                    "  (detach pending)"
                } else {
                    ""
                };
                out!(
                    "{:<28} {:<17} {:<17} {:>12}{pending}",
                    p.name,
                    bound(p.lo, "MINVALUE"),
                    bound(p.hi, "MAXVALUE"),
                    p.estimated_rows
                        .map_or_else(|| "unknown".to_owned(), |n| n.to_string())
                );
            }
        }
    }
    Ok(())
}

/// Fails with [`NOT_PARTITIONED`] on the plain layout.
async fn partitioned(client: &tokio_postgres::Client) -> Result<(), Failure> {
    match partition::layout(client).await? {
        Some(_) => Ok(()),
        None => Err(NOT_PARTITIONED.into()),
    }
}
