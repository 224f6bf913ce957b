//! The relay's periodic housekeeping: partition maintenance on the partitioned layout, row
//! retention on the plain one.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::pool_sessions::PoolSessions;
use super::stall_watch;
use crate::error::{Error, ErrorKind};
use crate::partition::{self, MaintainOptions};
use crate::retention;

/// How often the relay runs housekeeping.
pub(crate) const INTERVAL: Duration = Duration::from_secs(60);

/// What the next round does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Look at the layout first: not known yet, or plain last time (the table may have been
    /// converted to the partitioned layout since, under running relays).
    Look,
    /// Partitioned: maintain (create ahead; retire with a retention).
    Maintain,
    /// Partitioned, but this role may not maintain it: delete rows with a retention.
    Rows,
}

/// Runs housekeeping now and then every `interval` until `shutdown`. Failures are logged and tried
/// again next round; nothing here can stop the relay. On the plain layout each round looks at the
/// layout again: relays started before `outbox migrate --partitioned` maintain the partitions
/// after it (they stopped for good before, and with nobody creating partitions ahead, every row
/// went to the tail partition within days).
pub(crate) async fn run(
    pool: deadpool_postgres::Pool,
    known: Arc<PoolSessions>,
    retention: Option<Duration>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    let mut mode = Mode::Look;
    loop {
        // A round can take a while (a retention delete, the wait for old transactions, a
        // concurrent detach): shutdown does not wait for it. Dropping it closes its connection,
        // which rolls back what it was doing; an interrupted detach is finished next time.
        mode = tokio::select! {
            _ = shutdown.cancelled() => return,
            next = round(&pool, &known, retention, mode) => next,
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// One round; returns the mode for the next. No time limit fits a round (a retention delete, a
/// detach waiting for old transactions may rightly take minutes), so its connection is watched
/// from another instead: one that stalls is given up, its server session ended, and the next
/// round connects anew (before, a stalled connection kept housekeeping waiting until shutdown,
/// and retention and the partitions made ahead stopped without a word).
async fn round(
    pool: &deadpool_postgres::Pool,
    known: &PoolSessions,
    retention: Option<Duration>,
    mode: Mode,
) -> Mode {
    // A connection of its own, closed afterwards: maintenance's election lock is a session lock
    // and must never go back to the pool.
    let (client, earlier) = match pool.get().await {
        // Its session as a claim learned it, if one did: it leaves the pool for good.
        Ok(c) => {
            let earlier = known.forget(&c);
            (deadpool_postgres::Object::take(c), earlier)
        }
        Err(e) => {
            tracing::warn!(error = %crate::error_chain(&e), "housekeeping could not get a connection");
            return mode;
        }
    };
    let work = work(&client, retention, mode);
    match stall_watch::watched(pool, known, &client, earlier, WHAT, work).await {
        Ok(next) => next,
        Err(e) => {
            tracing::warn!(error = %crate::error_chain(&e),
                "housekeeping round given up; the next connects anew");
            mode
        }
    }
}

/// What housekeeping's connection is called in the log.
const WHAT: &str = "housekeeping connection";

/// The round's work on its connection; returns the mode for the next.
async fn work(client: &tokio_postgres::Client, retention: Option<Duration>, mode: Mode) -> Mode {
    let (mode, plain) = match mode {
        Mode::Look => match partition::layout(client).await {
            Ok(Some(_)) => match partition::maintenance_refusal(client).await {
                Ok(None) => (Mode::Maintain, false),
                Ok(Some(refusal)) => {
                    tracing::info!(
                        "{refusal}: no partition maintenance here (run `outbox partitions \
                         maintain` as the owner from cron); retention deletes rows instead"
                    );
                    (Mode::Rows, false)
                }
                Err(e) => {
                    tracing::warn!(error = %crate::error_chain(&e), "housekeeping could not read the table's owner");
                    return Mode::Look;
                }
            },
            Ok(None) => (Mode::Rows, true),
            Err(e) if is_denied(&e) => {
                tracing::info!(
                    "this role cannot read outbox_partitioning: no partition maintenance here \
                     (on the partitioned layout run `outbox partitions maintain` as the owner)"
                );
                (Mode::Rows, false)
            }
            Err(e) => {
                tracing::warn!(error = %crate::error_chain(&e), "housekeeping could not read the layout");
                return Mode::Look;
            }
        },
        known => (known, false),
    };
    match mode {
        Mode::Maintain => {
            let options = MaintainOptions::new().retention(retention);
            match partition::maintain(client, &options).await {
                Ok(r) if r.skipped => {
                    tracing::debug!("partition maintenance: another maintainer is at work")
                }
                Ok(r) => tracing::debug!(report = ?r, "partition maintenance done"),
                // Refused (the table changed owner, partitions of a role this one cannot act
                // for, a privilege revoked): rows are deleted instead this round, and the next
                // looks again — whoever fixes the ownership gets maintenance back.
                Err(e) if is_denied(&e) || e.kind() == ErrorKind::Config => {
                    tracing::warn!(error = %crate::error_chain(&e),
                        "partition maintenance refused: run `outbox partitions maintain` as the \
                         owner of outbox_events; deleting rows instead");
                    delete_rows(client, retention).await;
                    return Mode::Look;
                }
                Err(e) => {
                    tracing::warn!(error = %crate::error_chain(&e), "partition maintenance failed; trying again next round")
                }
            }
        }
        Mode::Rows => delete_rows(client, retention).await,
        Mode::Look => {}
    }
    if plain { Mode::Look } else { mode }
}

/// Row retention: deletes events published longer than `retention` ago (none without one).
async fn delete_rows(client: &tokio_postgres::Client, retention: Option<Duration>) {
    if let Some(older_than) = retention {
        match retention::cleanup(client, older_than).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "retention deleted processed events"),
            Err(e) => tracing::warn!(error = %crate::error_chain(&e), "retention failed"),
        }
    }
}

/// Whether the database refused for lack of privilege (SQLSTATE 42501: not granted, not owner).
fn is_denied(e: &Error) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<tokio_postgres::Error>())
        .and_then(|e| e.code())
        .is_some_and(|c| *c == tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)
}
