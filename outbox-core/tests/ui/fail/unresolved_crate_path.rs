use serde::Serialize;

#[derive(Serialize, outbox_core::OutboxEvent)]
#[outbox(crate = "outbox")]
struct OrderCreated {
    #[outbox(aggregate_id)]
    order_id: u64,
}

fn main() {}
