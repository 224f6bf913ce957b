//! The order aggregate's domain events.
//!
//! Every event carries the order's `version` after the change it records: the first event of an
//! order has version 1 and each later one the next number, so a consumer can check that it sees an
//! order's events in order and without a gap.

use outbox_core::OutboxEvent;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The aggregate type of every event here (the first half of an SQS FIFO message group id).
pub const AGGREGATE: &str = "order";
/// The event type of [`OrderPlaced`].
pub const ORDER_PLACED: &str = "order.placed";
/// The event type of [`OrderLineEvent::Added`].
pub const ORDER_LINE_ADDED: &str = "order.line.added";
/// The event type of [`OrderLineEvent::Removed`].
pub const ORDER_LINE_REMOVED: &str = "order.line.removed";
/// The event type of [`OrderShipped`].
pub const ORDER_SHIPPED: &str = "order.shipped";

/// One line of an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderLine {
    /// The line's number within the order, from 1.
    pub line_no: i32,
    /// The product.
    pub sku: String,
    /// How many.
    pub quantity: i32,
    /// The price of one, in cents.
    pub unit_price_cents: i64,
}

impl OrderLine {
    /// The line's amount: quantity × unit price.
    pub fn amount_cents(&self) -> i64 {
        i64::from(self.quantity) * self.unit_price_cents
    }
}

/// An order was placed with its first lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, OutboxEvent)]
#[outbox(aggregate = "order", event_type = "order.placed")]
pub struct OrderPlaced {
    /// The order.
    #[outbox(aggregate_id)]
    pub order_id: Uuid,
    /// Always 1.
    pub version: i32,
    /// Who ordered.
    pub customer: String,
    /// The lines.
    pub lines: Vec<OrderLine>,
    /// The sum of the lines' amounts.
    pub total_cents: i64,
}

/// A line was added to, or removed from, an open order.
///
/// An enum: each variant is an event type of its own (`order.line.added`, `order.line.removed`);
/// serde's internal tagging puts the variant in the payload as `"change": "added"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, OutboxEvent)]
#[outbox(aggregate = "order")]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum OrderLineEvent {
    /// A line was added.
    #[outbox(event_type = "order.line.added")]
    Added {
        /// The order.
        #[outbox(aggregate_id)]
        order_id: Uuid,
        /// The order's version after the change.
        version: i32,
        /// The new line.
        line: OrderLine,
    },
    /// A line was removed.
    #[outbox(event_type = "order.line.removed")]
    Removed {
        /// The order.
        #[outbox(aggregate_id)]
        order_id: Uuid,
        /// The order's version after the change.
        version: i32,
        /// The line as it was.
        line: OrderLine,
    },
}

/// An order was shipped; it cannot change any more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, OutboxEvent)]
#[outbox(aggregate = "order", event_type = "order.shipped")]
pub struct OrderShipped {
    /// The order.
    #[outbox(aggregate_id)]
    pub order_id: Uuid,
    /// The order's version after the change.
    pub version: i32,
    /// Who carries it.
    pub carrier: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line() -> OrderLine {
        OrderLine {
            line_no: 2,
            sku: "SKU-1".into(),
            quantity: 3,
            unit_price_cents: 250,
        }
    }

    #[test]
    fn metadata_matches_the_constants_the_consumer_dispatches_on() {
        let id = Uuid::new_v4();
        let placed = OrderPlaced {
            order_id: id,
            version: 1,
            customer: "c".into(),
            lines: vec![line()],
            total_cents: 750,
        };
        let added = OrderLineEvent::Added {
            order_id: id,
            version: 2,
            line: line(),
        };
        let removed = OrderLineEvent::Removed {
            order_id: id,
            version: 3,
            line: line(),
        };
        let shipped = OrderShipped {
            order_id: id,
            version: 4,
            carrier: "DHL".into(),
        };
        assert_eq!(placed.event_type(), ORDER_PLACED);
        assert_eq!(added.event_type(), ORDER_LINE_ADDED);
        assert_eq!(removed.event_type(), ORDER_LINE_REMOVED);
        assert_eq!(shipped.event_type(), ORDER_SHIPPED);
        for aggregate in [
            placed.aggregate_type(),
            added.aggregate_type(),
            removed.aggregate_type(),
            shipped.aggregate_type(),
        ] {
            assert_eq!(aggregate, AGGREGATE);
        }
        assert_eq!(added.aggregate_id().to_string(), id.to_string());
    }

    #[test]
    fn the_line_event_payload_is_internally_tagged() {
        let id = Uuid::nil();
        let added = OrderLineEvent::Added {
            order_id: id,
            version: 2,
            line: line(),
        };
        let value = serde_json::to_value(&added).unwrap();
        assert_eq!(
            value,
            json!({
                "change": "added",
                "order_id": id,
                "version": 2,
                "line": { "line_no": 2, "sku": "SKU-1", "quantity": 3, "unit_price_cents": 250 },
            })
        );
        assert_eq!(
            serde_json::from_value::<OrderLineEvent>(value).unwrap(),
            added
        );
    }
}
