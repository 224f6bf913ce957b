use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "order")]
enum OrderEvent {
    Placed(#[outbox(aggregate_id)] u64),
    #[outbox(event_type = "order.placed")]
    PlacedAgain(#[outbox(aggregate_id)] u64),
}

fn main() {}
