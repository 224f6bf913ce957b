//! The claim transaction: begun in the same message as the claim and committed in the same message
//! as the acknowledgement, so that a batch costs the database two round trips, not four.
//!
//! tokio-postgres' own `Transaction` waits for `BEGIN` before anything else is sent and for the last
//! statement before `COMMIT`. This guard sends `BEGIN` (with the transaction's limits) ahead of the
//! claim's first statement, and `COMMIT` right behind the acknowledgement's statements, all
//! pipelined on the connection. Its one duty in exchange: a connection whose transaction may still
//! be open (the batch ended early, was dropped mid-way, or the conversation fell out of step after a
//! timeout) is never handed to the next batch. It is rolled back when it can be, and otherwise
//! taken out of the pool and closed, which makes PostgreSQL roll it back and release its row locks.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use super::pool_sessions::{self, PoolSessions};
use super::session::Session;
use super::stall_watch;

use crate::error::{Error, ErrorKind};

/// A batch's transaction on a pooled connection.
pub(crate) struct ClaimTransaction {
    /// `None` only once dropped.
    client: Option<deadpool_postgres::Client>,
    /// `BEGIN` was sent and no `COMMIT` or `ROLLBACK` has answered since.
    open: bool,
    /// A round trip outlasted its bound: answers may still be on their way, so the conversation is
    /// out of step and the connection must not be used again. Also set when the session turned
    /// out read-only (see [`bounded`]).
    stalled: bool,
    /// The longest any round trip may take.
    bound: Duration,
    /// The pool the connection came from: its idle connections are closed after a stall.
    pool: deadpool_postgres::Pool,
    /// The sessions of the pool's connections: those a stall leaves behind are ended.
    sessions: Arc<PoolSessions>,
    /// The connection's server session, watched through round trips that go unanswered (`None`:
    /// through a pooler, or not learned).
    session: Option<Session>,
}

impl ClaimTransaction {
    /// Takes a connection from `pool` within `bound` (no transaction is begun yet), learning its
    /// server session the first time (see `pool_sessions.rs`).
    pub(crate) async fn connect(
        pool: &deadpool_postgres::Pool,
        sessions: &Arc<PoolSessions>,
        bound: Duration,
    ) -> Result<ClaimTransaction, Error> {
        let client = match tokio::time::timeout(bound, pool.get()).await {
            Ok(client) => client?,
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Pool,
                    format!("no connection from the pool within {bound:?}"),
                ));
            }
        };
        let mut tx = ClaimTransaction {
            client: Some(client),
            open: false,
            stalled: false,
            bound,
            pool: pool.clone(),
            sessions: Arc::clone(sessions),
            session: None,
        };
        let client = connection(&tx.client)?;
        let learnt = bounded(&mut tx.stalled, bound, sessions.learn(pool, client)).await;
        if let Err(e) = learnt {
            // Unanswered (in 5 s, within `bound` or not): out of step, closed on drop.
            tx.stalled |= e.kind() == ErrorKind::Timeout;
            return Err(e);
        }
        tx.session = sessions.session(client);
        Ok(tx)
    }

    /// Runs `statements` (which must send their first message on their first poll) right behind
    /// `BEGIN ISOLATION LEVEL READ COMMITTED; <setup>`, in one round trip.
    pub(crate) async fn begin_with<T>(
        &mut self,
        setup: &str,
        statements: impl AsyncFnOnce(&deadpool_postgres::Client) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let begin = format!("BEGIN ISOLATION LEVEL READ COMMITTED; {setup}");
        // From here on the transaction may be open on the server, whatever happens to this future.
        self.open = true;
        let client = connection(&self.client)?;
        // Sent while the session waits out of a transaction.
        let watch = (&self.pool, &*self.sessions, self.session, Some(false));
        round_trip(&mut self.stalled, self.bound, watch, async {
            // `join` polls in order: `BEGIN` is queued before the statements' first message.
            let (begun, done) =
                futures::future::join(client.batch_execute(&begin), statements(client)).await;
            // A failed `BEGIN` leaves nothing to trust in what ran behind it.
            begun?;
            done
        })
        .await
    }

    /// Runs `statements` (which must send their first message on their first poll, and fail on it
    /// when one of them cannot be sent) and `COMMIT` right behind them, in one round trip.
    ///
    /// `COMMIT` goes out only once the statements' first poll has sent them without failing: a
    /// statement that could not even be encoded fails the batch with nothing committed (the caller
    /// rolls back). The transaction is over once `COMMIT` has answered: when a statement failed on
    /// the server, PostgreSQL answers the `COMMIT` of the aborted transaction by rolling it back,
    /// and the statement's error is returned.
    ///
    /// `request_bytes`, about how many bytes the statements send, decides whether the round trip
    /// is watched (see [`WATCHED_REQUEST_BYTES`]).
    pub(crate) async fn commit_with<T>(
        &mut self,
        request_bytes: usize,
        statements: impl AsyncFnOnce(&deadpool_postgres::Client) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let client = connection(&self.client)?;
        // Sent while the session waits inside the transaction.
        let sent_in_transaction = (request_bytes <= WATCHED_REQUEST_BYTES).then_some(true);
        let watch = (
            &self.pool,
            &*self.sessions,
            self.session,
            sent_in_transaction,
        );
        let (done, committed) = round_trip(&mut self.stalled, self.bound, watch, async {
            let mut work = std::pin::pin!(statements(client));
            // The first poll sends every statement, or fails before the last one is sent.
            let mut first = None;
            std::future::poll_fn(|cx| {
                if let Poll::Ready(result) = work.as_mut().poll(cx) {
                    first = Some(result);
                }
                Poll::Ready(())
            })
            .await;
            if let Some(Err(e)) = first {
                return Err(e);
            }
            let commit = client.batch_execute("COMMIT");
            Ok(match first {
                Some(done) => (done, commit.await),
                None => futures::future::join(work, commit).await,
            })
        })
        .await?;
        committed?;
        self.open = false;
        done
    }

    /// Runs `statements` inside the transaction, bounded like every round trip.
    pub(crate) async fn run<T>(
        &mut self,
        statements: impl AsyncFnOnce(&deadpool_postgres::Client) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let client = connection(&self.client)?;
        // Inside the transaction before and after: the session's state cannot tell a request
        // that never arrived from an answer on its way; left to the bound.
        let watch = (&self.pool, &*self.sessions, self.session, None);
        round_trip(&mut self.stalled, self.bound, watch, statements(client)).await
    }

    /// Commits what was sent so far.
    pub(crate) async fn commit(&mut self) -> Result<(), Error> {
        self.commit_with(0, async |_| Ok(())).await
    }

    /// Rolls back after a failure, so that the connection can serve the next batch; when that fails
    /// too, the connection is closed on drop instead.
    pub(crate) async fn roll_back(&mut self) {
        if !self.open || self.stalled {
            return;
        }
        let Ok(client) = connection(&self.client) else {
            return;
        };
        let watch = (&self.pool, &*self.sessions, self.session, Some(true));
        let rolled_back = round_trip(&mut self.stalled, self.bound, watch, async {
            Ok(client.batch_execute("ROLLBACK").await?)
        })
        .await;
        if rolled_back.is_ok() {
            self.open = false;
        }
    }
}

