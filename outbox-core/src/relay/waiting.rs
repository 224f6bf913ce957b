//! Adaptive wake-ups: writers send a `NOTIFY` only while a relay is waiting for work.
//!
//! A `NOTIFY` makes PostgreSQL take a database-wide lock from the moment the notification is queued
//! until the commit record is flushed, which serialises committing writers. The insert trigger
//! (migration V3) therefore notifies only when it cannot take the **waiting lock** — the advisory
//! lock [`WAITING_LOCK`] — in shared mode, for the rest of the writer's transaction. (Since V11 the
//! trigger's `WHEN` condition tries the lock: while no relay waits, no trigger function runs.) A relay whose
//! workers are all idle takes that lock exclusively on a connection of its own (it *advertises*
//! that it waits); a relay that stays busy (for [`HOLD_THROUGH_BUSY`], or three quarters of the time:
//! [`BusyShare`]) releases it and claims again on its own, so under sustained load writers mostly
//! skip the `NOTIFY`, while at light load, where a relay is busy a millisecond per event, every
//! commit notifies.
//!
//! # No lost wake-up
//!
//! A writer's trigger runs at insert time but its rows become visible only at commit; the lock
//! closes that gap. Take a writer `W` and a relay `R` going idle:
//!
//! - `W` found the lock free and took it shared: it holds it until its transaction has ended (its
//!   rows are visible by then). `R`'s exclusive request waits for `W`, and once it holds the lock,
//!   `R` claims once more: that claim sees `W`'s events. Or `R` held the lock before `W` tried: then
//!   `W` could not take it.
//! - `W` could not take it (`R`, or another relay, holds or is waiting for it): `W` notifies at
//!   commit, and every listening relay wakes up.
//!
//! While `R` waits for the lock, writers cannot take it either (PostgreSQL queues a shared request
//! behind a waiting exclusive one; the trigger's `try` then fails) and notify, so a long writer
//! transaction delays only the advertising, never a wake-up. Several relays queue for the lock one
//! behind the other; one holding it is enough, since a notification wakes them all. A relay's
//! connection that drops releases the lock with it; the relay reconnects and advertises again, its
//! claim after the barrier picking up what committed meanwhile. Without a listening relay nobody
//! takes the lock and writers never notify (relays then poll).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use outbox_queries::queries::listen as sql;
use tokio::sync::{Notify, watch};
use tokio_postgres::error::SqlState;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::claim::FoundWork;
use super::outage::{RECONNECT_CAP, Reconnects};
use super::session::{ANSWER_WITHIN, Session, end_at_shutdown, note_stall, within};
use super::slots::HelperSlot;
use crate::connect::PgConnector;
use crate::error::Error;

/// The `application_name` of the connection a relay advertises on (unless the given config sets
/// one), so operators can tell it apart in `pg_stat_activity`.
pub const WAITING_APPLICATION_NAME: &str = "outbox-relay-waiting";

/// The advisory lock (two-key form: `pg_advisory_lock(1869968504, 1)`; 1869968504 is `outx` in
/// ASCII) that a waiting relay holds exclusively and that the insert trigger tries in shared mode.
/// The two-key form cannot collide with `emit`'s aggregate locks (one 64-bit key).
pub const WAITING_LOCK: (i32, i32) = (1_869_968_504, 1);

/// How long a relay keeps advertising after its workers found work: it stops only once they have
/// not all been idle for this long. At light load a relay is busy for a millisecond or two per
/// event; releasing the lock then and taking it again when idle cost two round trips and one more
/// claim per event, and an event committed while the lock was released was not notified: it waited
/// for the lock to be taken again and the claim after it (benchmark 4: half the events at 200
/// events/s with 4 workers, nine in ten with 1). Under sustained load the relay stays busy and
/// writers stop notifying after this long.
pub(crate) const HOLD_THROUGH_BUSY: Duration = Duration::from_millis(50);

/// Over how long a relay's busy share is measured (see [`BusyShare`]).
const BUSY_WINDOW: Duration = Duration::from_millis(200);

/// The share of time a relay that advertises has been busy, in windows of [`BUSY_WINDOW`]. A relay
/// that keeps up with a high commit rate is idle for moments only, never busy for
/// [`HOLD_THROUGH_BUSY`] at a stretch: once it has been busy for three quarters of a window it stops
/// advertising too (and takes the lock again at its next idle moment, as a relay always does), so
/// that writers do not notify at every commit while it works through them. At light load (a
/// millisecond or two per event at 200 events/s) it stays well under that.
#[derive(Debug)]
struct BusyShare {
    window_start: Instant,
    busy: Duration,
}

