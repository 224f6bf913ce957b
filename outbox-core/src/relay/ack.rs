//! Acknowledging a batch: the published events marked processed and the failures recorded, one
//! statement each, in the claiming transaction and pipelined with its `COMMIT`.
//!
//! Both statements take the rows' creation times with their ids, and the smallest and largest of
//! them: on the partitioned layout PostgreSQL then touches only the partitions in that range (pruned
//! when the statement starts, also with the generic plan of the prepared statement) instead of
//! probing every partition's primary key.

use chrono::{DateTime, Utc};
use outbox_queries::queries::relay as sql;
use uuid::Uuid;

use super::outcome::{Acked, Failure};
use super::transaction::ClaimTransaction;
use crate::error::Error;

/// The smallest and largest of `times`; `None` when there are none.
pub(crate) fn time_bounds(
    times: impl IntoIterator<Item = DateTime<Utc>>,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    times.into_iter().fold(None, |bounds, t| match bounds {
        None => Some((t, t)),
        Some((lo, hi)) => Some((lo.min(t), hi.max(t))),
    })
}

/// How the published events are acknowledged: marked processed, or (a zero retention) deleted.
enum Acknowledge {
    Mark(sql::MarkOutboxProcessedStmt),
    Delete(sql::DeleteOutboxPublishedStmt),
}

/// Marks the published events (or, with `delete` — a zero retention — deletes them), records the
/// failures and commits, in one round trip: both statements are prepared first (from the
/// connection's statement cache after the first batch), so that each is sent on its first poll,
/// ahead of the `COMMIT` that [`ClaimTransaction::commit_with`] sends behind them.
pub(crate) async fn record_and_commit(
    tx: &mut ClaimTransaction,
    published: &[Acked],
    failures: &[Failure],
    delete: bool,
) -> Result<(), Error> {
    let published_bounds = time_bounds(published.iter().map(|a| a.created_at));
    let failure_bounds = time_bounds(failures.iter().map(|f| f.created_at));
    // Prepared first (from the connection's cache after its first batch), bounded like every wait
    // on the database: a connection cut off mid-batch must not hang its worker here.
    let (acknowledge, fail) = tx
        .run(async |client| {
            let acknowledge = match (published_bounds, delete) {
                (None, _) => None,
                (Some(bounds), true) => Some((
                    Acknowledge::Delete(sql::delete_outbox_published().prepare(client).await?),
                    bounds,
                )),
                (Some(bounds), false) => Some((
                    Acknowledge::Mark(sql::mark_outbox_processed().prepare(client).await?),
                    bounds,
                )),
            };
            let fail = match failure_bounds {
                None => None,
                Some(bounds) => {
                    Some((sql::record_outbox_failures().prepare(client).await?, bounds))
                }
            };
            Ok((acknowledge, fail))
        })
        .await?;
    let ids: Vec<Uuid> = published.iter().map(|a| a.id).collect();
    let failed: Vec<Uuid> = failures.iter().map(|f| f.id).collect();
    let created_ats: Vec<DateTime<Utc>> = failures.iter().map(|f| f.created_at).collect();
    let errors: Vec<&str> = failures.iter().map(|f| f.error.as_str()).collect();
    let delays: Vec<f64> = failures.iter().map(|f| f.delay_secs).collect();
    let dead: Vec<bool> = failures.iter().map(|f| f.dead).collect();
    let counted: Vec<bool> = failures.iter().map(|f| f.counted).collect();
    // About what the statements send: the ids and the errors dominate.
    let request_bytes =
        16 * (ids.len() + failed.len()) + errors.iter().map(|e| e.len()).sum::<usize>();
    tx.commit_with(request_bytes, async |client| {
        let acknowledged = async {
            match &acknowledge {
                Some((Acknowledge::Mark(stmt), (oldest, newest))) => {
                    stmt.bind(client, &ids, oldest, newest).all().await?;
                }
                Some((Acknowledge::Delete(stmt), (oldest, newest))) => {
                    stmt.bind(client, &ids, oldest, newest).all().await?;
                }
                None => {}
            }
            Ok::<_, Error>(())
        };
        let recorded = async {
            if let Some((stmt, (oldest, newest))) = &fail {
                stmt.bind(
                    client,
                    &failed,
                    &created_ats,
                    &errors,
                    &delays,
                    &dead,
                    &counted,
                    oldest,
                    newest,
                )
                .all()
                .await?;
            }
            Ok::<_, Error>(())
        };
        // Polled in order: the mark is sent, then the failures, then (by the caller) `COMMIT`,
        // which is not sent when either fails before it is sent (`try_join` fails at once then).
        futures::future::try_join(acknowledged, recorded)
            .await
            .map(|_| ())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_the_smallest_and_largest_time() {
        assert_eq!(time_bounds(Vec::new()), None);
        let t = |s: i64| DateTime::<Utc>::from_timestamp(s, 0).expect("a valid time");
        assert_eq!(time_bounds([t(5)]), Some((t(5), t(5))));
        assert_eq!(time_bounds([t(5), t(2), t(9), t(4)]), Some((t(2), t(9))));
    }
}
