use outbox_core::OutboxEvent;
use serde::Serialize;
use uuid::Uuid;

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "order", event_type = "order.created")]
struct OrderCreated {
    #[outbox(aggregate_id)]
    order_id: Uuid,
    total_cents: i64,
}

/// Defaults: aggregate `order`, event type `order.line.added`.
#[derive(Serialize, OutboxEvent)]
struct OrderLineAdded {
    sku: String,
    #[outbox(aggregate_id)]
    #[serde(rename = "order")]
    order_id: u64,
}

#[test]
fn named_structs_derive_with_and_without_defaults() {
    let id = Uuid::new_v4();
    let event = OrderCreated {
        order_id: id,
        total_cents: 10,
    };
    assert_eq!(event.aggregate_type(), "order");
    assert_eq!(event.event_type(), "order.created");
    assert_eq!(event.aggregate_id().to_string(), id.to_string());
    assert_eq!(event.total_cents, 10);

    let line = OrderLineAdded {
        sku: "A".into(),
        order_id: 7,
    };
    assert_eq!(line.aggregate_type(), "order");
    assert_eq!(line.event_type(), "order.line.added");
    assert_eq!(line.aggregate_id().to_string(), "7");
    assert_eq!(line.sku, "A");
}
