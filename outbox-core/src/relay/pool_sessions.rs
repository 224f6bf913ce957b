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

    /// Forgets `client`'s session (its connection is being closed): the session, when known.
    pub(crate) fn forget(&self, client: &Object) -> Option<Session> {
        self.lock().remove(&key(client, Object::metrics(client)))
    }

    /// Closes the pool's idle connections: the sessions known among them.
    pub(crate) fn close_idle(&self, pool: &Pool) -> Vec<Session> {
        let mut known = self.lock();
        let mut closed = Vec::new();
        drop(pool.retain(|wrapper, metrics| {
            closed.extend(known.remove(&key(wrapper, &metrics)));
            false
        }));
        // Behind a pooler, none is the connection's own (`key_data.rs`).
        closed.retain(Session::is_direct);
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
/// have ended theirs. Best effort: the server's own time-outs end what this cannot.
pub(crate) fn end_later(pool: Pool, sessions: Vec<Session>) {
    if sessions.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        tokio::time::sleep(CLOSE_GRACE).await;
        let client = match tokio::time::timeout(ANSWER_WITHIN, pool.get()).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return gave_up(&Error::from(e), sessions.len()),
            Err(_) => {
                let e = super::session::stalled(ANSWER_WITHIN, "new pool connection");
                return gave_up(&e, sessions.len());
            }
        };
        let mut ended = 0;
        for session in &sessions {
            match session.end_quietly_from(&client, WHAT).await {
                Ok(true) => ended += 1,
                Ok(false) => {}
                Err(e) => {
                    // Not back to the pool: it may have stalled the same way.
                    drop(Object::take(client));
                    return gave_up(&e, sessions.len() - ended);
                }
            }
        }
        if ended > 0 {
            tracing::info!(
                ended,
                "ended the server sessions of pool connections closed after a stall"
            );
        }
    });
}

fn gave_up(e: &Error, left: usize) {
    tracing::warn!(error = %crate::error_chain(e), left,
        "could not end the server sessions of pool connections closed after a stall; the server ends them once its own time-outs notice");
}
