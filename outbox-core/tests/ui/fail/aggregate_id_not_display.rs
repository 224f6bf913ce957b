use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
struct FileUploaded {
    #[outbox(aggregate_id)]
    digest: Vec<u8>,
}

#[derive(Serialize, OutboxEvent)]
enum FileEvent {
    Deleted(#[outbox(aggregate_id)] Option<u64>),
}

fn main() {}
