use outbox_core::OutboxEvent;
use serde::Serialize;

// The values that are not strings are reported, and nothing about the defaults they would have
// replaced (`Event` gives no default aggregate).
#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = order)]
enum Event {
    #[outbox(event_type = 1)]
    Happened(#[outbox(aggregate_id)] u64),
}

fn main() {}
