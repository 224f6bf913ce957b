//! The watch for the database coming back while the relay's workers back off after database
//! failures. Their back-off grows to [`INFRA_BACKOFF_CAP`](super::worker::INFRA_BACKOFF_CAP) (30 s)
//! so that an outage is not hammered, and a worker that found the database back wakes the others;
//! but with every worker asleep nothing finds it back before the longest delay ends. Losing the
//! LISTEN connection ends that sleep (`listener.rs`), but a database that turns read-only and back
//! (a failover behind the same address, `default_transaction_read_only`) never drops it: the relays
//! resumed 16-17 s after a minute read-only (black-box run). While a worker backs off, this task
//! asks the database once every [`WATCH_EVERY`] whether a session can write, and wakes the workers
//! once it can after it could not.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use outbox_queries::queries::relay as sql;
use tokio_util::sync::CancellationToken;

use super::pool_sessions::PoolSessions;
use super::{Inner, Relay};
use crate::publisher::Publisher;

/// How often the database is asked while the relay's workers back off after its failures.
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(1);

/// The longest the watch waits for a connection and for its answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// What the watch heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heard {
    /// A session that can write.
    Writable,
    /// No answer, an error, or a read-only session.
    Down,
    /// No connection free in the pool: the workers hold them, which says nothing of the database.
    Busy,
}

impl<P: Publisher> Relay<P> {
    /// Starts the watch after a batch failed with a database, pool or time-out error, unless one
    /// runs; it ends once the database answers, with `stop`, or with the relay.
    pub(super) fn watch_database(&self, stop: &CancellationToken) {
        // Wanted from now: a watch about to end (its last look under way, the failure in it or
        // after) watches again instead of leaving this failure unwatched (review).
        self.inner
            .database_watch_wanted
            .store(true, Ordering::SeqCst);
        if self.inner.database_watch.swap(true, Ordering::SeqCst) {
            return;
        }
        // Not the relay itself: a relay whose `run` was dropped without its token cancelled is
        // not kept alive, nor asked about, by its watch (review).
        let inner = Arc::downgrade(&self.inner);
        let stop = stop.clone();
        tokio::spawn(async move {
            // Carried into a watch re-armed by a failure during the last look: it wakes the
            // workers too once the database answers (a worker that failed after the wake-up slept
            // its whole back-off: review).
            let mut was_down = false;
            loop {
                was_down = watch_until_back(&inner, &stop, was_down).await;
                let Some(this) = inner.upgrade() else {
                    return;
                };
                this.database_watch.store(false, Ordering::SeqCst);
                if stop.is_cancelled()
                    || !this.database_watch_wanted.load(Ordering::SeqCst)
                    || this.database_watch.swap(true, Ordering::SeqCst)
                {
                    return;
                }
            }
        });
    }
}

/// Asks the database every [`WATCH_EVERY`] until a session can write; wakes the workers then if
/// one could not before (`was_down`: before this watch, in the one it re-arms). A failure that is
/// not the database's, found writable at once, wakes nobody: the workers' back-off stands.
/// Returns whether it found the database down.
async fn watch_until_back<P: Publisher>(
    inner: &Weak<Inner<P>>,
    stop: &CancellationToken,
    mut was_down: bool,
) -> bool {
    loop {
        tokio::select! {
            () = stop.cancelled() => return was_down,
            () = tokio::time::sleep(WATCH_EVERY) => {}
        }
        let Some(inner) = inner.upgrade() else {
            return was_down;
        };
        inner.database_watch_wanted.store(false, Ordering::SeqCst);
        match writable(&inner.pool, &inner.pool_sessions).await {
            Heard::Writable => {
                if was_down {
                    tracing::debug!("the database answers again: waking the relay's workers");
                    inner.database_back.notify_waiters();
                }
                return was_down;
            }
            Heard::Down => was_down = true,
            Heard::Busy => {}
        }
    }
}

/// Whether a pooled session answers and can write. A read-only session is closed, not returned:
/// it stays read-only whatever the server becomes (`transaction.rs`).
async fn writable(pool: &deadpool_postgres::Pool, known: &PoolSessions) -> Heard {
    let client = match tokio::time::timeout(ASK_TIMEOUT, pool.get()).await {
        Ok(Ok(client)) => client,
        _ => {
            let status = pool.status();
            return if status.available == 0 && status.size >= status.max_size {
                Heard::Busy
            } else {
                Heard::Down
            };
        }
    };
    // Learned, so that a session left behind by a stall here later can be ended.
    if tokio::time::timeout(ASK_TIMEOUT, known.learn(pool, &client))
        .await
        .map_or(true, |learned| learned.is_err())
    {
        known.discard(pool, client);
        return Heard::Down;
    }
    let asked =
        tokio::time::timeout(ASK_TIMEOUT, sql::session_writable().bind(&**client).one()).await;
    match asked {
        Ok(Ok(true)) => Heard::Writable,
        // Read-only: closed.
        Ok(Ok(false)) => {
            drop(deadpool_postgres::Client::take(client));
            Heard::Down
        }
        // Unanswered in time (its answer may come later, on a connection another batch would
        // take): closed, and its session ended once the database can be reached.
        Err(_) => {
            known.discard(pool, client);
            Heard::Down
        }
        Ok(Err(_)) => Heard::Down,
    }
}
