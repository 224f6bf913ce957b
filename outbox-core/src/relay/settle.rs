//! At shutdown, once the batches have ended: the events whose broker calls went on after their
//! publish returned ([`Publisher::settle`]) are marked published when those calls got them
//! accepted. Before, shutdown cut such calls, and their events, accepted or not, were sent again
//! after a restart (a slow destination's calls go on after a second: black-box run).

use std::time::Duration;

use outbox_queries::queries::relay as sql;
use uuid::Uuid;

use super::Inner;
use crate::publisher::Publisher;

/// How long the statement marking the settled events may take, on a connection of its own.
const MARK_TIMEOUT: Duration = Duration::from_secs(5);

/// Waits at most `within` for the publisher's calls going on, and marks the events they got
/// accepted (deletes them, with a zero retention). Failures are logged: those events are sent
/// again after a restart, as before.
pub(super) async fn settle_calls_going_on<P: Publisher>(inner: &Inner<P>, within: Duration) {
    let ids = inner.publisher.settle(within).await;
    if ids.is_empty() {
        return;
    }
    let delete = inner.config.deletes_on_ack();
    match tokio::time::timeout(MARK_TIMEOUT, mark(&inner.pool, &ids, delete)).await {
        Ok(Ok(settled)) => {
            tracing::info!(
                events = ids.len(),
                marked = settled.len(),
                "marked published the events whose calls ended after their publish"
            );
            if let Some(m) = &inner.metrics {
                for row in settled {
                    m.published(row.event_type, row.age_secs);
                }
            }
        }
        Ok(Err(e)) => tracing::warn!(
            events = ids.len(), error = %crate::error_chain(&e),
            "could not mark the events whose calls ended after their publish; they are sent \
             again after a restart"
        ),
        Err(_) => tracing::warn!(
            events = ids.len(),
            timeout_ms = MARK_TIMEOUT.as_millis() as u64,
            "marking the events whose calls ended after their publish timed out; they are sent \
             again after a restart"
        ),
    }
}

/// Marks (or deletes) `ids`, on a connection taken out of the pool: closed when dropped, a
/// statement cut by the time-out does not go back to it.
async fn mark(
    pool: &deadpool_postgres::Pool,
    ids: &[Uuid],
    delete: bool,
) -> Result<Vec<sql::SettledRow>, crate::Error> {
    let client = deadpool_postgres::Object::take(pool.get().await.map_err(crate::Error::from)?);
    let rows = if delete {
        sql::delete_outbox_settled()
            .bind(&*client, &ids)
            .all()
            .await?
    } else {
        sql::mark_outbox_settled()
            .bind(&*client, &ids)
            .all()
            .await?
    };
    Ok(rows)
}
