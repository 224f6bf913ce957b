use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
struct Tick;

fn main() {}
