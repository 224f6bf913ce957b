use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
struct BestellungGeändert {
    #[outbox(aggregate_id)]
    id: u64,
}

fn main() {}