impl Drop for ClaimTransaction {
    fn drop(&mut self) {
        let mut own = None;
        if (self.open || self.stalled)
            && let Some(client) = self.client.take()
        {
            own = self.sessions.forget(&client);
            // Out of the pool and closed: the server rolls back what was left open.
            drop(deadpool_postgres::Client::take(client));
        }
        if self.stalled {
            // The pool's idle connections went the same way (through the same middlebox, or to
            // the same demoted primary): closed too, so that the next batches connect anew rather
            // than stall on them one by one (black-box run: an idle connection black-holed with
            // the one that stalled stalled another batch, 35 s, when used a minute later). Their
            // server sessions, and this one's, are ended if they outlive the closing.
            let mut left = self.sessions.close_idle(&self.pool);
            left.extend(own);
            pool_sessions::end_later(self.pool.clone(), left);
        }
    }
}

/// The connection while the guard holds it.
fn connection(
    client: &Option<deadpool_postgres::Client>,
) -> Result<&deadpool_postgres::Client, Error> {
    client
        .as_ref()
        .ok_or_else(|| Error::new(ErrorKind::Database, "the claim's connection is gone"))
}

/// The largest request whose round trip is watched (`stall_watch::claim_round_trip`): while the
/// server reads a request it still waits as before it, and a larger one may rightly take more than
/// the watch's 5 s to arrive over a slow link (review: an acknowledgement carrying the failures'
/// errors). The claim's requests are far smaller.
const WATCHED_REQUEST_BYTES: usize = 64 * 1024;

/// The pool, its sessions, the connection's session and how it waited when the round trip was
/// sent (`stall_watch::claim_round_trip`).
type Watch<'a> = (
    &'a deadpool_postgres::Pool,
    &'a PoolSessions,
    Option<Session>,
    Option<bool>,
);

/// Runs `fut`, a round trip on the connection whose server session is `watch`'s, for at most
/// `bound`, and for less once the connection has stalled (`stall_watch::claim_round_trip`): then
/// the connection is marked `stalled`.
async fn round_trip<T>(
    stalled: &mut bool,
    bound: Duration,
    watch: Watch<'_>,
    fut: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let (pool, known, session, sent_in_transaction) = watch;
    let mut found = false;
    let watched =
        stall_watch::claim_round_trip(pool, known, session, sent_in_transaction, &mut found, fut);
    let result = bounded(stalled, bound, watched).await;
    *stalled |= found;
    result
}

/// Runs `fut` (a database round trip) for at most `bound`; past it, marks the connection `stalled`.
pub(crate) async fn bounded<T>(
    stalled: &mut bool,
    bound: Duration,
    fut: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(bound, fut).await {
        Ok(Err(e)) if read_only(&e) => {
            // A session of a server that was primary when it was opened and is read-only now (a
            // failover: a demoted primary or a replica behind the endpoint), or of a database set
            // read-only since: it stays so, whatever the server becomes. Closed, not returned to
            // the pool, so that the next batch connects anew (black-box run: after a database was
            // read-only for a minute, the relays kept their read-only connections and published
            // nothing until they were killed).
            *stalled = true;
            Err(e.context(
                "the session is read-only (a failover, or a replica behind the address); its \
                 connection is discarded and the next batch connects anew",
            ))
        }
        Ok(result) => result,
        Err(_) => {
            *stalled = true;
            Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "the database did not answer within {bound:?}; the connection is discarded \
                     and what the batch had not committed will be claimed again"
                ),
            ))
        }
    }
}

/// Whether the database refused `e` because the session is read-only (SQLSTATE 25006), however
/// deep in its sources the server's error is.
fn read_only(e: &Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(code) = s
            .downcast_ref::<tokio_postgres::Error>()
            .and_then(|e| e.code())
        {
            return *code == tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION;
        }
        source = s.source();
    }
    false
}
