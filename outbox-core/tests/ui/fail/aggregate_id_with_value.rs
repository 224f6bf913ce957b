use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
struct OrderCreated {
    #[outbox(aggregate_id = "order_id")]
    order_id: u64,
}

fn main() {}
