//! Hand-built claimed events for the publisher's tests.
#![allow(dead_code)]

use chrono::Utc;
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
    ClaimedEvent {
        id: Uuid::new_v4(),
        seq,
        aggregate_type: aggregate_type.to_owned(),
        aggregate_id: aggregate_id.to_owned(),
        event_type: event_type.to_owned(),
        payload,
        metadata: json!({}),
        attempts: 0,
        created_at: Utc::now(),
    }
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
    serde_json::to_string(&event.payload).unwrap()
}

pub fn assert_all_published(outcomes: &[PublishOutcome]) {
    for (i, o) in outcomes.iter().enumerate() {
        assert_eq!(o, &PublishOutcome::Published, "event {i}");
    }
}
