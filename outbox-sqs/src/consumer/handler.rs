//! The user's side: a [`Handler`] applies one decoded event inside the consumer's transaction; a
//! [`Delivery`] tells an observer what became of each message.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use deadpool_postgres::Transaction;

use super::envelope::{BadInput, Envelope};

/// The error a handler returns: anything, boxed (`?` converts most errors into it).
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// Applies events of type `T` to the consumer's database.
///
/// The consumer calls [`handle`](Handler::handle) once per new event (duplicates recognised by
/// the inbox never reach it), inside a transaction of its pool in which the inbox row is already
/// written. `Ok` commits the transaction — effects and inbox row together — and the message is
/// deleted; `Err` rolls it back and the message is delivered again later (see the
/// [module docs](crate::consumer)). Write through `tx` only: anything done outside it is not
/// undone on failure and may be repeated on redelivery. Leave the transaction to the consumer: a
/// handler that ends it itself (`COMMIT`, `ROLLBACK`, a script with its own `BEGIN … COMMIT`) has
/// failed, whatever it returns, and its message is delivered again (applied then if it was rolled
/// back, a duplicate if the handler committed).
///
/// Implement it on your own type (`async fn` works in the `impl`):
///
/// ```
/// use deadpool_postgres::Transaction;
/// use outbox_sqs::consumer::{Envelope, Handler, HandlerError};
///
/// #[derive(serde::Serialize, serde::Deserialize, outbox_core::OutboxEvent)]
/// #[outbox(aggregate = "invoice", event_type = "invoice.paid")]
/// struct InvoicePaid { #[outbox(aggregate_id)] invoice: i64, cents: i64 }
///
/// struct Ledger;
///
/// impl Handler<InvoicePaid> for Ledger {
///     async fn handle(
///         &self,
///         event: InvoicePaid,
///         _envelope: &Envelope,
///         tx: &Transaction<'_>,
///     ) -> Result<(), HandlerError> {
///         tx.execute(
///             "INSERT INTO ledger (invoice, cents) VALUES ($1, $2)",
///             &[&event.invoice, &event.cents],
///         )
///         .await?;
///         Ok(())
///     }
/// }
/// ```
pub trait Handler<T>: Send + Sync + 'static {
    /// Applies `event` (described by `envelope`) through `tx`.
    fn handle(
        &self,
        event: T,
        envelope: &Envelope,
        tx: &Transaction<'_>,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send;
}

impl<T, H: Handler<T>> Handler<T> for Arc<H> {
    fn handle(
        &self,
        event: T,
        envelope: &Envelope,
        tx: &Transaction<'_>,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send {
        (**self).handle(event, envelope, tx)
    }
}

/// What became of one received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The handler succeeded; effects and inbox row committed; the message is deleted.
    Handled,
    /// The inbox had the event already: the handler was not called; the message is deleted.
    Duplicate,
    /// The handler (or the database) failed: rolled back, the message is retried after a back-off.
    Failed,
    /// The message cannot be read: handled by the [`BadInputPolicy`](super::BadInputPolicy).
    BadInput(BadInput),
    /// Not handled: an earlier message of its FIFO group failed in the same batch, or the
    /// consumer was shutting down. Made visible again at once, for a later receive.
    Released,
}

/// One received message and what became of it, for an observer (see
/// [`ConsumerBuilder::observe`](super::ConsumerBuilder::observe)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Delivery {
    /// SQS's message id.
    pub message_id: String,
    /// The envelope, when the message had a usable `event_id` and `event_type`.
    pub envelope: Option<Envelope>,
    /// What the consumer did.
    pub outcome: Outcome,
    /// When the message was received.
    pub received_at: Instant,
    /// Whether the message was left in the queue after a successful handler on purpose (see
    /// [`ConsumerBuilder::skip_delete_every`](super::ConsumerBuilder::skip_delete_every)).
    pub left_in_queue: bool,
}

/// The observer the builder was given.
pub(crate) type Observer = Arc<dyn Fn(&Delivery) + Send + Sync>;
