//! Emitting in the same round trip as a statement of the caller's.

use std::future::Future;

use futures::TryFutureExt;
use uuid::Uuid;

use crate::client::GenericClient;
use crate::emit::Emitter;
use crate::error::Error;
use crate::event::OutboxEvent;

impl Emitter {
    /// Runs `statement` — your own statement on the same transaction, a future not yet polled —
    /// and writes `event` right behind it, pipelined: the transaction waits for one round trip
    /// for both instead of two. Returns `statement`'s output and the new event's id.
    ///
    /// tokio-postgres sends a statement when its future is first polled and pipelines statements
    /// issued together on one connection. This polls `statement` first, then [`emit`](Self::emit),
    /// which on a deadpool connection sends its insert on its first poll from the statement cache,
    /// without awaiting anything before (the connection's first emit prepares it first; a plain
    /// `tokio_postgres` client, without a statement cache, always does: the prepare then rides
    /// with your statement and the insert takes a round trip of its own). It needs the event's
    /// aggregate id before your statement returns, e.g. an id your application generates:
    ///
    /// ```no_run
    /// # use outbox_core::OutboxEvent;
    /// # #[derive(serde::Serialize, OutboxEvent)]
    /// # #[outbox(aggregate = "order", event_type = "order.placed")]
    /// # struct OrderPlaced { #[outbox(aggregate_id)] order_id: uuid::Uuid, total_cents: i64 }
    /// # async fn place_order(client: &mut deadpool_postgres::Client) -> Result<(), outbox_core::Error> {
    /// let tx = client.transaction().await?;
    /// let insert = tx
    ///     .prepare_cached("INSERT INTO orders (id, total_cents) VALUES ($1, $2)")
    ///     .await?;
    /// let (order_id, total_cents) = (uuid::Uuid::now_v7(), 1999_i64);
    /// let event = OrderPlaced { order_id, total_cents };
    /// let (_inserted, _event_id) = outbox_core::emit_with(
    ///     &tx,
    ///     &event,
    ///     tx.execute(&insert, &[&order_id, &total_cents]), // sent first, the event right behind
    /// )
    /// .await?;
    /// tx.commit().await?; // the order and its event, or neither
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Pipelined the same way with `futures::try_join!(tx.execute(…).err_into(), event.emit(&tx))`,
    /// if you prefer the macro: it polls in order too (`tokio::try_join!` rotates which future
    /// goes first unless `biased;`) — but an event `emit` refuses then fails the join after your
    /// statement may have been sent: roll back. Bind the statement's parameters to variables first there: the
    /// macro keeps its futures past the end of the statement that created them.
    ///
    /// Emit's guarantees hold: both statements run in your transaction, in the order issued —
    /// provided your statement sends on its first poll, i.e. is given a prepared `Statement` as
    /// above. Given SQL text (`tx.execute("INSERT …", …)`), tokio-postgres first prepares it, a
    /// round trip of its own, and the event's insert (with its aggregate lock) goes out before
    /// your statement: still one transaction, but the locks are taken in the other order.
    /// The first error is returned (yours converted into [`Error`], e.g. a database error keeps
    /// its SQLSTATE in the source chain). If your statement fails, the transaction is aborted and
    /// the insert queued behind it fails too; if the insert fails (e.g. `lock_timeout` on the
    /// aggregate lock), nothing this transaction wrote can commit — PostgreSQL turns the `COMMIT`
    /// of an aborted transaction into a rollback. An event that `emit` refuses ([`ErrorKind`])
    /// fails the call before anything is sent — `statement` is dropped unpolled, so it never
    /// runs — and the transaction stays usable, as after a refused [`emit`](Self::emit).
    ///
    /// [`ErrorKind`]: crate::ErrorKind
    pub async fn emit_with<C, E, F, T, SE>(
        &self,
        client: &C,
        event: &E,
        statement: F,
    ) -> Result<(T, Uuid), Error>
    where
        C: GenericClient,
        E: OutboxEvent + Sync + ?Sized,
        F: Future<Output = Result<T, SE>>,
        SE: Into<Error>,
    {
        // Checked before `statement` is polled: a refused event leaves your statement unsent (it
        // ran, then the call failed: a black-box run committed the row without its event).
        let checked = self.check(event)?;
        futures::future::try_join(statement.map_err(Into::into), self.insert(client, checked)).await
    }
}

/// Runs `statement` and writes `event` right behind it, pipelined, with the default [`Emitter`];
/// returns `statement`'s output and the event id.
///
/// See [`Emitter::emit_with`].
pub async fn emit_with<C, E, F, T, SE>(
    client: &C,
    event: &E,
    statement: F,
) -> Result<(T, Uuid), Error>
where
    C: GenericClient,
    E: OutboxEvent + Sync + ?Sized,
    F: Future<Output = Result<T, SE>>,
    SE: Into<Error>,
{
    Emitter::new().emit_with(client, event, statement).await
}
