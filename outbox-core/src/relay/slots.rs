//! Connection slots: the relay's workers come before its own helper connections.
//!
//! A role's `CONNECTION LIMIT`, or the server's `max_connections`, can leave fewer slots than a
//! relay asks for. The LISTEN connection and the one advertising waiting connect first, and with a
//! tight limit they took every slot: the workers' pool got none, and the relay published nothing,
//! for good, while saying it had started (black-box run: 0 of 500 events in 75 s, the role limited
//! to 2 connections). Those two connections only spare the relay its polls; the workers are what
//! publishes. So a worker refused a connection for want of slots (SQLSTATE 53300) makes them give
//! theirs up, and they connect again only once the workers have got through for [`QUIET_FOR`]
//! without a refusal (the workers may need more connections than they hold: taken back at the
//! first success, the slots would go to and fro). Meanwhile the relay polls, and writers
//! notify nobody.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_postgres::error::{DbError, SqlState};
use tokio_util::sync::CancellationToken;

/// How long the workers must have got through, none refused a connection, before the helpers
/// connect again.
pub(crate) const QUIET_FOR: Duration = Duration::from_secs(30);

/// The workers' side of the slots.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    /// Refused a connection, and none has got through since.
    short: bool,
    /// Since when a worker has got through after the last refusal (`None`: none ever was): the
    /// helpers connect again once that is [`QUIET_FOR`] ago.
    through_since: Option<Instant>,
}

/// How often the relay says that it runs with fewer connections than workers.
const SAY_FEWER_EVERY: Duration = Duration::from_secs(60);

/// Whether the relay's workers are short of connection slots, shared by the workers (who say so)
/// and the helper connections (who give way).
#[derive(Debug, Clone)]
pub(crate) struct Slots {
    short: watch::Sender<State>,
    /// Wakes the workers backing off once a helper has given its slot up.
    workers: Arc<Notify>,
    /// [`QUIET_FOR`], shorter in tests.
    quiet_for: Duration,
    /// When the relay last said it runs with fewer connections than workers.
    said_fewer: Arc<std::sync::Mutex<Option<Instant>>>,
}

impl Slots {
    /// `workers`: what wakes the workers backing off after failures.
    pub(crate) fn new(workers: Arc<Notify>) -> Self {
        Slots {
            short: watch::Sender::new(State::default()),
            workers,
            quiet_for: QUIET_FOR,
            said_fewer: Arc::default(),
        }
    }

