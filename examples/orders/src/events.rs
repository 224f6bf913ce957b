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

/// Every order event, as the consumer receives them: one type to decode the queue's messages into
/// ([`outbox_core::DecodeEvent`]).
///
/// Each variant wraps the event type the service emits, and the payload is that type's, unchanged
/// (`untagged`): the message's `event_type` attribute tells them apart, and decoding checks that
/// the body is the event type's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OrderEvent {
    /// `order.placed`.
    Placed(OrderPlaced),
    /// `order.line.added` or `order.line.removed`.
    Line(OrderLineEvent),
    /// `order.shipped`.
    Shipped(OrderShipped),
}

impl OutboxEvent for OrderEvent {
    fn aggregate_type(&self) -> &'static str {
        AGGREGATE
    }

    fn event_type(&self) -> &'static str {
        match self {
            OrderEvent::Placed(e) => e.event_type(),
            OrderEvent::Line(e) => e.event_type(),
            OrderEvent::Shipped(e) => e.event_type(),
        }
    }

    fn aggregate_id(&self) -> impl std::fmt::Display + '_ {
        self.order_id()
    }

    fn event_types() -> &'static [&'static str] {
        &[
            ORDER_PLACED,
            ORDER_LINE_ADDED,
            ORDER_LINE_REMOVED,
            ORDER_SHIPPED,
        ]
    }
}

impl OrderEvent {
    /// The order the event is about.
    pub fn order_id(&self) -> Uuid {
        match self {
            OrderEvent::Placed(e) => e.order_id,
            OrderEvent::Line(OrderLineEvent::Added { order_id, .. })
            | OrderEvent::Line(OrderLineEvent::Removed { order_id, .. }) => *order_id,
            OrderEvent::Shipped(e) => e.order_id,
        }
    }
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
    fn every_event_decodes_into_order_event_by_its_type() {
        use outbox_core::DecodeEvent;
        let id = Uuid::new_v4();
        let events = [
            OrderEvent::Placed(OrderPlaced {
                order_id: id,
                version: 1,
                customer: "c".into(),
                lines: vec![line()],
                total_cents: 750,
            }),
            OrderEvent::Line(OrderLineEvent::Added {
                order_id: id,
                version: 2,
                line: line(),
            }),
            OrderEvent::Line(OrderLineEvent::Removed {
                order_id: id,
                version: 3,
                line: line(),
            }),
            OrderEvent::Shipped(OrderShipped {
                order_id: id,
                version: 4,
                carrier: "DHL".into(),
            }),
        ];
        for event in events {
            // The body the service emits is the inner event's own JSON.
            let body = serde_json::to_string(&event).unwrap();
            let decoded = OrderEvent::decode(event.event_type(), &body).unwrap();
            assert_eq!(decoded, event);
            assert_eq!(decoded.order_id(), id);
            // Another event type's body is refused.
            assert!(OrderEvent::decode(ORDER_SHIPPED, r#"{"order_id":1}"#).is_err());
        }
        assert!(!OrderEvent::accepts("invoice.paid"));
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
