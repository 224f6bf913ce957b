use outbox_core::OutboxEvent;
use serde::Serialize;

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "counter", event_type = "counter.incremented")]
struct Incremented(#[outbox(aggregate_id)] u32, i64);

#[derive(Serialize, OutboxEvent)]
struct SessionExpired(String, #[outbox(aggregate_id)] String);

#[test]
fn tuple_structs_derive() {
    let event = Incremented(3, 1);
    assert_eq!(event.aggregate_id().to_string(), "3");
    assert_eq!(event.1, 1);

    let expired = SessionExpired("idle".into(), "s-1".into());
    assert_eq!(expired.aggregate_type(), "session");
    assert_eq!(expired.event_type(), "session.expired");
    assert_eq!(expired.aggregate_id().to_string(), "s-1");
    assert_eq!(expired.0, "idle");
}
