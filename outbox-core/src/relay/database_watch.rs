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
use std::time::Duration;

use outbox_queries::queries::relay as sql;
use tokio_util::sync::CancellationToken;

use super::Relay;
use crate::publisher::Publisher;

/// How often the database is asked while the relay's workers back off after its failures.
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(1);

/// The longest the watch waits for a connection and for its answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

impl<P: Publisher> Relay<P> {
    /// Starts the watch after a batch failed with a database or pool error, unless one runs; it
    /// ends once the database answers, or with `stop`.
    pub(super) fn watch_database(&self, stop: &CancellationToken) {
        if self.inner.database_watch.swap(true, Ordering::AcqRel) {
            return;
        }
        let relay = self.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            relay.watch_until_back(&stop).await;
            relay.inner.database_watch.store(false, Ordering::Release);
        });
    }

    /// Asks the database every [`WATCH_EVERY`] until a session can write; wakes the workers then
    /// if one could not before (a failure that is not the database's, found writable at once,
    /// wakes nobody: the workers' back-off stands).
    async fn watch_until_back(&self, stop: &CancellationToken) {
        let mut was_down = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(WATCH_EVERY) => {}
            }
            if self.writable().await {
                if was_down {
                    tracing::debug!("the database answers again: waking the relay's workers");
                    self.inner.database_back.notify_waiters();
                }
                return;
            }
            was_down = true;
        }
    }

    /// Whether a pooled session answers and can write. A read-only session is closed, not
    /// returned: it stays read-only whatever the server becomes (`transaction.rs`).
    async fn writable(&self) -> bool {
        let Ok(Ok(client)) = tokio::time::timeout(ASK_TIMEOUT, self.inner.pool.get()).await else {
            return false;
        };
        let asked =
            tokio::time::timeout(ASK_TIMEOUT, sql::session_writable().bind(&**client).one()).await;
        match asked {
            Ok(Ok(true)) => true,
            Ok(Ok(false)) => {
                drop(deadpool_postgres::Client::take(client));
                false
            }
            // Unanswered in time: closed, its answer may come later on a connection another
            // batch would take.
            Err(_) => {
                drop(deadpool_postgres::Client::take(client));
                false
            }
            Ok(Err(_)) => false,
        }
    }
}
