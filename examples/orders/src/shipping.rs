//! The second consumer of the fan-out example: the shipping service. It reads the same order
//! events as the read model ([`crate::consumer`]), from its own queue subscribed to the same SNS
//! topic, and records a shipment for each `order.shipped`; every other event only goes through its
//! inbox. Each consumer has its own inbox name, so each applies every event once.

use deadpool_postgres::{Pool, Transaction};
use orders_queries::queries::shipments as sql;
use outbox_sqs::consumer::{Envelope, Handler, HandlerError};

use crate::Error;
use crate::events::OrderEvent;

/// The shipping consumer's name in the inbox (`processed_events.consumer`).
pub const SHIPPING_CONSUMER: &str = "shipping";

/// The shipping service's handler.
#[derive(Debug, Default)]
pub struct Shipments;

impl Handler<OrderEvent> for Shipments {
    async fn handle(
        &self,
        event: OrderEvent,
        envelope: &Envelope,
        tx: &Transaction<'_>,
    ) -> Result<(), HandlerError> {
        if let OrderEvent::Shipped(shipped) = event {
            sql::insert_shipment()
                .bind(tx, &shipped.order_id, &shipped.carrier, &envelope.event_id)
                .await?;
        }
        Ok(())
    }
}

/// Shipments recorded, and orders shipped on the write side: equal once every `order.shipped`
/// event was applied exactly once.
pub async fn count_shipments(pool: &Pool) -> Result<(i64, i64), Error> {
    let client = pool.get().await?;
    let shipments = sql::count_shipments().bind(&client).one().await?;
    let shipped = sql::count_shipped_orders().bind(&client).one().await?;
    Ok((shipments, shipped))
}

/// Committed events that the consumer named `consumer` has not applied (not in its inbox).
pub async fn count_unapplied(pool: &Pool, consumer: &str) -> Result<i64, Error> {
    let client = pool.get().await?;
    Ok(sql::count_unapplied()
        .bind(&client, &consumer)
        .one()
        .await?)
}
