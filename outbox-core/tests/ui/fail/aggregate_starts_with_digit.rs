use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "2fa")]
struct CodeSent {
    #[outbox(aggregate_id)]
    user_id: u64,
}

fn main() {}
