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
