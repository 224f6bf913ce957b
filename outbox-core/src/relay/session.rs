//! The server session behind one of a relay's own connections (the LISTEN one, the one advertising
//! waiting, housekeeping's), and ending it once that connection has stalled.
//!
//! A connection can stall without closing: a middlebox holds the server's bytes, both sockets stay
//! open. The relay gives up on it and connects again, but the server still runs the old session
//! until its own TCP time-outs drop it (with a proxy or a NAT in between: perhaps never). A stalled
//! LISTEN session stops reading notifications, which holds back the server's notification queue
//! (at 8 GB writers' commits fail); a stalled advertising session keeps the waiting lock, so every
//! writer notifies. So the next connection ends it.

use std::future::Future;
use std::time::Duration;

use outbox_queries::queries::listen as sql;
use tokio_postgres::Client;

use tokio_util::task::AbortOnDropHandle;

use crate::connect::PgConnector;
use crate::error::{Error, ErrorKind};

/// How long one of the relay's own connections is given to answer a statement that needs no lock
/// (a check, `LISTEN`, an unlock); no answer by then means the connection has stalled.
pub(crate) const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// A server session, told apart from a later one that reuses its process id (or another server's,
/// after a fail-over) by its start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Session {
    pid: i32,
    started_us: i64,
    /// Found stalled (a statement unanswered within its time), rather than left with a
    /// statement in flight when the relay stopped (waiting for another relay's lock, say).
    stalled: bool,
    /// The connection's own session: the one its start-up named answered. Not so through a
    /// pooler, whose server connections serve other clients too: such a session is neither
    /// watched nor ended (`key_data.rs`).
    direct: bool,
}

/// What a session is doing, seen from another connection ([`Session::state_from`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionState {
    /// Running a statement, or waiting in one for a lock.
    Busy,
    /// Waiting for its client's next statement.
    Idle(Idle),
    /// Ended: its connection will never hear an answer.
    Gone,
}

/// A session waiting for its client's next statement ([`SessionState::Idle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Idle {
    /// For this long.
    pub(crate) waited: Duration,
    /// Inside a transaction (`idle in transaction`, aborted or not), or out of one.
    pub(crate) in_transaction: bool,
    /// When it began to wait (the server's clock, µs since the epoch), when the server says.
    since_us: Option<i64>,
}

impl Session {
    /// The session of `client`'s connection.
    pub(crate) async fn of(client: &Client, what: &str) -> Result<Session, Error> {
        let row = within(ANSWER_WITHIN, what, sql::this_session().bind(client).one()).await?;
        let direct = super::key_data::startup_pid(client).await == Some(row.pid);
        if !direct {
            tracing::debug!(
                pid = row.pid,
                "the {what} leads through a pooler (its start-up named another process): its server session is neither watched nor ended"
            );
        }
        Ok(Session {
            pid: row.pid,
            started_us: row.started_us,
            stalled: false,
            direct,
        })
    }

    /// Whether this is the connection's own session, which the relay may watch and end (not
    /// one of a pooler's server connections).
    pub(crate) fn is_direct(&self) -> bool {
        self.direct
    }

    /// Has the server end this session, `client`'s own, once it has waited
    /// [`IDLE_SESSION_TIMEOUT`](crate::connect::IDLE_SESSION_TIMEOUT) for a statement outside a
    /// transaction (PostgreSQL 14 and later; not through a pooler): should its connection stall
    /// while the relay cannot connect to end it (every slot of its role taken, or the relay
    /// stopped or killed meanwhile), it does not stay for good, holding a slot (and, listening,
    /// the notification queue: black-box run). Within [`ANSWER_WITHIN`]; a refusal is ignored.
    /// Whether it did is recorded in `connector` (whose later connections then ask for it at
    /// start-up).
    pub(crate) async fn limit_idle(
        &self,
        client: &Client,
        what: &str,
        connector: &PgConnector,
    ) -> Result<(), Error> {
        if !self.direct {
            connector.learn_idle_limit(false);
            return Ok(());
        }
        if connector.sets_idle_limit_itself() {
            return Ok(());
        }
        let set = crate::connect::limit_idle_session(client, self.pid);
        match within(ANSWER_WITHIN, what, set).await {
            Err(e) if e.kind() == ErrorKind::Timeout => Err(e),
            Err(e) => {
                tracing::debug!(error = %crate::error_chain(&e), "the {what} could not set idle_session_timeout");
                connector.learn_idle_limit(false);
                Ok(())
            }
            Ok(applied) => {
                connector.learn_idle_limit(applied);
                Ok(())
            }
        }
    }

    /// This session, found stalled (so that [`end_from`](Self::end_from) says so).
    pub(crate) fn stalled(self) -> Session {
        Session {
            stalled: true,
            ..self
        }
    }

    /// What this session is doing, asked from `client` (another connection, `what`) within
    /// [`ANSWER_WITHIN`].
    pub(crate) async fn state_from(
        &self,
        client: &Client,
        what: &str,
    ) -> Result<SessionState, Error> {
        if !self.direct {
            // Another client's, as like as not: nothing to judge by.
            return Ok(SessionState::Busy);
        }
        let row = within(
            ANSWER_WITHIN,
            what,
            sql::session_state()
                .bind(client, &self.pid, &self.started_us)
                .opt(),
        )
        .await?;
        Ok(match row {
            None => SessionState::Gone,
            Some(row) => match row.idle_us {
                None => SessionState::Busy,
                // A negative span (clocks read apart) is no time at all.
                Some(us) => SessionState::Idle(Idle {
                    waited: Duration::from_micros(u64::try_from(us).unwrap_or(0)),
                    in_transaction: row.in_transaction,
                    since_us: row.state_change_us,
                }),
            },
        })
    }

