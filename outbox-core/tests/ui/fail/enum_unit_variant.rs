use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
enum OrderEvent {
    Placed(#[outbox(aggregate_id)] u64),
    Reset,
}

fn main() {}
