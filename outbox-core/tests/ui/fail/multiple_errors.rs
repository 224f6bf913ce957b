use outbox_core::OutboxEvent;
use serde::Serialize;

// Every mistake is reported at once, and nothing else: the stub impl the derive emits alongside the
// errors keeps `emit_it(...)` below from adding "OutboxEvent is not implemented" errors.
#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "order", topic = "orders", event_type = 5)]
struct OrderCreated {
    #[outbox(aggregate_id)]
    order_id: u64,
    #[outbox(aggregate_id)]
    customer_id: u64,
}

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "bad aggregate")]
enum PaymentEvent<T> {
    Captured(#[outbox(aggregate_id)] T),
    Refunded {
        amount: u64,
    },
    #[outbox(event_type = "payment.refunded", event_type = "x")]
    Voided(#[outbox(aggregate_id = 1)] T),
}

fn emit_it<E: OutboxEvent>(event: E) -> &'static str {
    event.event_type()
}

fn main() {
    emit_it(OrderCreated {
        order_id: 1,
        customer_id: 2,
    });
    emit_it(PaymentEvent::Captured("p-1"));
}