impl BusyShare {
    fn new(now: Instant) -> Self {
        BusyShare {
            window_start: now,
            busy: Duration::ZERO,
        }
    }

    /// Counts a busy spell from `spell` to `now`; whether the window just ended was busy for three
    /// quarters of it or more.
    fn mostly_busy(&mut self, spell: Instant, now: Instant) -> bool {
        self.busy += now.saturating_duration_since(spell);
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed < BUSY_WINDOW {
            return false;
        }
        let mostly = self.busy * 4 >= elapsed * 3;
        *self = BusyShare::new(now);
        mostly
    }
}

/// How many of a relay's workers are idle (their last claim found nothing), and how many of
/// their claims found events.
#[derive(Debug, Clone)]
pub(crate) struct IdleWorkers(watch::Sender<usize>, FoundWork);

impl IdleWorkers {
    /// Idle workers, whose claims count what they found in `found`.
    pub(crate) fn new(found: FoundWork) -> Self {
        IdleWorkers(watch::Sender::new(0), found)
    }

    /// A flag for one worker, not idle to begin with.
    pub(crate) fn flag(&self) -> IdleFlag {
        IdleFlag {
            count: self.0.clone(),
            idle: false,
        }
    }

    fn subscribe(&self) -> watch::Receiver<usize> {
        self.0.subscribe()
    }
}

/// One worker's share of [`IdleWorkers`]; counts as busy once dropped.
#[derive(Debug)]
pub(crate) struct IdleFlag {
    count: watch::Sender<usize>,
    idle: bool,
}

impl IdleFlag {
    /// Records whether the worker's last claim found nothing.
    pub(crate) fn set(&mut self, idle: bool) {
        if idle == self.idle {
            return;
        }
        self.idle = idle;
        self.count.send_modify(|n| {
            *n = if idle {
                n.saturating_add(1)
            } else {
                n.saturating_sub(1)
            }
        });
    }
}

