use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate_id)]
struct OrderCreated {
    order_id: u64,
}

fn main() {}
