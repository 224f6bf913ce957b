use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "order", event_type = "order.event")]
enum OrderEvent {
    Placed(#[outbox(aggregate_id)] u64),
}

fn main() {}
