//! Hand-built claimed events for the publisher's tests.
#![allow(dead_code)]

use outbox_core::{ClaimedEvent, PublishOutcome};
use serde_json::{Value, json};
use uuid::Uuid;

/// A claimed event with an empty metadata object.
pub fn event(
    event_type: &str,
    aggregate_type: &str,
    aggregate_id: &str,
    seq: i64,
    payload: Value,
) -> ClaimedEvent {
    ClaimedEvent::for_test(
        Uuid::new_v4(),
        seq,
        aggregate_type,
        aggregate_id,
        event_type,
        payload.to_string(),
        "{}",
        0,
    )
}

/// `n` events of `event_type`, each of its own `order` aggregate, with payload `{"n": i}`.
pub fn events(n: usize, event_type: &str) -> Vec<ClaimedEvent> {
    (0..n)
        .map(|i| {
            event(
                event_type,
                "order",
                &format!("ord-{i}"),
                i as i64 + 1,
                json!({ "n": i }),
            )
        })
        .collect()
}

/// The body the publisher sends for `event`.
pub fn body(event: &ClaimedEvent) -> String {
    event.payload().to_owned()
}

pub fn assert_all_published(outcomes: &[PublishOutcome]) {
    for (i, o) in outcomes.iter().enumerate() {
        assert_eq!(o, &PublishOutcome::Published, "event {i}");
    }
}
