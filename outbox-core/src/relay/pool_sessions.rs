//! The server sessions behind the pool's connections, so that those a stall leaves behind can be
//! ended.
//!
//! After a claim's connection stalls (a middlebox holding its bytes, the sockets open), that
//! connection and the pool's idle ones are closed: they went the same way. Closing a stalled
//! connection ends nothing on the server, though: its session stays until the server's own TCP
//! time-outs notice (two hours by default; behind a proxy that keeps the server's side open,
//! never), each holding a connection slot, and a link that stalls now and then would leave a pool's
//! worth each time. So the relay learns each pool connection's session the first time it claims on
//! it (one round trip per connection, not per batch) and, after a stall, ends those still there
//! from a new connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::{ClientWrapper, Metrics, Object, Pool};

use super::session::{ANSWER_WITHIN, Session};
use crate::error::Error;

/// What a pool connection is called in the log.
const WHAT: &str = "pool connection";

/// How long the closed connections are given to end their sessions themselves (those that did
/// not stall send `Terminate` as they close) before the rest are ended.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// The known sessions of the pool's connections, by [`Key`].
#[derive(Debug, Default)]
pub(crate) struct PoolSessions {
    known: Mutex<HashMap<Key, Session>>,
}

impl PoolSessions {
    /// Learns `client`'s session unless known (one round trip within 5 s; a time-out is an
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) error: the connection has stalled).
    pub(crate) async fn learn(&self, pool: &Pool, client: &Object) -> Result<(), Error> {
        let created = key(client, Object::metrics(client));
        if self.lock().contains_key(&created) {
            return Ok(());
        }
        let session = Session::of(client, WHAT).await?;
        let mut known = self.lock();
        // Connections the pool dropped on its own (closed by the server, failing their
        // recycling) leave entries behind: past a few pools' worth, only those of idle
        // connections are kept; those of connections in use are learned again on their next
        // claim.
        if known.len() >= 4 * pool.status().max_size.max(1) {
            let mut idle = std::collections::HashSet::new();
            drop(pool.retain(|wrapper, metrics| {
                idle.insert(key(wrapper, &metrics));
                true
            }));
            known.retain(|created, _| idle.contains(created));
        }
        known.insert(created, session);
        Ok(())
    }

    /// `client`'s session, when known.
    pub(crate) fn session(&self, client: &Object) -> Option<Session> {
        self.lock()
            .get(&key(client, Object::metrics(client)))
            .copied()
    }

    /// Forgets `client`'s session (its connection is being closed): the session, when known.
    pub(crate) fn forget(&self, client: &Object) -> Option<Session> {
        self.lock().remove(&key(client, Object::metrics(client)))
    }

    /// Takes `client` out of the pool and closes it (its conversation may be out of step: a
    /// statement was left unanswered), and ends its session a moment later if known.
    pub(crate) fn discard(&self, pool: &Pool, client: Object) {
        let session = self.forget(&client);
        drop(Object::take(client));
        end_later(pool.clone(), session.into_iter().collect());
    }

    /// Closes the pool's idle connections: the sessions known among them.
    pub(crate) fn close_idle(&self, pool: &Pool) -> Vec<Session> {
        let mut known = self.lock();
        let mut closed = Vec::new();
        drop(pool.retain(|wrapper, metrics| {
            closed.extend(known.remove(&key(wrapper, &metrics)));
            false
        }));
        closed
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Session>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A pool connection told from the others without touching it: where its statement cache lives
/// (no two live connections share one) and when the pool made it (so that a later connection
/// whose cache lands at the same address is another).
type Key = (usize, Instant);

fn key(wrapper: &ClientWrapper, metrics: &Metrics) -> Key {
    (
        Arc::as_ptr(&wrapper.statement_cache) as usize,
        metrics.created,
    )
}

/// Ends `sessions` (of connections just closed after a stall) that are still there, from a new
/// connection of `pool`, in a task of its own: a moment later, so that those that did not stall
/// have ended theirs, and again, less and less often, while the database cannot be reached (the
/// outage may go on), for [`KEEP_TRYING`]; after that the server's own time-outs are left to it.
pub(crate) fn end_later(pool: Pool, sessions: Vec<Session>) {
    let mut left: Vec<Session> = sessions.into_iter().filter(Session::is_direct).collect();
    if left.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let started = tokio::time::Instant::now();
        let (mut pause, mut ended, mut failed) = (CLOSE_GRACE, 0, None);
        loop {
            tokio::time::sleep(pause).await;
            if let Err(e) = end_some(&pool, &mut left, &mut ended).await {
                tracing::debug!(error = %crate::error_chain(&e), left = left.len(),
                    "could not end the server sessions of pool connections closed after a stall yet; trying again");
                failed = Some(e);
            }
            if left.is_empty() || started.elapsed() >= KEEP_TRYING {
                break;
            }
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
        if ended > 0 {
            tracing::info!(
                ended,
                "ended the server sessions of pool connections closed after a stall"
            );
        }
        if let (false, Some(e)) = (left.is_empty(), failed) {
            tracing::warn!(error = %crate::error_chain(&e), left = left.len(),
                "could not end the server sessions of pool connections closed after a stall; the server ends them once idle for its idle_session_timeout (a minute unless the connection string sets another; on the relay's own connections from PostgreSQL 14) or once its TCP time-outs notice");
        }
    });
}

/// How long [`end_later`] keeps trying.
const KEEP_TRYING: Duration = Duration::from_secs(600);

/// The longest pause between two of [`end_later`]'s tries.
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// One try: ends what it can of `left` (taking each out as it is ended or found gone), counting
/// in `ended`.
async fn end_some(pool: &Pool, left: &mut Vec<Session>, ended: &mut usize) -> Result<(), Error> {
    let client = match tokio::time::timeout(ANSWER_WITHIN, pool.get()).await {
        Ok(got) => got?,
        Err(_) => {
            return Err(super::session::stalled(
                ANSWER_WITHIN,
                "new pool connection",
            ));
        }
    };
    while let Some(session) = left.last().copied() {
        match session.end_quietly_from(&client, WHAT).await {
            Ok(was_there) => {
                left.pop();
                *ended += usize::from(was_there);
            }
            Err(e) => {
                // Not back to the pool: it may have stalled the same way.
                drop(Object::take(client));
                return Err(e);
            }
        }
    }
    Ok(())
}
