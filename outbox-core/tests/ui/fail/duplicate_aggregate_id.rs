use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
struct ItemMoved {
    #[outbox(aggregate_id)]
    item_id: u64,
    #[outbox(aggregate_id)]
    shelf_id: u64,
}

fn main() {}
