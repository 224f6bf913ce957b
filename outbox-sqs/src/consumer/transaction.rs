//! A delivery's transaction: the inbox record, the handler, the commit, each database step
//! within its time limit, and the connection closed when it is left mid-statement.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use outbox_core::{CancellationToken, DecodeEvent};

use super::Shared;
use super::envelope::Envelope;
use super::handler::{Handler, HandlerError};
use crate::error::panic_text;

/// Why a handled message failed.
pub(crate) enum Failure {
    /// The database failed or did not answer.
    Database(HandlerError),
    /// The handler failed, panicked or ran out of time.
    Handler(HandlerError),
    /// Shutdown came while it waited (for a connection, a lock): nothing was committed.
    Shutdown,
}

/// The transaction: inbox row, handler, commit. `Ok(false)` for a duplicate.
///
/// No database step waits for ever: a database that stops answering (a partition keeps the
/// connection open and silent) fails the delivery as a database failure instead of holding the
/// unit, and shutdown, for good. What may legitimately wait long (a connection from a busy pool,
/// the inbox row of a concurrent delivery of the same event, which waits for that handler) is
/// given the handler's time-out more, and is given up at shutdown (nothing is committed yet);
/// BEGIN and the steps after the handler are given [`Shared::database_timeout`]. A connection
/// given up mid-statement, or under a handler given up mid-way, is closed, not handed back to the
/// pool.
pub(crate) async fn apply<T, H>(
    shared: &Shared,
    handler: &H,
    event: T,
    env: &Envelope,
    token: &CancellationToken,
) -> Result<bool, Failure>
where
    T: DecodeEvent + Send + 'static,
    H: Handler<T>,
{
    let short = shared.database_timeout();
    let long = shared.config.handler_timeout.saturating_add(short);
    let mut client = step(long, "a connection", Some(token), shared.pool.get()).await?;
    let mut stuck = false;
    let limits = Limits { short, long, token };
    let result = transact(shared, handler, event, env, &mut client, limits, &mut stuck).await;
    if stuck {
        drop(deadpool_postgres::Object::take(client));
    }
    result
}

/// The time limits of [`apply`]'s steps, and shutdown.
#[derive(Clone, Copy)]
struct Limits<'a> {
    short: Duration,
    long: Duration,
    token: &'a CancellationToken,
}

/// Runs a database step within `limit`: its error or silence is a [`Failure::Database`];
/// [`Failure::Shutdown`] when `token` (given) is cancelled first.
async fn step<T, E>(
    limit: Duration,
    what: &str,
    token: Option<&CancellationToken>,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, Failure>
where
    E: Into<HandlerError>,
{
    let shutdown = async {
        match token {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        _ = shutdown => Err(Failure::Shutdown),
        done = tokio::time::timeout(limit, work) => match done {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(Failure::Database(e.into())),
            Err(_) => Err(Failure::Database(
                format!("the database did not answer within {limit:?} ({what})").into(),
            )),
        },
    }
}

/// [`apply`]'s transaction on `client`; sets `stuck` when the connection must not be reused.
async fn transact<T, H>(
    shared: &Shared,
    handler: &H,
    event: T,
    env: &Envelope,
    client: &mut deadpool_postgres::Object,
    limits: Limits<'_>,
    stuck: &mut bool,
) -> Result<bool, Failure>
where
    T: DecodeEvent + Send + 'static,
    H: Handler<T>,
{
    let Limits { short, long, token } = limits;
    // Every failure from here on may leave the connection mid-statement: only a clean end (a
    // commit, a duplicate, a handler's own error) hands it back.
    *stuck = true;
    let tx = step(short, "BEGIN", Some(token), client.transaction()).await?;
    let first = step(
        long,
        "the inbox record",
        Some(token),
        outbox_core::process_once(&tx, &shared.config.name, env.event_id),
    )
    .await?;
    if !first {
        // Nothing was written: dropping the transaction rolls it back.
        *stuck = false;
        return Ok(false);
    }
    // A panicking handler is a failed handler: logged, counted, its message hidden for the retry
    // delay (not left to reappear after the visibility time-out, unseen). Its transaction is
    // dropped, rolling back.
    // A handler that runs past its time limit is given up the same way: dropped mid-way, its
    // transaction with it.
    let handler_limit = shared.config.handler_timeout;
    let handled = tokio::time::timeout(
        handler_limit,
        AssertUnwindSafe(handler.handle(event, env, &tx)).catch_unwind(),
    )
    .await
    .map_err(|_| {
        Failure::Handler(format!("the handler did not finish within {handler_limit:?}").into())
    })?
    .map_err(|panic| {
        Failure::Handler(format!("the handler panicked: {}", panic_text(&*panic)).into())
    })?;
    let (name, id) = (&shared.config.name, env.event_id);
    if let Err(e) = handled {
        // A handler that ended the transaction itself before failing has committed what it
        // committed, the inbox record perhaps too (its redelivery is then a duplicate): said, not
        // "rolled back" (black-box run). Asked only of failures; an aborted transaction fails the
        // question, and is the usual case.
        let check = outbox_core::recorded_in_this_transaction(&tx, name, id);
        let ended = match tokio::time::timeout(short, check).await {
            Ok(Ok(ours)) => !ours,
            // The connection lost under the handler (its session ended, the network): the
            // database's failure, which pauses receiving, not the handler's (black-box run).
            Ok(Err(_)) if tx.client().is_closed() => return Err(Failure::Database(e)),
            // Refused: the transaction aborted by the failed statement.
            Ok(Err(_)) => false,
            // Unanswered: the connection is closed (`stuck`).
            Err(_) => return Err(Failure::Database(e)),
        };
        *stuck = false;
        return Err(Failure::Handler(if ended {
            format!("{}; {ENDED_BY_HANDLER}", outbox_core::error_chain(&*e)).into()
        } else {
            e
        }));
    }
    // A handler that ignored a failed statement returns `Ok` with the transaction aborted, and its
    // COMMIT would roll back without an error; one that ran COMMIT or ROLLBACK itself has ended
    // the transaction, and ours would commit nothing of it: the message must then stay, not be
    // deleted (a redelivery after a COMMIT of the handler's is a duplicate).
    // Not given up at shutdown: the handler's work is done, and committing it is what is left.
    let check = outbox_core::recorded_in_this_transaction(&tx, name, id);
    if !step(short, "the transaction check", None, check).await? {
        return Err(Failure::Handler(ENDED_BY_HANDLER.into()));
    }
    step(short, "COMMIT", None, tx.commit()).await?;
    *stuck = false;
    Ok(true)
}

/// Why a handler's delivery failed when the handler ended the consumer's transaction itself.
const ENDED_BY_HANDLER: &str = "the handler ended the consumer's transaction itself (it ran COMMIT \
    or ROLLBACK): what it committed stays, the inbox record with it if it committed (the event is \
    then a duplicate when delivered again), and what it rolled back is gone; leave the transaction \
    to the consumer";
