use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
struct OrderCreated {
    order_id: u64,
    total_cents: i64,
}

fn main() {}
