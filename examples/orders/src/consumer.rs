//! The consumer: applies the order events from SQS once each, in order, to the read model
//! (`order_summaries`), with [`outbox_sqs::Consumer`].
//!
//! The library does the receiving, decoding ([`OrderEvent`]), the inbox (a redelivered event is
//! recognised and skipped), committing, deleting and retrying; this module is only the effect.
//! Each event also carries its order's version; the read model only moves from one version to the
//! next, which tells whether the events came in order.

use std::collections::HashSet;
use std::sync::Mutex;

use deadpool_postgres::{Pool, Transaction};
use orders_queries::client::Params;
use orders_queries::queries::summaries as sql;
use outbox_sqs::consumer::{Envelope, Handler, HandlerError};
use uuid::Uuid;

use crate::Error;
use crate::events::{OrderEvent, OrderLineEvent};

/// The consumer's name in the inbox (`processed_events.consumer`).
pub const CONSUMER_NAME: &str = "order-summaries";

/// The read model's handler.
#[derive(Debug, Default)]
pub struct OrderSummaries {
    out_of_order: Mutex<HashSet<Uuid>>,
}

impl OrderSummaries {
    /// Events that were not their order's next version when they arrived (an earlier event late
    /// or missing): recorded in the inbox but not applied. (A production consumer would park them
    /// and alert; the demo counts them.)
    pub fn out_of_order(&self) -> HashSet<Uuid> {
        self.out_of_order
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }
}

impl Handler<OrderEvent> for OrderSummaries {
    async fn handle(
        &self,
        event: OrderEvent,
        envelope: &Envelope,
        tx: &Transaction<'_>,
    ) -> Result<(), HandlerError> {
        if apply(tx, &event).await?.is_none() {
            if let Ok(mut ids) = self.out_of_order.lock() {
                ids.insert(envelope.event_id);
            }
        }
        Ok(())
    }
}

/// Applies one event to the read model; `None` when it is not the order's next version.
async fn apply(tx: &Transaction<'_>, event: &OrderEvent) -> Result<Option<Uuid>, Error> {
    Ok(match event {
        OrderEvent::Placed(e) => {
            let params = sql::InsertSummaryParams {
                order_id: e.order_id,
                customer: &e.customer,
                line_count: i32::try_from(e.lines.len())?,
                total_cents: e.total_cents,
                version: e.version,
            };
            sql::insert_summary().params(tx, &params).opt().await?
        }
        OrderEvent::Line(line_event) => {
            let (order_id, version, line_delta, amount_cents) = match line_event {
                OrderLineEvent::Added {
                    order_id,
                    version,
                    line,
                } => (*order_id, *version, 1, line.amount_cents()),
                OrderLineEvent::Removed {
                    order_id,
                    version,
                    line,
                } => (*order_id, *version, -1, -line.amount_cents()),
            };
            let params = sql::ApplyLineChangeParams {
                line_delta,
                amount_cents,
                version,
                order_id,
            };
            sql::apply_line_change().params(tx, &params).opt().await?
        }
        OrderEvent::Shipped(e) => {
            sql::apply_shipped()
                .bind(tx, &e.version, &e.order_id)
                .opt()
                .await?
        }
    })
}

/// Orders whose summary is missing or differs from the order: 0 once every event was applied
/// exactly once and in order.
pub async fn count_stale_summaries(pool: &Pool) -> Result<i64, Error> {
    let client = pool.get().await?;
    Ok(sql::count_stale_summaries().bind(&client).one().await?)
}

/// The read model's row for `order_id`, if any.
pub async fn find_summary(pool: &Pool, order_id: Uuid) -> Result<Option<sql::FindSummary>, Error> {
    let client = pool.get().await?;
    Ok(sql::find_summary().bind(&client, &order_id).opt().await?)
}
