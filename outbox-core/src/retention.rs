//! Retention: deleting processed events in short, bounded statements.

use std::time::Duration;

use crate::client::GenericClient;
use outbox_queries::queries::admin as sql;
use outbox_queries::queries::inbox as inbox_sql;
use tokio_util::sync::CancellationToken;

use crate::connect::WatchedClient;
use crate::error::Error;
use crate::relay::pool_sessions::PoolSessions;
use crate::relay::stall_watch;

/// What the inbox retention's connection is called in the log.
const WHAT: &str = "inbox retention connection";

/// Rows deleted per statement: short statements, no long locks.
pub const CLEANUP_BATCH_SIZE: i64 = 1_000;

/// Deletes processed events older than `older_than` (by `processed_at`, on the database clock), in
/// batches of [`CLEANUP_BATCH_SIZE`], each its own statement. Pending and dead-lettered events are
/// never touched. Returns how many rows were deleted; a failure after some batches says how many
/// those deleted (each commits on its own).
pub async fn cleanup<C: GenericClient>(client: &C, older_than: Duration) -> Result<u64, Error> {
    let secs = older_than.as_secs_f64();
    in_batches(|| delete_processed_batch(client, secs)).await
}

/// [`cleanup`] on a [`WatchedClient`], each batch's answer watched
/// ([`WatchedClient::answer`]): a connection that stalls fails the cleanup with an
/// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) error that says how many rows the batches
/// before it deleted (watching the whole cleanup lost that count).
pub async fn cleanup_watched(conn: &WatchedClient, older_than: Duration) -> Result<u64, Error> {
    let secs = older_than.as_secs_f64();
    in_batches(|| conn.answer(delete_processed_batch(conn.client(), secs))).await
}

/// One batch of [`cleanup`]: how many rows it deleted.
async fn delete_processed_batch<C: GenericClient>(client: &C, secs: f64) -> Result<usize, Error> {
    Ok(sql::delete_processed_before()
        .bind(client, &secs, &CLEANUP_BATCH_SIZE)
        .all()
        .await?
        .len())
}

/// Runs `delete_batch` (one statement deleting at most [`CLEANUP_BATCH_SIZE`] rows, returning how
/// many it deleted) until a batch comes back short; returns the total. A failure after some
/// batches says how many rows those deleted: they are gone (each batch commits on its own).
async fn in_batches<F, Fut>(mut delete_batch: F) -> Result<u64, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<usize, Error>>,
{
    let mut total = 0u64;
    loop {
        let deleted = delete_batch().await.map_err(|e| match total {
            0 => e,
            n => e.context(format_args!(
                "{n} rows deleted (committed) before this batch failed"
            )),
        })?;
        total += deleted as u64;
        if (deleted as i64) < CLEANUP_BATCH_SIZE {
            return Ok(total);
        }
    }
}

/// Deletes the consumer inbox's records (`processed_events`, written by
/// [`process_once`](crate::process_once)) older than `older_than`, by when they were recorded on the
/// database clock, in batches of [`CLEANUP_BATCH_SIZE`], each its own statement. Returns how many
/// were deleted.
///
/// A record is what makes a redelivered event a duplicate: keep records longer than a message can
/// still arrive — the queue's message retention (SQS: up to 14 days) plus how long the relay may
/// keep retrying an event. An event redelivered after its record was deleted is processed again.
/// A retention under [`MIN_INBOX_RETENTION`] is refused ([`check_inbox_retention`]).
pub async fn cleanup_inbox<C: GenericClient>(
    client: &C,
    older_than: Duration,
) -> Result<u64, Error> {
    check_inbox_retention(older_than)?;
    let secs = older_than.as_secs_f64();
    in_batches(|| delete_inbox_batch(client, secs)).await
}

/// [`cleanup_inbox`] on a [`WatchedClient`], each batch's answer watched, as
/// [`cleanup_watched`] does.
pub async fn cleanup_inbox_watched(
    conn: &WatchedClient,
    older_than: Duration,
) -> Result<u64, Error> {
    check_inbox_retention(older_than)?;
    let secs = older_than.as_secs_f64();
    in_batches(|| conn.answer(delete_inbox_batch(conn.client(), secs))).await
}

