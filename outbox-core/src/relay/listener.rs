//! LISTEN/NOTIFY wake-ups on a dedicated connection, reconnecting when it drops.

use futures::StreamExt;
use outbox_queries::queries::listen as sql;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::CancellationToken;

use super::outage::{RECONNECT_CAP, Reconnects};
use super::session::{ANSWER_WITHIN, Session, end_at_shutdown, note_stall, within};
use super::slots::HelperSlot;
use crate::connect::{ConnectConfig, PgConnector};
use crate::error::Error;

/// The `application_name` of the LISTEN connection (unless the given config sets one), so operators
/// can tell it apart in `pg_stat_activity`.
pub const LISTENER_APPLICATION_NAME: &str = "outbox-relay-listener";

/// What the relay listens through, as given to the builder; made a connector in `build()`.
pub(crate) enum ListenTarget {
    /// A tokio-postgres configuration: TLS by its `sslmode`, certificates not checked.
    Config(tokio_postgres::Config),
    /// A connector (the pool's TLS, password provider, ...).
    Connector(PgConnector),
}

impl ListenTarget {
    /// The connector of the LISTEN connection (and of the one advertising waiting), unnamed.
    pub(crate) fn resolve(self) -> Result<PgConnector, Error> {
        Ok(match self {
            ListenTarget::Config(config) => PgConnector::new(ConnectConfig::from_pg(config))?,
            ListenTarget::Connector(c) => c,
        })
    }
}

/// Wakes one idle worker to claim (or the next to go idle: the wake-up is kept); a claim that
/// comes back full wakes another.
fn wake(wake: &Notify) {
    wake.notify_one();
}

/// Whom the LISTEN connection wakes.
#[derive(Clone)]
pub(crate) struct Wakeups {
    /// One idle worker, for a notification.
    pub(crate) claim: Arc<Notify>,
    /// Every worker backing off after failures, when the connection is back after a loss.
    pub(crate) database_back: Arc<Notify>,
}

