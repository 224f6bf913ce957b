use outbox_core::OutboxEvent;
use serde::Serialize;

// On a struct too: the values that are not strings are reported, and nothing about the defaults
// they would have replaced (`BestellungGeändert` gives no default event type, `Event` no default
// aggregate).
#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "bestellung", event_type = 5)]
struct BestellungGeändert {
    #[outbox(aggregate_id)]
    id: u64,
}

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = order)]
struct Event {
    #[outbox(aggregate_id)]
    id: u64,
}

fn main() {}
