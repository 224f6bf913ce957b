use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
enum Event {
    Happened(#[outbox(aggregate_id)] u64),
}

fn main() {}
