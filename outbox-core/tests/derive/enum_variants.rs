use outbox_core::OutboxEvent;
use serde::Serialize;
use uuid::Uuid;

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "order")]
enum OrderEvent {
    Placed {
        #[outbox(aggregate_id)]
        order_id: Uuid,
        lines: u32,
    },
    #[outbox(event_type = "order.shipped")]
    Shipped {
        carrier: String,
        #[outbox(aggregate_id)]
        order_id: Uuid,
    },
    Cancelled(#[outbox(aggregate_id)] Uuid, String),
    ReturnRequested(String, #[outbox(aggregate_id)] Uuid),
}

#[test]
fn each_variant_has_its_event_type_and_aggregate_id() {
    let id = Uuid::new_v4();
    let events = [
        OrderEvent::Placed {
            order_id: id,
            lines: 1,
        },
        OrderEvent::Shipped {
            carrier: "DHL".into(),
            order_id: id,
        },
        OrderEvent::Cancelled(id, "late".into()),
        OrderEvent::ReturnRequested("broken".into(), id),
    ];
    let types: Vec<_> = events.iter().map(|e| e.event_type()).collect();
    assert_eq!(
        types,
        [
            "order.placed",
            "order.shipped",
            "order.cancelled",
            "order.return.requested"
        ]
    );
    for event in &events {
        assert_eq!(event.aggregate_type(), "order");
        assert_eq!(event.aggregate_id().to_string(), id.to_string());
    }
    let json = serde_json::to_value(&events[1]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"Shipped": {"carrier": "DHL", "order_id": id}})
    );
    if let OrderEvent::Placed { lines, .. } = &events[0] {
        assert_eq!(*lines, 1);
    }
}
