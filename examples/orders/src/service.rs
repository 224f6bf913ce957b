//! The order service: each function is one transaction that writes the business rows with the
//! generated queries and emits the matching event through the same transaction, so the event is
//! published if and only if the change commits. Events go through an [`Emitter`] made for the
//! relay's publisher (`Emitter::for_publisher`), so an event larger than its destination takes (an
//! SNS topic: 256 KiB) is refused in the transaction instead of dead-lettered by the relay.

use std::fmt;

use deadpool_postgres::Pool;
use orders_queries::client::Params;
use orders_queries::queries::orders as sql;
use outbox_core::Emitter;
use uuid::Uuid;

use crate::Error;
use crate::events::{OrderLine, OrderLineEvent, OrderPlaced, OrderShipped};

/// A line of an order to place or to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLine {
    /// The product.
    pub sku: String,
    /// How many (must be positive: the database refuses anything else).
    pub quantity: i32,
    /// The price of one, in cents.
    pub unit_price_cents: i64,
}

/// An order to place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrder {
    /// The order's id, chosen by the caller (e.g. an idempotency key from the client).
    pub id: Uuid,
    /// Who orders.
    pub customer: String,
    /// The first lines.
    pub lines: Vec<NewLine>,
}

/// The change was refused: the order does not exist, is shipped already, or has no such line.
/// Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The order.
    pub order_id: Uuid,
    /// What was refused.
    pub reason: &'static str,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "order {}: {}", self.order_id, self.reason)
    }
}

impl std::error::Error for Refused {}

/// An emitter with SQS's limits, for writers that publish to an SQS queue and have no publisher at
/// hand (the demo's writers run beside its relay). With one, prefer
/// `Emitter::for_publisher(&publisher)` after its start-up check.
pub fn sqs_emitter() -> Emitter {
    Emitter::with_limits(outbox_sqs::SQS_LIMITS)
}

/// Places an order: inserts the order and its lines and emits [`OrderPlaced`], in one transaction.
/// Returns the event's id.
///
/// The event is emitted before the lines are inserted on purpose: when a line is refused (a
/// quantity of 0 violates a `CHECK` constraint), the transaction rolls back and takes the event
/// with it — the relay never sees it.
pub async fn place_order(pool: &Pool, emitter: &Emitter, order: &NewOrder) -> Result<Uuid, Error> {
    let lines: Vec<OrderLine> = order
        .lines
        .iter()
        .zip(1..)
        .map(|(line, line_no)| OrderLine {
            line_no,
            sku: line.sku.clone(),
            quantity: line.quantity,
            unit_price_cents: line.unit_price_cents,
        })
        .collect();
    let total_cents = lines.iter().map(OrderLine::amount_cents).sum();

    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let version = sql::insert_order()
        .bind(&tx, &order.id, &order.customer, &total_cents)
        .one()
        .await?;
    let event_id = emitter
        .emit(
            &tx,
            &OrderPlaced {
                order_id: order.id,
                version,
                customer: order.customer.clone(),
                lines: lines.clone(),
                total_cents,
            },
        )
        .await?;
    for line in &lines {
        sql::insert_order_line()
            .params(
                &tx,
                &sql::InsertOrderLineParams {
                    order_id: order.id,
                    line_no: line.line_no,
                    sku: &line.sku,
                    quantity: line.quantity,
                    unit_price_cents: line.unit_price_cents,
                },
            )
            .one()
            .await?;
    }
    tx.commit().await?;
    Ok(event_id)
}

/// Adds a line to an open order and emits [`OrderLineEvent::Added`], in one transaction. Returns
/// the event's id; [`Refused`] when the order does not exist or was shipped.
pub async fn add_line(
    pool: &Pool,
    emitter: &Emitter,
    order_id: Uuid,
    line: &NewLine,
) -> Result<Uuid, Error> {
    let amount = i64::from(line.quantity) * line.unit_price_cents;
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    // Locks the order first, so that concurrent changes of one order take turns.
    let Some(version) = sql::change_open_order()
        .bind(&tx, &amount, &order_id)
        .opt()
        .await?
    else {
        return Err(Refused {
            order_id,
            reason: "not an open order",
        }
        .into());
    };
    let line_no = sql::append_order_line()
        .params(
            &tx,
            &sql::AppendOrderLineParams {
                order_id,
                sku: &line.sku,
                quantity: line.quantity,
                unit_price_cents: line.unit_price_cents,
            },
        )
        .one()
        .await?;
    let event_id = emitter
        .emit(
            &tx,
            &OrderLineEvent::Added {
                order_id,
                version,
                line: OrderLine {
                    line_no,
                    sku: line.sku.clone(),
                    quantity: line.quantity,
                    unit_price_cents: line.unit_price_cents,
                },
            },
        )
        .await?;
    tx.commit().await?;
    Ok(event_id)
}

/// Removes line `line_no` of an open order and emits [`OrderLineEvent::Removed`], in one
/// transaction. Returns the event's id; [`Refused`] when there is no such line or the order was
/// shipped.
pub async fn remove_line(
    pool: &Pool,
    emitter: &Emitter,
    order_id: Uuid,
    line_no: i32,
) -> Result<Uuid, Error> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let Some(removed) = sql::remove_order_line()
        .bind(&tx, &order_id, &line_no)
        .opt()
        .await?
    else {
        // Dropping `tx` rolls back (the line may have been deleted before the order check).
        return Err(Refused {
            order_id,
            reason: "no such line in an open order",
        }
        .into());
    };
    let event_id = emitter
        .emit(
            &tx,
            &OrderLineEvent::Removed {
                order_id,
                version: removed.version,
                line: OrderLine {
                    line_no,
                    sku: removed.sku,
                    quantity: removed.quantity,
                    unit_price_cents: removed.unit_price_cents,
                },
            },
        )
        .await?;
    tx.commit().await?;
    Ok(event_id)
}

/// Marks an open order shipped and emits [`OrderShipped`], in one transaction. Returns the event's
/// id; [`Refused`] when the order does not exist or was shipped already.
pub async fn ship_order(
    pool: &Pool,
    emitter: &Emitter,
    order_id: Uuid,
    carrier: &str,
) -> Result<Uuid, Error> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let Some(shipped) = sql::ship_order().bind(&tx, &order_id).opt().await? else {
        return Err(Refused {
            order_id,
            reason: "not an open order",
        }
        .into());
    };
    let event_id = emitter
        .emit(
            &tx,
            &OrderShipped {
                order_id,
                version: shipped.version,
                carrier: carrier.to_owned(),
            },
        )
        .await?;
    tx.commit().await?;
    Ok(event_id)
}

/// Reads an order, if it exists.
pub async fn find_order(pool: &Pool, order_id: Uuid) -> Result<Option<sql::FindOrder>, Error> {
    let client = pool.get().await?;
    Ok(sql::find_order().bind(&client, &order_id).opt().await?)
}
