use outbox_core::OutboxEvent;

#[derive(OutboxEvent)]
union Bits {
    int: u32,
    float: f32,
}

fn main() {}
