//! Watching one of the relay's connections through statements of any length, from another.
//!
//! Housekeeping's statements may rightly run for minutes (a retention delete, a detach waiting for
//! old transactions), so no time limit fits them. But a connection can stall without closing (a
//! middlebox holds its bytes, both sockets open): its statement then waits for ever, and
//! retention and the partitions made ahead stop without a word. The server tells the two apart: a
//! session running a statement, or waiting in one for a lock, is busy; one that never got its
//! statement, or whose answer never arrived, sits idle while its client waits. (Row retention and
//! the inbox's are watched the same way, and so are claims' round trips that go unanswered for a
//! while: [`claim_round_trip`].)

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use tokio_postgres::Client;

mod patience;
mod stall;

pub(crate) use patience::{Patience, Watching};

use super::in_use::InUse;
use super::pool_sessions::{self, PoolSessions};
use super::session::{ANSWER_WITHIN, Session, SessionState};
use crate::error::{Error, ErrorKind};
use patience::Awaiting;
use stall::Stall;

/// How often the watched session is looked at.
const LOOK_EVERY: Duration = Duration::from_secs(5);

/// Runs `work` (statements on `client`, a connection of `what`) while watching that connection
/// from another of `pool`'s (whose connections' sessions are `known`): `work`'s output, or, once
/// the connection has stalled, an
/// [`ErrorKind::Timeout`] error saying how (its server session ended when still there; the
/// pool's idle connections closed, as they went the same way). The connection is asked its
/// session first, within 5 s: no answer is the same error, and `earlier`, its session as learned
/// before (by a claim, say), is ended once the database can be reached.
pub(crate) async fn watched<T>(
    pool: &Pool,
    known: &PoolSessions,
    client: &Client,
    earlier: Option<Session>,
    what: &str,
    work: impl Future<Output = T>,
) -> Result<T, Error> {
    let session = match Session::of(client, what).await {
        Ok(session) => session,
        Err(e) => {
            if e.kind() == ErrorKind::Timeout {
                close_idle(pool, known);
                // A connection that stalled while idle in the pool (black-box run: its session
                // was left behind each time).
                pool_sessions::end_later(pool.clone(), earlier.into_iter().collect());
            }
            return Err(e);
        }
    };
    let watching = Watching {
        patience: Patience::RELAY,
        activity: None,
    };
    watched_session(pool, known, session, what, watching, work, |_| false).await
}

/// [`watched`], the connection's session known: `session` (unwatched when it is a pooler's),
/// watched as `watching` says ([`Patience::RELAY`], no activity, for [`watched`]). Output that
/// is `failed` comes out as the watch's error instead when the watch had just ended the session:
/// the work most likely failed of that (the server's "terminating connection due to
/// administrator command" reaches a connection still moving before the watch's own answer; a
/// black-box recheck saw that raw error).
pub(crate) async fn watched_session<T>(
    pool: &Pool,
    known: &PoolSessions,
    session: Session,
    what: &str,
    watching: Watching<'_>,
    work: impl Future<Output = T>,
    failed: impl Fn(&T) -> bool,
) -> Result<T, Error> {
    // Through a pooler the session that answered may not be this connection's next: nothing
    // to watch by (`key_data.rs`).
    if !session.is_direct() {
        return Ok(work.await);
    }
    let ending = AtomicBool::new(false);
    let awaiting = Awaiting::Answers;
    let Watching { patience, activity } = watching;
    let watch = Watch {
        pool,
        known,
        session,
        what,
        awaiting,
        ending: &ending,
        patience,
        activity,
    };
    let watch = watch.until_stalled();
    tokio::pin!(watch);
    let stall = tokio::select! {
        done = work => {
            // A round that succeeds as its session is ended has done its work all the same.
            if !(failed(&done) && ending.load(Ordering::SeqCst)) {
                return Ok(done);
            }
            match settled(watch, &ending).await {
                Some(stall) => stall,
                None => return Ok(done),
            }
        }
        stall = &mut watch => stall,
    };
    close_idle(pool, known);
    Err(Error::new(
        ErrorKind::Timeout,
        format!("the {what} stopped answering: {stall}"),
    ))
}

/// The stall `watch` finds, once it is no longer `ending` the session it was ending (`None`: it
/// was not, the session no longer waited as it had). Ending a session is bounded.
async fn settled(
    watch: std::pin::Pin<&mut impl Future<Output = Stall>>,
    ending: &AtomicBool,
) -> Option<Stall> {
    let given_back = async {
        while ending.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        biased;
        stall = watch => Some(stall),
        () = given_back => None,
    }
}

