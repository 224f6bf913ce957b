//! One connection for a command's statements, watched from another while an answer takes long.
//!
//! A connection can stall after login without closing (a middlebox holding its bytes, both
//! sockets open, or a server that stopped answering): its statement then waits for ever, and a
//! command run by hand or by cron hangs without a word, its server session left behind (black-box
//! run: `outbox stats`). No time limit fits every statement (a cleanup batch may wait for a lock,
//! a count may take long on a large table), but the server tells the two apart: a session running
//! a statement is busy, one whose statement never arrived, or whose answer never did, sits idle
//! while its client waits. So an answer that takes more than 5 s has the session looked at from
//! another connection every 5 s, as the relay watches its own; one idle for [`IDLE_AT_MOST`] while
//! its client waits has stalled (longer than the relay's 5 s: a command's answer may take that
//! long to arrive after the server sent it).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio_postgres::Client;

use super::PgConnector;
use crate::error::{Error, ErrorKind};
use crate::relay::{Patience, PoolSessions, Session, Watching, watched_session};

/// How long the server session of a watched connection may sit idle while an answer is awaited,
/// nothing arriving or leaving meanwhile, before the connection counts as stalled. Not the relay's
/// 5 s: an idle session may also have sent its whole answer, which network buffers and proxies
/// then hold (black-box run: `dead-letters list` killed 5 s into receiving 1.1 MB at 50 KB/s). A
/// connection whose bytes still come or go is waited for however long (the recheck: an answer
/// arriving for 30 s and more was killed). The server ends a session idle for its
/// `idle_session_timeout` anyway (a minute, when asked for at start-up).
pub const IDLE_AT_MOST: Duration = Duration::from_secs(30);

/// How long the looks at a watched session may all go unanswered (no new connection answering
/// either: the server or the network to it has stalled) before the wait is given up.
pub const UNSEEN_AT_MOST: Duration = Duration::from_secs(30);

/// A connection whose statements are watched from another while their answers take long
/// ([`answer`](Self::answer)).
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use outbox_core::{PgConnector, WatchedClient};
///
/// let connector = PgConnector::from_url("postgres://app@db.internal/orders?sslmode=verify-full")?;
/// let conn = WatchedClient::connect(&connector, "stats connection").await?;
/// let stats = conn.answer(outbox_core::stats(conn.client())).await?;
/// println!("{} pending", stats.pending);
/// # Ok(()) }
/// ```
pub struct WatchedClient {
    client: Client,
    /// `None`: not watched (through a pooler, or its session could not be learned).
    session: Option<Session>,
    /// The watching connections (at most one, opened on the first look).
    pool: Pool,
    /// The wake-ups of the connection's task: bytes arriving or leaving.
    activity: Arc<AtomicU64>,
    known: PoolSessions,
    what: String,
}

impl std::fmt::Debug for WatchedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchedClient")
            .field("what", &self.what)
            .field("watched", &self.session.is_some_and(|s| s.is_direct()))
            .finish_non_exhaustive()
    }
}

impl WatchedClient {
    /// Connects with `connector` (as [`PgConnector::connect_spawned`] does, the connection's
    /// wake-ups counted) and learns the connection's
    /// server session within 5 s: no answer is an [`ErrorKind::Timeout`] error (the connection
    /// stalled right after login). `what` names the connection in errors and the log. Through a
    /// pooler (whose server connections serve other clients too), or when the session cannot be
    /// learned, the connection is not watched.
    pub async fn connect(connector: &PgConnector, what: &str) -> Result<WatchedClient, Error> {
        // Its task's wake-ups counted: bytes arriving or leaving.
        let activity = Arc::new(AtomicU64::new(0));
        let client = connector
            .connect_driven(Some(Arc::clone(&activity)))
            .await?;
        let session = match Session::of(&client, what).await {
            Ok(session) => Some(session).filter(Session::is_direct),
            Err(e) if e.kind() == ErrorKind::Timeout => {
                let limit = crate::relay::ANSWER_WITHIN;
                return Err(super::stalled_after_login(&connector.target(), limit));
            }
            Err(e) => {
                tracing::debug!(error = %crate::error_chain(&e),
                    "could not learn the server session of the {what}; it is not watched");
                None
            }
        };
        Ok(WatchedClient {
            client,
            session,
            pool: connector.pool(1)?,
            activity,
            known: PoolSessions::default(),
            what: what.to_owned(),
        })
    }

    /// The connection, for statements run through [`answer`](Self::answer).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// `work`'s output (statements on [`client`](Self::client), sent one after another), or an
    /// [`ErrorKind::Timeout`] error (into `E`) once the connection has stalled: its server session sat idle
    /// for [`IDLE_AT_MOST`] while `work` waited for an answer, and nothing arrived for 5 s (the
    /// session is ended), or it had ended, or could not be looked at for [`UNSEEN_AT_MOST`].
    /// Looked at every 5 s once an answer has taken 5 s. (A request itself larger than the
    /// network's buffers, sent over a slow link for [`IDLE_AT_MOST`], looks stalled too: its
    /// session sits idle until the whole request has arrived.) `work` must wait for nothing but
    /// the database (not for input, say): its session would look stalled. `work` failing just as
    /// its session is ended fails with that error too (not the server's "terminating connection
    /// due to administrator command").
    pub async fn answer<T, E: From<Error>>(
        &self,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let Some(session) = self.session else {
            return work.await;
        };
        let (pool, known, what) = (&self.pool, &self.known, self.what.as_str());
        let watching = Watching {
            patience: Patience {
                idle_at_most: IDLE_AT_MOST,
                unseen_at_most: Some(UNSEEN_AT_MOST),
            },
            activity: Some(&*self.activity),
        };
        watched_session(pool, known, session, what, watching, work, Result::is_err).await?
    }
}
