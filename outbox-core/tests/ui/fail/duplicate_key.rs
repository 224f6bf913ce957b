use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
#[outbox(event_type = "order.created")]
#[outbox(aggregate = "order", event_type = "order.placed")]
struct OrderCreated {
    #[outbox(aggregate_id)]
    order_id: u64,
}

fn main() {}