/// After a connection stalled: the pool's idle connections went the same way (through the same
/// middlebox), so they are closed, as after a claim's stall, and the next users connect anew; the
/// sessions `known` among them are ended a moment later.
fn close_idle(pool: &Pool, known: &PoolSessions) {
    pool_sessions::end_later(pool.clone(), known.close_idle(pool));
}

/// Runs `round_trip`, a round trip on a claim's connection, whose server session is `session`
/// (`None`: unknown, or a pooler's), sent while that session waited inside a transaction or out
/// of one (`sent_in_transaction`; `None`: not watched). Once the round trip has waited
/// [`LOOK_EVERY`], the session is looked at from another pool connection: its output, or, once the
/// session has sat idle 5 s as it did when the request was sent (it never got it), an
/// [`ErrorKind::Timeout`] error saying how (the session ended), with `stalled` set.
///
/// A claim's statements may rightly wait for a lock up to the claim's `statement_timeout`, but a
/// connection that stalled without closing would otherwise be given up only at that bound and 5 s
/// more (35 s with the defaults; black-box run: a 3 s outage stopped publishing for ~35 s). A
/// round trip answered within [`LOOK_EVERY`] costs a timer, nothing on the database.
pub(crate) async fn claim_round_trip<T>(
    pool: &Pool,
    known: &PoolSessions,
    session: Option<Session>,
    sent_in_transaction: Option<bool>,
    stalled: &mut bool,
    round_trip: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let (Some(session), Some(sent_in_transaction)) =
        (session.filter(Session::is_direct), sent_in_transaction)
    else {
        return round_trip.await;
    };
    let awaiting = Awaiting::Answer {
        sent_in_transaction,
    };
    let ending = AtomicBool::new(false);
    let given_up = |stall: &dyn fmt::Display| {
        Error::new(
            ErrorKind::Timeout,
            format!(
                "the {CLAIM} stopped answering: {stall}; the connection is discarded and what \
                 the batch had not committed will be claimed again"
            ),
        )
    };
    tokio::select! {
        // A stall found is not lost to an answer that arrives meanwhile.
        biased;
        stall = Watch { pool, known, session, what: CLAIM, awaiting, ending: &ending, patience: Patience::RELAY, activity: None }.until_stalled() => {
            *stalled = true;
            Err(given_up(&stall))
        }
        done = round_trip => {
            if ending.load(Ordering::SeqCst) {
                // Answered as its session was being ended: the connection is not used again.
                *stalled = true;
                if !sent_in_transaction {
                    // A claim: its row locks may be gone with the session, so nothing of the
                    // batch may be published (review).
                    return Err(given_up(&"its answer came as its server session was being ended"));
                }
                // An acknowledgement or a rollback: its answer tells what the server did before
                // the session ended (review: a commit was reported failed).
            }
            done
        }
    }
}

/// Whether a look that failed with `e` after `took` went unanswered: a statement or a pool's wait
/// that timed out, or a connection not opened after a second or more without the server's word (its
/// connect timeout); not a refusal (the server's error, a port closed).
fn unanswered(e: &Error, took: Duration) -> bool {
    if e.kind() == ErrorKind::Timeout {
        return true;
    }
    let refused = std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<deadpool_postgres::PoolError>())
        .is_some_and(|p| matches!(p, deadpool_postgres::PoolError::Backend(pg) if pg.as_db_error().is_some()));
    e.kind() == ErrorKind::Pool && !refused && took >= Duration::from_secs(1)
}

/// What a claim's connection is called in the log.
const CLAIM: &str = "claim's connection";

/// How long after a look that got no answer the next is made, from a new connection.
const LOOK_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// A watched connection: its server session, what it waits for, and where the looks come from.
#[derive(Clone, Copy)]
struct Watch<'a> {
    pool: &'a Pool,
    /// The sessions of `pool`'s connections.
    known: &'a PoolSessions,
    session: Session,
    /// What the connection is called in the log.
    what: &'a str,
    awaiting: Awaiting,
    /// Set while the session is being ended.
    ending: &'a AtomicBool,
    patience: Patience,
    /// Counts the wake-ups of the watched connection's task (bytes arriving or leaving), when
    /// known: one that changed since the last look is no stall, however long the session has
    /// been idle (an answer the server sent, still arriving over a slow link).
    activity: Option<&'a AtomicU64>,
}

