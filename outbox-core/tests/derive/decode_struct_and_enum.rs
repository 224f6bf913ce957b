//! Types that derive `OutboxEvent` and `Deserialize` decode, generic ones included.
use outbox_core::{DecodeEvent, OutboxEvent};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, OutboxEvent)]
#[outbox(aggregate = "order", event_type = "order.placed")]
struct OrderPlaced {
    #[outbox(aggregate_id)]
    order_id: u64,
}

#[derive(Serialize, Deserialize, OutboxEvent)]
#[outbox(aggregate = "box")]
enum Boxed<T: std::fmt::Display> {
    Filled(#[outbox(aggregate_id)] T),
}

#[test]
fn types_deriving_deserialize_too_decode_by_event_type() {
    assert_eq!(OrderPlaced::event_types(), ["order.placed"]);
    assert_eq!(<Boxed<u32>>::event_types(), ["box.filled"]);
    assert!(OrderPlaced::decode("order.placed", r#"{"order_id":1}"#).is_ok());
    assert!(<Boxed<u32>>::decode("box.filled", r#"{"Filled":3}"#).is_ok());
}
