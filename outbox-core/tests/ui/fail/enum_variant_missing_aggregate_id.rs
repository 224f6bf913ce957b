use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
enum OrderEvent {
    Placed {
        #[outbox(aggregate_id)]
        order_id: u64,
    },
    Shipped {
        order_id: u64,
        carrier: String,
    },
    Cancelled(u64),
}

fn main() {}
