//! The events whose broker calls went on after their publish returned are marked published when
//! those calls got them accepted: while the relay runs, as the calls end ([`Publisher::settled`]),
//! and at shutdown, once the batches have ended, after waiting for them ([`Publisher::settle`]).
//! Before, shutdown cut such calls, and their events, accepted or not, were sent again after a
//! restart (a slow destination's calls go on after a second: black-box run); and while running,
//! an event was marked only at its next claim, so it was put back for a guess of its call's time,
//! and another relay claiming it when the call ran longer sent it again (black-box run: 686
//! duplicates of 2 000 events with two relays and a queue answering in 4-7 s).

use std::sync::Arc;
use std::time::Duration;

use outbox_queries::queries::relay as sql;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::Inner;
use crate::publisher::Publisher;

/// How long the statement marking the settled events may take, on a connection of its own.
const MARK_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the running relay asks its publisher for the events settled since ([`Publisher::settled`]).
const SETTLED_EVERY: Duration = Duration::from_millis(250);

/// Failures to mark settled events are logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// While the relay runs: marks the events the publisher's calls that went on after their publish
/// got accepted, as those calls end, until `stop`. Failures are logged (at most once a minute):
/// those events are sent again at their next claim, as before.
pub(super) async fn mark_as_calls_end<P: Publisher>(inner: Arc<Inner<P>>, stop: CancellationToken) {
    let mut warned: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(SETTLED_EVERY) => {}
        }
        let ids = inner.publisher.settled();
        if ids.is_empty() {
            continue;
        }
        let error = match mark_settled(&inner, &ids).await {
            Ok(()) => continue,
            Err(error) => error,
        };
        if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            warned = Some(tokio::time::Instant::now());
            tracing::warn!(
                events = ids.len(),
                error,
                "could not mark the events whose calls ended after their publish; they are sent \
                 again at their next claim"
            );
        }
    }
}

/// Marks `ids` published (deletes them, with a zero retention) and counts them in the metrics;
/// what went wrong, if anything.
async fn mark_settled<P: Publisher>(inner: &Inner<P>, ids: &[Uuid]) -> Result<(), String> {
    let delete = inner.config.deletes_on_ack();
    match tokio::time::timeout(MARK_TIMEOUT, mark(&inner.pool, ids, delete)).await {
        Ok(Ok(settled)) => {
            if let Some(m) = &inner.metrics {
                for row in settled {
                    m.published(row.event_type, row.age_secs);
                }
            }
            Ok(())
        }
        Ok(Err(e)) => Err(crate::error_chain(&e)),
        Err(_) => Err(format!("timed out after {} ms", MARK_TIMEOUT.as_millis())),
    }
}

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