/// After how long without a notification the LISTEN connection is asked whether it still
/// answers: the poll interval (within 1–30 s), so that a dead one costs about one more poll
/// interval of latency, and checking it costs less than the polls. A connection that stalls
/// without closing (a middlebox holding the server's bytes, the sockets open) was never noticed:
/// the relay fell back to polling for good, without a line (black-box run: 100 s, then stopped).
pub(crate) fn check_after(poll_interval: Duration) -> Duration {
    poll_interval.clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// Listens until `token` is cancelled. After every (re)connection it wakes the workers once, so
/// events committed while the connection was down are claimed without waiting for the poll; after
/// a loss, the workers backing off too (a worker's back-off grows to 30 s: after a database outage
/// of a minute the relay stayed idle up to half a minute once the database was back). The
/// connection is checked after `check_after` without a notification (see [`check_after`]).
pub(crate) async fn run(
    connector: PgConnector,
    mut slot: HelperSlot,
    wakeups: Wakeups,
    check_after: Duration,
    token: CancellationToken,
) {
    let mut backoff = Reconnects::up_to(RECONNECT_CAP);
    let mut stalled = None;
    loop {
        if !slot.until_workers_have_slots(&token).await {
            return end_at_shutdown(&connector, stalled, WHAT).await;
        }
        let listening = listen(
            &connector,
            &wakeups,
            check_after,
            &token,
            &mut backoff,
            &mut stalled,
        );
        // The workers short of connection slots: this one is given up (dropped) for them.
        let listened = tokio::select! {
            r = listening => Some(r),
            () = slot.workers_short() => None,
        };
        let e = match listened {
            Some(Ok(())) => return end_at_shutdown(&connector, stalled, WHAT).await,
            Some(Err(e)) => e,
            None => {
                slot.gave_way();
                continue;
            }
        };
        let (delay, warn) = backoff.failed();
        let retry_in_ms = delay.as_millis() as u64;
        if e.is_retryable() {
            // Once when it is lost (and a reminder a minute), not for every failed reconnect.
            if warn {
                tracing::warn!(error = %crate::error_chain(&e), retry_in_ms, failed_reconnects = backoff.failures() - 1,
                    "LISTEN connection lost; falling back to polling until it is back");
            } else {
                tracing::debug!(error = %crate::error_chain(&e), retry_in_ms, "LISTEN connection: reconnect failed");
            }
        } else if warn {
            // A certificate or host-name problem, or a refusal no retry changes (a privilege, a
            // function missing): it lasts until someone fixes the server, its certificate (an
            // expired one renewed, say) or the grants, so keep trying, at the backoff's pace,
            // rather than poll for the rest of the process's life (logged once a minute).
            tracing::error!(error = %crate::error_chain(&e), retry_in_ms = delay.as_millis() as u64,
                "cannot open the LISTEN connection; relying on polling until it opens");
        } else {
            tracing::debug!(error = %crate::error_chain(&e), retry_in_ms, "LISTEN connection: reconnect failed");
        }
        wake(&wakeups.claim);
        tokio::select! {
            _ = token.cancelled() => return end_at_shutdown(&connector, stalled, WHAT).await,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// What the LISTEN connection is called in errors and logs.
const WHAT: &str = "LISTEN connection";

/// One connection's life: connect, LISTEN, forward notifications. `Ok` only when cancelled. A
/// connection that stalls (a statement unanswered within [`ANSWER_WITHIN`]) is left in `stalled`,
/// for the next one to end its server session. Cancelled while listening, it is asked once more
/// whether it answers; cancelled with a statement unanswered, or then silent, its session is left
/// in `stalled` too, for [`end_at_shutdown`] (it would go on listening, unread, for good).
async fn listen(
    connector: &PgConnector,
    wakeups: &Wakeups,
    check_after: Duration,
    token: &CancellationToken,
    backoff: &mut Reconnects,
    stalled: &mut Option<Session>,
) -> Result<(), Error> {
    let claim = &*wakeups.claim;
    let (client, mut connection) = tokio::select! {
        _ = token.cancelled() => return Ok(()),
        c = connector.connect() => c?,
    };
    // A plain `tokio::spawn(connection)` would drop notifications: drive it here and read them.
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    let Some(session) = ask(Session::of(&client, WHAT), &mut messages, claim, token).await? else {
        return Ok(());
    };
    if let Some(old) = stalled.take() {
        // Its session still listens, unread: end it before it holds back the notification queue.
        let ending = async {
            old.end_from(&client, WHAT).await;
            Ok(())
        };
        if ask(ending, &mut messages, claim, token).await?.is_none() {
            *stalled = Some(old);
            return Ok(());
        }
    }
    // Every statement from here on is given `ANSWER_WITHIN`; a stalled connection's session is
    // ended by the next one.
    let statement = sql::listen_outbox_events();
    let listening = within(ANSWER_WITHIN, WHAT, statement.bind(&client));
    let answer = ask(listening, &mut messages, claim, token).await;
    if note_stall(answer, session, stalled)?.is_none() {
        *stalled = Some(session);
        return Ok(());
    }
    let limited = ask(
        session.limit_idle(&client, WHAT, connector),
        &mut messages,
        claim,
        token,
    )
    .await;
    if note_stall(limited, session, stalled)?.is_none() {
        *stalled = Some(session);
        return Ok(());
    }
    let after_a_loss = backoff.failures() > 0;
    if backoff.connected() {
        tracing::info!("LISTEN connection back: listening for outbox notifications again");
    } else {
        tracing::debug!("listening for outbox notifications");
    }
    if after_a_loss {
        wakeups.database_back.notify_waiters();
    }
    wake(claim);
    let alive = sql::listener_alive();
    // Asked every `check_after` whether it still answers, notifications or not: its session never
    // waits long enough for the server to end it (`Session::limit_idle`).
    let mut next_check = tokio::time::Instant::now() + check_after;
    loop {
        // Until the next check (its messages read meanwhile, as they drive the connection).
        let quiet = tokio::select! {
            _ = token.cancelled() => {
                // Asked once more: one stalled unnoticed is ended from a new connection.
                let check = within(ANSWER_WITHIN, WHAT, alive.bind(&client).one());
                let answer = ask(check, &mut messages, claim, &CancellationToken::new()).await;
                let _ = note_stall(answer, session, stalled);
                return Ok(());
            }
            message = messages.next() => { on_message(message, claim)?; false }
            _ = tokio::time::sleep_until(next_check) => true,
        };
        if quiet {
            next_check = tokio::time::Instant::now() + check_after;
            let check = within(ANSWER_WITHIN, WHAT, alive.bind(&client).one());
            let answer = ask(check, &mut messages, claim, token).await;
            if note_stall(answer, session, stalled)?.is_none() {
                *stalled = Some(session);
                return Ok(());
            }
        }
    }
}

/// Drives the connection (its `messages`: notifications wake a worker) until `statement` has
/// answered; `None` when cancelled first.
async fn ask<T, M>(
    statement: impl Future<Output = Result<T, Error>>,
    messages: &mut M,
    claim: &Notify,
    token: &CancellationToken,
) -> Result<Option<T>, Error>
where
    M: futures::Stream<Item = Result<AsyncMessage, tokio_postgres::Error>> + Unpin,
{
    tokio::pin!(statement);
    loop {
        tokio::select! {
            _ = token.cancelled() => return Ok(None),
            message = messages.next() => on_message(message, claim)?,
            answer = &mut statement => return answer.map(Some),
        }
    }
}

fn on_message(
    message: Option<Result<AsyncMessage, tokio_postgres::Error>>,
    wakeups: &Notify,
) -> Result<(), Error> {
    match message {
        Some(Ok(AsyncMessage::Notification(_))) => {
            wake(wakeups);
            Ok(())
        }
        Some(Ok(_)) => Ok(()),
        Some(Err(e)) => Err(e.into()),
        None => Err(Error::new(
            crate::error::ErrorKind::Database,
            "the LISTEN connection closed",
        )),
    }
}
