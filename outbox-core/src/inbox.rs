//! The consumer inbox: process each event at most once.

use crate::client::GenericClient;
use outbox_queries::queries::inbox as sql;
use uuid::Uuid;

use crate::error::Error;

/// Records that `consumer` processes `event_id`; call it inside the transaction that applies the
/// event's effects. Returns `true` the first time (go on and apply the event) and `false` for a
/// duplicate (skip it, and acknowledge the message).
///
/// Delivery is at-least-once, so a consumer sees some events twice; this makes processing
/// exactly-once within the consumer's database. A concurrent caller with the same id waits for the
/// first transaction: it gets `false` if that one commits and `true` if it rolls back.
/// `consumer` names the consumer, so several consumers can share the table.
pub async fn process_once<C: GenericClient>(
    client: &C,
    consumer: &str,
    event_id: Uuid,
) -> Result<bool, Error> {
    Ok(sql::record_processed_event()
        .bind(client, &consumer, &event_id)
        .opt()
        .await?
        .is_some())
}

/// Whether `consumer`'s record of `event_id` (what [`process_once`] writes) is visible to
/// `client` — outside a transaction, a committed one: a hint
/// for skipping work before the transaction, such as reading an offloaded payload, for an event
/// that is plainly a duplicate. A `false` proves nothing (another delivery may be committing right
/// now): [`process_once`] inside the transaction decides.
pub async fn was_processed<C: GenericClient>(
    client: &C,
    consumer: &str,
    event_id: Uuid,
) -> Result<bool, Error> {
    Ok(sql::processed_event_exists()
        .bind(client, &consumer, &event_id)
        .one()
        .await?)
}

/// Fails when the transaction can no longer commit: a statement in it failed (SQLSTATE `25P02`),
/// for example one whose error a handler ignored. PostgreSQL answers the `COMMIT` of such a
/// transaction with a rollback and no error, so a consumer that acknowledged its message after
/// that `COMMIT` would lose the event's effects and its inbox record without noticing. Call it right
/// before committing when code in between may have swallowed a database error (one round trip).
pub async fn ensure_transaction_usable<C: GenericClient>(client: &C) -> Result<(), Error> {
    sql::transaction_is_usable().bind(client).one().await?;
    Ok(())
}

/// Whether `consumer`'s record of `event_id`, written by [`process_once`] in this transaction (or
/// in one of its savepoints), is still this transaction's own and uncommitted: `false` once the transaction has ended — code in
/// between ran `COMMIT` or `ROLLBACK` itself (a script with its own `BEGIN … COMMIT` sent through
/// `batch_execute`, say), so that the statement runs in a transaction of its own, in which the
/// record is gone (rolled back, with the effects) or already committed. Acknowledging the message
/// after committing such a "transaction" would lose the event or half of it without a word
/// (black-box run: a handler that ran `ROLLBACK` and returned `Ok` had its message deleted,
/// nothing applied). Fails like [`ensure_transaction_usable`] in an aborted transaction (it is
/// that check too); one round trip. Call it right before committing.
pub async fn recorded_in_this_transaction<C: GenericClient>(
    client: &C,
    consumer: &str,
    event_id: Uuid,
) -> Result<bool, Error> {
    Ok(sql::record_is_this_transactions()
        .bind(client, &consumer, &event_id)
        .one()
        .await?)
}
