use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
enum OrderEvent {
    Placed(#[outbox(aggregate_id)] u64),
    Geändert(#[outbox(aggregate_id)] u64),
    #[outbox(event_type = "order.geändert")]
    Storniert(#[outbox(aggregate_id)] u64),
}

fn main() {}