impl Drop for IdleFlag {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// Advertises the relay as waiting while all `workers` are idle, until `token` is cancelled.
/// Each time it has taken the waiting lock it wakes one worker (`reclaim`) to claim again: the
/// claim after the barrier (see the module docs).
pub(crate) async fn run(
    connector: PgConnector,
    mut slot: HelperSlot,
    idle: IdleWorkers,
    workers: usize,
    reclaim: Arc<Notify>,
    check_after: Duration,
    token: CancellationToken,
) {
    let mut backoff = Reconnects::up_to(RECONNECT_CAP);
    let found = idle.1.clone();
    let mut idle = idle.subscribe();
    let mut stalled = None;
    loop {
        if !slot.until_workers_have_slots(&token).await {
            return end_at_shutdown(&connector, stalled, WHAT).await;
        }
        let life = Life {
            connector: &connector,
            found: &found,
            workers,
            reclaim: &reclaim,
            check_after,
            token: &token,
        };
        // The workers short of connection slots: this one is given up (dropped, and the lock
        // with it) for them.
        let advertised = tokio::select! {
            r = life.advertise(&mut idle, &mut backoff, &mut stalled) => Some(r),
            () = slot.workers_short() => None,
        };
        match advertised {
            None => slot.gave_way(),
            Some(Ok(())) => return end_at_shutdown(&connector, stalled, WHAT).await,
            Some(Err(e)) => {
                let (delay, warn) = backoff.failed();
                let retry_in_ms = delay.as_millis() as u64;
                if e.is_retryable() {
                    if warn {
                        tracing::warn!(error = %crate::error_chain(&e), retry_in_ms,
                            failed_reconnects = backoff.failures() - 1,
                            "the connection advertising waiting was lost; reconnecting");
                    } else {
                        tracing::debug!(error = %crate::error_chain(&e), retry_in_ms,
                            "the connection advertising waiting: reconnect failed");
                    }
                } else if warn {
                    // A certificate or host-name problem, or a refusal no retry changes: kept
                    // trying (see the listener), logged once a minute.
                    tracing::error!(error = %crate::error_chain(&e), retry_in_ms = delay.as_millis() as u64,
                        "cannot open the connection to advertise waiting; writers will not wake \
                         this relay until it opens");
                } else {
                    tracing::debug!(error = %crate::error_chain(&e), retry_in_ms,
                        "the connection advertising waiting: reconnect failed");
                }
                tokio::select! {
                    _ = token.cancelled() => return end_at_shutdown(&connector, stalled, WHAT).await,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// What the connection advertising waiting is called in errors and logs.
const WHAT: &str = "connection advertising waiting";

/// How long the server waits for the waiting lock before it answers that it could not take it
/// (`lock_timeout`); the relay then asks again at once. A long writer transaction holding the lock
/// shared still only delays the advertising (between two requests a writer may take the lock
/// shared and not notify; the next request waits for that writer, and the claim after the barrier
/// sees its events), while a request with no answer [`ANSWER_WITHIN`] past this means the
/// connection has stalled.
const TAKE_WAITS_AT_MOST: Duration = Duration::from_secs(2);

/// One connection's context.
struct Life<'a> {
    connector: &'a PgConnector,
    /// The relay's claims that found events.
    found: &'a FoundWork,
    workers: usize,
    reclaim: &'a Notify,
    /// How long the lock is held idle before the connection is asked whether it still answers
    /// (the LISTEN connection's [`check_after`](super::listener::check_after)).
    check_after: Duration,
    token: &'a CancellationToken,
}

impl Life<'_> {
    /// One connection's life. `Ok` only when cancelled; the lock goes with the connection. A
    /// connection that stalls (see [`TAKE_WAITS_AT_MOST`], [`ANSWER_WITHIN`]) is left in
    /// `stalled`, for the next one to end its server session, and the lock with it. Cancelled
    /// holding the lock, it gives the lock back; cancelled with a lock request or an unlock
    /// unanswered, or its unlock then unanswered, the session is left in `stalled` too, for
    /// [`end_at_shutdown`] (it may hold the lock, or get it, for good).
    async fn advertise(
        &self,
        idle: &mut watch::Receiver<usize>,
        backoff: &mut Reconnects,
        stalled: &mut Option<Session>,
    ) -> Result<(), Error> {
        let (workers, token) = (self.workers, self.token);
        let (client, connection) = tokio::select! {
            _ = token.cancelled() => return Ok(()),
            c = self.connector.connect() => c?,
        };
        // Aborted when this life ends: a stalled connection's task waits for its answer for
        // ever, and kept its socket open, one per stall (black-box run).
        let mut connection = AbortOnDropHandle::new(tokio::spawn(connection));
        let lost = |r: Result<Result<(), tokio_postgres::Error>, tokio::task::JoinError>| -> Error {
            match r {
                Ok(Err(e)) => e.into(),
                _ => Error::new(
                    crate::error::ErrorKind::Database,
                    "the connection advertising waiting closed",
                ),
            }
        };
        let settings = format!(
            "SET statement_timeout = 0; SET lock_timeout = {}",
            TAKE_WAITS_AT_MOST.as_millis()
        );
        let session = tokio::select! {
            _ = token.cancelled() => return Ok(()),
            r = &mut connection => return Err(lost(r)),
            r = within(ANSWER_WITHIN, WHAT, client.batch_execute(&settings)) => {
                r?;
                let session = Session::of(&client, WHAT).await?;
                note_stall(session.limit_idle(&client, WHAT, self.connector).await, session, stalled)?;
                session
            }
        };
        if let Some(old) = stalled.take() {
            // It may hold the waiting lock still: every writer would notify.
            tokio::select! {
                _ = token.cancelled() => {
                    *stalled = Some(old);
                    return Ok(());
                }
                r = &mut connection => return Err(lost(r)),
                () = old.end_from(&client, WHAT) => {}
            }
        }
        if backoff.connected() {
            tracing::info!("the connection advertising waiting is back");
        }
        let (take, release) = (sql::advertise_waiting(), sql::stop_advertising_waiting());
        let alive = sql::listener_alive();
        loop {
            // Idle: every worker's last claim found nothing. Busy meanwhile, the connection is
            // asked every `check_after` whether it still answers: its session never waits long
            // enough for the server to end it (`Session::limit_idle`), and a stall is found before
            // the connection is needed.
            let mut next_check = Instant::now() + self.check_after;
            loop {
                tokio::select! {
                    _ = token.cancelled() => return Ok(()),
                    r = &mut connection => return Err(lost(r)),
                    r = idle.wait_for(|n| *n >= workers) => { r.map_err(|_| closed())?; break; }
                    _ = tokio::time::sleep_until(next_check) => {}
                }
                tokio::select! {
                    _ = token.cancelled() => {
                        *stalled = Some(session);
                        return Ok(());
                    }
                    r = &mut connection => return Err(lost(r)),
                    r = within(ANSWER_WITHIN, WHAT, alive.bind(&client).one()) => {
                        note_stall(r, session, stalled)?;
                    }
                }
                next_check = Instant::now() + self.check_after;
            }
            let taking = async {
                loop {
                    let limit = TAKE_WAITS_AT_MOST + ANSWER_WITHIN;
                    match tokio::time::timeout(limit, take.bind(&client).one()).await {
                        Ok(Ok(_)) => return Ok(()),
                        Ok(Err(e)) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                            tracing::trace!(
                                "the waiting lock is held by a long writer transaction; asking again"
                            );
                        }
                        Ok(Err(e)) => return Err(Error::from(e)),
                        Err(_) => return Err(super::session::stalled(limit, WHAT)),
                    }
                }
            };
            tokio::select! {
                _ = token.cancelled() => {
                    *stalled = Some(session);
                    return Ok(());
                }
                r = &mut connection => return Err(lost(r)),
                r = taking => note_stall(r, session, stalled)?,
            }
            // Every writer that found the lock free has ended: claim once more.
            self.reclaim.notify_one();
            tracing::trace!("advertising: writers notify");
            // Advertise through short busy spells (see `HOLD_THROUGH_BUSY`); stop once busy that
            // long, or busy most of the time (`BusyShare`).
            let mut share = BusyShare::new(Instant::now());
            // Set when the last window was mostly busy: stop at the start of the next busy spell
            // (at its end the relay is idle again and would only take the lock back at once).
            let mut mostly_busy = false;
            // When the connection is next asked whether it still answers: a deadline that the
            // workers' busy instants (each poll is one) do not move. A quiet spell timed afresh
            // after each was never reached with four workers polling, and a stalled connection
            // kept the lock, every writer notifying, for as long as the relay stayed idle
            // (black-box run: 10 minutes).
            let mut next_check = Instant::now() + self.check_after;
            'holding: loop {
                // Read while every worker is idle: no claim is going on (a worker's claim counts
                // before its worker is idle again).
                let found_before = self.found.count();
                // (The lock is given back once the guard `wait_for` gives has gone: not `Send`.)
                let cancelled = loop {
                    tokio::select! {
                        _ = token.cancelled() => break true,
                        r = &mut connection => return Err(lost(r)),
                        r = idle.wait_for(|n| *n < workers) => { r.map_err(|_| closed())?; break false }
                        _ = tokio::time::sleep_until(next_check) => {}
                    }
                    tokio::select! {
                        r = &mut connection => return Err(lost(r)),
                        r = within(ANSWER_WITHIN, WHAT, alive.bind(&client).one()) => {
                            note_stall(r, session, stalled)?;
                        }
                    }
                    next_check = Instant::now() + self.check_after;
                };
                if cancelled {
                    return give_back(&client, session, stalled).await;
                }
                if mostly_busy {
                    break;
                }
                let spell = Instant::now();
                // Busy only with claims that find nothing (the claim after the barrier, slow on a
                // backlog of events blocked behind dead letters) is no work: the lock is kept.
                // Given back, the relay took it again once idle, and claimed after it: one slow
                // empty claim after another, a database core busy while nothing could be sent
                // (black-box run: 100 000 blocked events, 8 claims a second).
                let cancelled = loop {
                    tokio::select! {
                        _ = token.cancelled() => break true,
                        r = &mut connection => return Err(lost(r)),
                        r = tokio::time::timeout(HOLD_THROUGH_BUSY, idle.wait_for(|n| *n >= workers)) => match r {
                            Ok(r) => { r.map_err(|_| closed())?; break false }
                            Err(_) if self.found.count() != found_before => break 'holding,
                            Err(_) => {}
                        },
                    }
                };
                if cancelled {
                    return give_back(&client, session, stalled).await;
                }
                // A spell whose claims found nothing counts as idle.
                let now = Instant::now();
                let worked = self.found.count() != found_before;
                mostly_busy = share.mostly_busy(if worked { spell } else { now }, now);
            }
            tokio::select! {
                _ = token.cancelled() => {
                    *stalled = Some(session);
                    return Ok(());
                }
                r = &mut connection => return Err(lost(r)),
                r = within(ANSWER_WITHIN, WHAT, release.bind(&client).one()) => {
                    note_stall(r, session, stalled)?;
                }
            }
            tracing::trace!("busy: writers do not notify");
        }
    }
}

/// Cancelled holding the waiting lock: gives it back, within [`ANSWER_WITHIN`]. Closing the
/// connection gives it back too, unless the connection has stalled unnoticed (a middlebox keeping
/// the server's side open): no answer leaves the session in `stalled`, for [`end_at_shutdown`].
/// Any other error means the connection, and the lock with it, is gone.
async fn give_back(
    client: &tokio_postgres::Client,
    session: Session,
    stalled: &mut Option<Session>,
) -> Result<(), Error> {
    let release = sql::stop_advertising_waiting();
    let answer = within(ANSWER_WITHIN, WHAT, release.bind(client).one()).await;
    let _ = note_stall(answer, session, stalled);
    Ok(())
}

fn closed() -> Error {
    Error::new(
        crate::error::ErrorKind::Database,
        "the relay's workers are gone",
    )
}

#[cfg(test)]
mod tests;
