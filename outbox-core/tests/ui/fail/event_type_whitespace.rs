use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
#[outbox(event_type = "order created")]
struct OrderCreated {
    #[outbox(aggregate_id)]
    order_id: u64,
}

fn main() {}
