// Decoding needs serde's `Deserialize` next to the derive: the error says so where the type is
// used as a `DecodeEvent`.
use outbox_core::{DecodeEvent, OutboxEvent};
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "order", event_type = "order.placed")]
struct OrderPlaced {
    #[outbox(aggregate_id)]
    order_id: u64,
}

fn handle<E: DecodeEvent>(event_type: &str, body: &str) -> Option<E> {
    E::decode(event_type, body).ok()
}

fn main() {
    let _ = handle::<OrderPlaced>("order.placed", "{}");
}
