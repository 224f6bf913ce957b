use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
enum OrderEvent {
    #[outbox(aggregate = "order")]
    Placed(#[outbox(aggregate_id)] u64),
}

fn main() {}