    /// Ends this session from `client` (another connection, `what` in the error) within
    /// [`ANSWER_WITHIN`] if it still waits as `idle` saw it, since the same moment: not once the
    /// statement that was late has arrived after all, nor once it has been answered. Whether it
    /// was ended.
    pub(crate) async fn end_if_idle_from(
        &self,
        client: &Client,
        what: &str,
        idle: &Idle,
    ) -> Result<bool, Error> {
        let Some(since_us) = idle.since_us else {
            return self.end_quietly_from(client, what).await;
        };
        if !self.direct {
            // Through a pooler: the server session may serve another client now.
            return Ok(false);
        }
        let ended = within(
            ANSWER_WITHIN,
            what,
            sql::end_idle_session()
                .bind(client, &self.pid, &self.started_us, &since_us)
                .opt(),
        )
        .await?;
        Ok(ended == Some(true))
    }

    /// Ends this session from `client` (another connection, `what` in the error) if it is still
    /// there, within [`ANSWER_WITHIN`]: whether it was.
    pub(crate) async fn end_quietly_from(
        &self,
        client: &Client,
        what: &str,
    ) -> Result<bool, Error> {
        if !self.direct {
            // Through a pooler: the server session may serve another client now.
            return Ok(false);
        }
        let ended = within(
            ANSWER_WITHIN,
            what,
            sql::end_stalled_session()
                .bind(client, &self.pid, &self.started_us)
                .opt(),
        )
        .await?;
        Ok(ended == Some(true))
    }

    /// Ends this (stalled) session from `client`, if it is still there. Best effort: a failure is
    /// logged (the server's own time-outs end it in the end) and the new connection goes on.
    pub(crate) async fn end_from(self, client: &Client, what: &str) {
        match self.end_quietly_from(client, what).await {
            Ok(true) if self.stalled => tracing::info!(
                pid = self.pid,
                "ended the server session of the stalled {what}"
            ),
            // Stopping with a statement in flight (a lock request behind another relay's lock):
            // nothing wrong (a black-box run read "stalled" on every stop of two relays).
            Ok(true) => tracing::debug!(
                pid = self.pid,
                "stopping: ended the server session of the {what}, whose last statement was unanswered"
            ),
            Ok(false) => tracing::debug!(pid = self.pid, "the stalled {what}'s session had ended"),
            Err(e) => tracing::warn!(pid = self.pid, error = %crate::error_chain(&e),
                "could not end the server session of the stalled {what}; the server ends it once idle for its idle_session_timeout (a minute unless the connection string sets another; on the relay's own connections from PostgreSQL 14) or once its TCP time-outs notice"),
        }
    }
}

/// At shutdown: ends `session`, when there is one, from a new connection, all within
/// [`ANSWER_WITHIN`]. It is a stalled session not ended yet (the relay stopped before its next
/// connection), or the session of a connection whose statement had no answer when the relay
/// stopped: behind a middlebox that holds the server's side open, it would otherwise run on,
/// keeping the waiting lock or holding back the notification queue, until the server's own
/// time-outs end it (perhaps never).
pub(crate) async fn end_at_shutdown(connector: &PgConnector, session: Option<Session>, what: &str) {
    let Some(session) = session else { return };
    let ending = async {
        let (client, connection) = connector.connect().await?;
        let connection = AbortOnDropHandle::new(tokio::spawn(connection));
        session.end_from(&client, what).await;
        // Closed the polite way: the server is told, rather than finding the socket gone.
        drop(client);
        let _ = connection.await;
        Ok::<(), Error>(())
    };
    let failed = match tokio::time::timeout(ANSWER_WITHIN, ending).await {
        Ok(Ok(())) => return,
        Ok(Err(e)) => crate::error_chain(&e),
        Err(_) => format!("no connection within {} s", ANSWER_WITHIN.as_secs()),
    };
    tracing::warn!(pid = session.pid, error = %failed,
        "stopping: could not end the server session of the {what}, which had not answered; the server ends it once idle for its idle_session_timeout (a minute unless the connection string sets another; on the relay's own connections from PostgreSQL 14) or once its TCP time-outs notice");
}

/// `statement`'s answer, or a time-out error saying that `what` (a connection) did not answer
/// within `limit`.
pub(crate) async fn within<T>(
    limit: Duration,
    what: &str,
    statement: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(limit, statement).await {
        Ok(r) => r.map_err(Error::from),
        Err(_) => Err(stalled(limit, what)),
    }
}

/// The error of a connection that did not answer within `limit`.
pub(crate) fn stalled(limit: Duration, what: &str) -> Error {
    Error::new(
        ErrorKind::Timeout,
        format!("the {what} did not answer within {} s", limit.as_secs_f64()),
    )
}

/// `answer`, with `session` left in `stalled` when it is a time-out.
pub(crate) fn note_stall<T>(
    answer: Result<T, Error>,
    session: Session,
    stalled: &mut Option<Session>,
) -> Result<T, Error> {
    if matches!(&answer, Err(e) if e.kind() == ErrorKind::Timeout) {
        *stalled = Some(session.stalled());
    }
    answer
}