/// One batch of [`cleanup_inbox`]: how many records it deleted.
async fn delete_inbox_batch<C: GenericClient>(client: &C, secs: f64) -> Result<usize, Error> {
    Ok(inbox_sql::delete_processed_events_before()
        .bind(client, &secs, &CLEANUP_BATCH_SIZE)
        .all()
        .await?
        .len())
}

/// The shortest inbox retention [`cleanup_inbox`] accepts: one hour. Shorter is below any
/// queue's sensible redelivery window, and `0s` (or `30m` typed for 30 days) would empty the
/// dedupe table and let every redelivered event be processed again.
pub const MIN_INBOX_RETENTION: Duration = Duration::from_secs(3600);

/// Checks an inbox retention: an [`ErrorKind::Config`](crate::ErrorKind::Config) error under
/// [`MIN_INBOX_RETENTION`].
pub fn check_inbox_retention(older_than: Duration) -> Result<(), Error> {
    if older_than < MIN_INBOX_RETENTION {
        return Err(Error::config(format!(
            "an inbox retention of {} s is too short: at least 1 h, and longer than a \
             message can be redelivered (the queue's message retention, up to 14 days on SQS)",
            older_than.as_secs_f64()
        )));
    }
    Ok(())
}

/// How often [`run_inbox_retention`] runs [`cleanup_inbox`].
pub const INBOX_RETENTION_INTERVAL: Duration = Duration::from_secs(60);

/// Runs [`cleanup_inbox`] now and then every [`INBOX_RETENTION_INTERVAL`] until `shutdown` is
/// cancelled; failures are logged and tried again on the next round. A round's connection is
/// watched from another of `pool`'s: one that stalls without closing (a middlebox holding its
/// bytes) is given up with a warning and its server session ended, rather than waited on until
/// shutdown. Spawn it in a consumer
/// service (or use `outbox relay --inbox-retention` when the inbox shares the relay's database).
pub async fn run_inbox_retention(
    pool: deadpool_postgres::Pool,
    older_than: Duration,
    shutdown: CancellationToken,
) {
    if let Err(e) = check_inbox_retention(older_than) {
        tracing::error!(error = %crate::error_chain(&e), "inbox retention not started");
        return;
    }
    // The sessions of this pool's connections, as the watch learns them.
    let known = PoolSessions::default();
    loop {
        match pool.get().await {
            Ok(client) => {
                // Watched: a connection that stalls (a middlebox holding its bytes) is given up
                // rather than waited on until shutdown.
                let cleanup = cleanup_inbox(&**client, older_than);
                let earlier = known.forget(&client);
                match stall_watch::watched(&pool, &known, &client, earlier, WHAT, cleanup).await {
                    Ok(Ok(0)) => {}
                    Ok(Ok(n)) => {
                        tracing::info!(deleted = n, "inbox retention deleted processed_events")
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %crate::error_chain(&e), "inbox retention failed")
                    }
                    Err(e) => {
                        // Closed, not back to the pool (its session was ended by the watch).
                        drop(deadpool_postgres::Object::take(client));
                        tracing::warn!(error = %crate::error_chain(&e), "inbox retention given up; the next round connects anew")
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %crate::error_chain(&e), "inbox retention could not get a connection")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(INBOX_RETENTION_INTERVAL) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cleanup cut short says how many rows its committed batches deleted (it said only why it
    /// failed, and an operator could not tell whether anything had been deleted).
    #[tokio::test]
    async fn a_failure_after_some_batches_says_what_they_deleted() {
        let full = CLEANUP_BATCH_SIZE as usize;
        let mut calls = 0;
        let e = in_batches(|| {
            calls += 1;
            let n = calls;
            async move {
                if n <= 2 {
                    Ok(full)
                } else {
                    Err(Error::new(crate::ErrorKind::Database, "connection lost"))
                }
            }
        })
        .await
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "database error: {} rows deleted (committed) before this batch failed: \
                 connection lost",
                2 * full
            )
        );
        // Failing at once: the error as it is.
        let e = in_batches(|| async { Err(Error::new(crate::ErrorKind::Database, "down")) })
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "database error: down");
        assert_eq!(in_batches(|| async { Ok(3) }).await.unwrap(), 3);
    }
}
