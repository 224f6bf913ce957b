//! Acknowledging a batch: the published events marked processed and the failures recorded, one
//! statement each, in the claiming transaction.
//!
//! Both statements take the rows' creation times with their ids, and the smallest and largest of
//! them: on the partitioned layout PostgreSQL then touches only the partitions in that range (pruned
//! when the statement starts, also with the generic plan of the prepared statement) instead of
//! probing every partition's primary key.

use chrono::{DateTime, Utc};
use outbox_queries::queries::relay as sql;
use uuid::Uuid;

use super::outcome::{Acked, Failure};
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

/// Marks the published events (or, with `delete` — a zero retention — deletes them) and records
/// the failures, one statement each.
pub(crate) async fn record(
    tx: &deadpool_postgres::Transaction<'_>,
    published: &[Acked],
    failures: &[Failure],
    delete: bool,
) -> Result<(), Error> {
    if let Some((oldest, newest)) = time_bounds(published.iter().map(|a| a.created_at)) {
        let ids: Vec<Uuid> = published.iter().map(|a| a.id).collect();
        if delete {
            sql::delete_outbox_published()
                .prepare(tx)
                .await?
                .bind(tx, &ids, &oldest, &newest)
                .all()
                .await?;
        } else {
            sql::mark_outbox_processed()
                .prepare(tx)
                .await?
                .bind(tx, &ids, &oldest, &newest)
                .all()
                .await?;
        }
    }
    if let Some((oldest, newest)) = time_bounds(failures.iter().map(|f| f.created_at)) {
        let ids: Vec<Uuid> = failures.iter().map(|f| f.id).collect();
        let created_ats: Vec<DateTime<Utc>> = failures.iter().map(|f| f.created_at).collect();
        let errors: Vec<&str> = failures.iter().map(|f| f.error.as_str()).collect();
        let delays: Vec<f64> = failures.iter().map(|f| f.delay_secs).collect();
        let dead: Vec<bool> = failures.iter().map(|f| f.dead).collect();
        let counted: Vec<bool> = failures.iter().map(|f| f.counted).collect();
        sql::record_outbox_failures()
            .prepare(tx)
            .await?
            .bind(
                tx,
                &ids,
                &created_ats,
                &errors,
                &delays,
                &dead,
                &counted,
                &oldest,
                &newest,
            )
            .all()
            .await?;
    }
    Ok(())
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