impl Watch<'_> {
    /// Resolves once the session, whose connection is waiting for an answer, has stalled (having
    /// ended the session when it was still there, `ending` set meanwhile); never while it is busy.
    /// Looks every [`LOOK_EVERY`] from a pool connection; a look that fails decides nothing,
    /// unless looks have gone unanswered for `unseen_at_most` (a refusal, which the server
    /// answers, starts that count again).
    async fn until_stalled(self) -> Stall {
        let (pool, known, what) = (self.pool, self.known, self.what);
        let mut pause = LOOK_EVERY;
        // Since when every look has gone unanswered.
        let mut unseen_since: Option<Instant> = None;
        let mut seen = self.activity.map(|a| a.load(Ordering::SeqCst));
        let began = Instant::now();
        loop {
            tokio::time::sleep(pause).await;
            pause = LOOK_EVERY;
            let now = self.activity.map(|a| a.load(Ordering::SeqCst));
            if now != seen {
                // Bytes came or went since the last look: the connection moves.
                seen = now;
                unseen_since = None;
                continue;
            }
            let looked_at = Instant::now();
            match self.look(began.elapsed()).await {
                Ok(Some(stall)) => return stall,
                Ok(None) => unseen_since = None,
                Err(e) => {
                    if !unanswered(&e, looked_at.elapsed()) {
                        unseen_since = None;
                    } else {
                        let since = *unseen_since.get_or_insert(looked_at);
                        if self
                            .patience
                            .unseen_at_most
                            .is_some_and(|limit| since.elapsed() >= limit)
                        {
                            return Stall::Unseen(since.elapsed());
                        }
                    }
                    if e.kind() == ErrorKind::Timeout {
                        // The pool's idle connections stalled too (the same middlebox): closed, so
                        // that the next look, soon, connects anew rather than take another of them.
                        close_idle(pool, known);
                        pause = LOOK_AGAIN_AFTER;
                    }
                    tracing::debug!(error = %crate::error_chain(&e),
                        "could not look at the server session of the {what}; looking again")
                }
            }
        }
    }

    /// One look: `Some` when the session has stalled.
    /// `waiting`: how long the watched connection has waited.
    async fn look(&self, waiting: Duration) -> Result<Option<Stall>, Error> {
        let Watch {
            pool,
            known,
            session,
            what,
            awaiting,
            ending,
            patience,
            activity: _,
        } = *self;
        let watcher = format!("connection watching the {what}");
        let asked = Instant::now();
        // Unanswered, it is discarded (it may have stalled the same way), not put back.
        let client = match InUse::get(pool, known, ANSWER_WITHIN).await {
            Ok(client) => client,
            // None within the wait (an idle one that stalled may have been checked): like no answer.
            // A refusal at once (the database down, its slots full) is no stall (review: it closed
            // the pool's idle connections every second).
            Err(e) if e.kind() == ErrorKind::Pool && asked.elapsed() >= ANSWER_WITHIN => {
                return Err(super::session::stalled(ANSWER_WITHIN, &watcher));
            }
            Err(e) => return Err(e),
        };
        let state = session.state_from(&client, &watcher).await?;
        tracing::debug!(?state, "looked at the server session of the {what}");
        let mut answered = true;
        let stall = match state {
            SessionState::Busy => None,
            SessionState::Idle(idle)
                if !awaiting.stalled(&idle, patience.idle_at_most, waiting) =>
            {
                None
            }
            SessionState::Idle(idle) => {
                ending.store(true, Ordering::SeqCst);
                match session.end_if_idle_from(&client, &watcher, &idle).await {
                    Ok(true) => Some(Stall::Idle {
                        idle: idle.waited,
                        ended: true,
                    }),
                    // No longer waiting as it was (the late statement arrived, or was answered), or
                    // gone (the next look says).
                    Ok(false) => {
                        ending.store(false, Ordering::SeqCst);
                        None
                    }
                    Err(e) => {
                        answered = false;
                        tracing::warn!(error = %crate::error_chain(&e),
                        "could not end the server session of the stalled {what}; the server ends it once idle for its idle_session_timeout (a minute unless the connection string sets another; on the relay's own connections from PostgreSQL 14) or once its TCP time-outs notice");
                        Some(Stall::Idle {
                            idle: idle.waited,
                            ended: false,
                        })
                    }
                }
            }
            SessionState::Gone => Some(Stall::Gone),
        };
        if answered {
            client.done();
        } else {
            client.discard();
        }
        Ok(stall)
    }
}

#[cfg(test)]
mod tests;