    /// A worker's batch failed with `error`: when the database refused it a connection for want
    /// of slots, the helpers give theirs up.
    pub(crate) fn worker_failed(&self, error: &(dyn StdError + 'static)) {
        if too_many_connections(error) {
            self.refused();
        }
    }

    /// A worker was refused a connection for want of slots.
    fn refused(&self) {
        self.short.send_modify(|s| {
            s.short = true;
            s.through_since = None;
        });
    }

    /// Says, once a minute, that the relay runs with fewer connections than workers (see
    /// [`fewer_than_workers`]).
    pub(crate) fn say_fewer_than_workers(&self, held: usize, workers: usize) {
        let now = Instant::now();
        let mut said = self.said_fewer.lock().unwrap_or_else(|p| p.into_inner());
        if said.is_none_or(|t| now.duration_since(t) >= SAY_FEWER_EVERY) {
            *said = Some(now);
            tracing::warn!(
                connections = held,
                workers,
                "the database refuses the relay more connections (too many connections: the \
                 role's CONNECTION LIMIT or the server's max_connections): the workers without \
                 one wait for a slot; lower --concurrency (OUTBOX_CONCURRENCY) or raise the limit"
            );
        }
    }

    /// A worker's batch went through: the helpers may connect again.
    pub(crate) fn worker_succeeded(&self) {
        self.short.send_if_modified(|s| {
            let was_short = std::mem::replace(&mut s.short, false);
            if was_short {
                s.through_since = Some(Instant::now());
            }
            was_short
        });
    }

    /// One helper's view.
    pub(crate) fn helper(&self, what: &'static str) -> HelperSlot {
        HelperSlot {
            short: self.short.subscribe(),
            workers: Arc::clone(&self.workers),
            what,
            quiet_for: self.quiet_for,
        }
    }
}

/// A helper connection's side of [`Slots`].
#[derive(Debug)]
pub(crate) struct HelperSlot {
    short: watch::Receiver<State>,
    workers: Arc<Notify>,
    what: &'static str,
    quiet_for: Duration,
}

impl HelperSlot {
    /// Resolves once the workers are short of slots (at once if they are): the helper then drops
    /// its connection and calls [`gave_way`](Self::gave_way).
    pub(crate) async fn workers_short(&mut self) {
        if self.short.wait_for(|s| s.short).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Says so, and wakes the workers backing off: the slot is theirs.
    pub(crate) fn gave_way(&self) {
        tracing::warn!(
            "the database refused the relay's workers a connection (too many connections: the \
             role's CONNECTION LIMIT or the server's max_connections); the {} gives its slot \
             to them, and the relay polls until they have had theirs for a while",
            self.what
        );
        self.workers.notify_waiters();
    }

    /// Waits until the workers have got through for [`QUIET_FOR`] since the last refusal of a
    /// connection, none refused meanwhile (at once if none ever was); `false` when `token` is
    /// cancelled first.
    pub(crate) async fn until_workers_have_slots(&mut self, token: &CancellationToken) -> bool {
        let mut waited = false;
        loop {
            waited |= self.short.borrow().short;
            let through_since = tokio::select! {
                _ = token.cancelled() => return false,
                r = self.short.wait_for(|s| !s.short) => match r {
                    Ok(s) => s.through_since,
                    Err(_) => return true,
                },
            };
            let quiet = through_since.map_or(self.quiet_for, |t| t.elapsed());
            if quiet < self.quiet_for {
                waited = true;
                tokio::select! {
                    _ = token.cancelled() => return false,
                    () = tokio::time::sleep(self.quiet_for - quiet) => {}
                }
                continue;
            }
            if waited {
                tracing::info!(
                    "the relay's workers have had their connections for {} s: the {} connects again",
                    self.quiet_for.as_secs(),
                    self.what
                );
            }
            return true;
        }
    }
}

/// Whether `error` is a worker refused a connection for want of slots while the relay's pool holds
/// `held` others (all in use: the pool opens one only then): the relay runs with fewer connections
/// than workers. That is no failure of the relay: counted as one, an idle relay with a single slot
/// kept raising `outbox_relay_errors_total` (black-box run), which the README's alert reads as a
/// relay failing. The worker waits for a slot instead.
pub(crate) fn fewer_than_workers(error: &(dyn StdError + 'static), held: usize) -> bool {
    held > 0 && too_many_connections(error)
}

/// Whether `error`, or one of its sources, is the server refusing a connection for want of slots.
fn too_many_connections(error: &(dyn StdError + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        let db = e.downcast_ref::<DbError>().or_else(|| {
            e.downcast_ref::<tokio_postgres::Error>()
                .and_then(tokio_postgres::Error::as_db_error)
        });
        if db.is_some_and(|db| *db.code() == SqlState::TOO_MANY_CONNECTIONS) {
            return true;
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The helpers connect at once while no worker was refused; once one was, they wait for a
    /// worker to get through and for the quiet time without a refusal, a later refusal starting
    /// the wait again.
    #[tokio::test]
    async fn helpers_come_back_once_the_workers_have_had_their_slots_a_while() {
        let quiet = Duration::from_millis(400);
        let slots = Slots {
            quiet_for: quiet,
            ..Slots::new(Arc::new(Notify::new()))
        };
        let mut helper = slots.helper("LISTEN connection");
        let token = CancellationToken::new();
        assert!(
            helper.until_workers_have_slots(&token).await,
            "none refused"
        );
        slots.refused();
        tokio::time::timeout(Duration::from_millis(100), helper.workers_short())
            .await
            .expect("told to give way");
        let back = tokio::spawn(async move {
            assert!(helper.until_workers_have_slots(&token).await);
            Instant::now()
        });
        tokio::time::sleep(quiet * 2).await;
        assert!(!back.is_finished(), "still short: no worker got through");
        slots.worker_succeeded();
        tokio::time::sleep(quiet / 2).await;
        slots.refused();
        slots.worker_succeeded();
        let last_refusal = Instant::now();
        let came_back = back.await.unwrap();
        assert!(
            came_back >= last_refusal + quiet,
            "back {:?} after the last refusal",
            came_back - last_refusal
        );
    }
}
