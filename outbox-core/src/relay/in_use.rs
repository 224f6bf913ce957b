//! A pool connection one of the relay's tasks is using, discarded unless given back.
//!
//! A task bounded by a time-out (the gauges' refresh, a look at a watched session, the watch for
//! the database coming back) is dropped with its statement unanswered when the time runs out. Its
//! connection must then not go back to the pool, where the next claim would stall on it, and its
//! server session, which a middlebox may keep open, is ended like those of the connections closed
//! after a claim's stall (`pool_sessions.rs`).

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use deadpool_postgres::{Object, Pool};

use super::pool_sessions::PoolSessions;
use crate::error::Error;

/// A connection of `pool` in use: back to the pool with [`done`](Self::done); discarded when
/// dropped otherwise.
pub(crate) struct InUse<'a> {
    /// `None` once given back or discarded.
    client: Option<Object>,
    pool: &'a Pool,
    known: &'a PoolSessions,
}

impl<'a> InUse<'a> {
    /// A connection of `pool` within `wait`, its session learned the first time.
    pub(crate) async fn get(
        pool: &'a Pool,
        known: &'a PoolSessions,
        wait: Duration,
    ) -> Result<InUse<'a>, Error> {
        let client = match tokio::time::timeout(wait, pool.get()).await {
            Ok(got) => got?,
            Err(_) => {
                return Err(Error::new(
                    crate::ErrorKind::Pool,
                    format!("no connection from the pool within {wait:?}"),
                ));
            }
        };
        let in_use = InUse {
            client: Some(client),
            pool,
            known,
        };
        // Unanswered: dropped, so discarded.
        known.learn(pool, &in_use).await?;
        Ok(in_use)
    }

    /// Gives the connection back to the pool: its last statement was answered.
    pub(crate) fn done(mut self) {
        drop(self.client.take());
    }

    /// Discards the connection now (see the module's docs).
    pub(crate) fn discard(mut self) {
        if let Some(client) = self.client.take() {
            self.known.discard(self.pool, client);
        }
    }
}

impl Deref for InUse<'_> {
    type Target = Object;

    fn deref(&self) -> &Object {
        // Set until `done` or `discard`, which take `self`.
        self.client
            .as_ref()
            .unwrap_or_else(|| unreachable!("in use"))
    }
}

impl DerefMut for InUse<'_> {
    fn deref_mut(&mut self) -> &mut Object {
        self.client
            .as_mut()
            .unwrap_or_else(|| unreachable!("in use"))
    }
}

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            self.known.discard(self.pool, client);
        }
    }
}
