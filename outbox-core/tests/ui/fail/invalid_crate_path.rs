use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
#[outbox(crate = "outbox core")]
struct OrderCreated {
    #[outbox(aggregate_id)]
    order_id: u64,
}

fn main() {}
