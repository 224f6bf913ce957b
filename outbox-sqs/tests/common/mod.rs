//! Hand-built claimed events and fixture publishers for the publisher's tests.
#![allow(dead_code)]

pub mod slow;

use outbox_core::{ClaimedEvent, PublishOutcome};
use outbox_sqs::{SqsPublisher, SqsPublisherBuilder};
use outbox_sqs_fixture::SqsFixture;
use outbox_tests::sqs::sdk_config_for;
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

/// A publisher to `queue` on `fx`, without SDK retries (each call is one HTTP request).
pub async fn builder(fx: &SqsFixture) -> SqsPublisherBuilder {
    SqsPublisher::builder()
        .sdk_config(sdk_config_for(&fx.endpoint_url()).await)
        .max_attempts(1)
}

pub async fn publisher(fx: &SqsFixture, queue: &str) -> SqsPublisher {
    builder(fx)
        .await
        .default_queue(queue)
        .build()
        .await
        .unwrap()
}

/// Publishes an offloaded event through `publisher` (S3 is heard from: slow, not down, once the
/// proxy at its S3 makes every answer `delay` late), then slows the proxy so.
pub async fn heard_then_slow(
    publisher: &SqsPublisher,
    proxy: &outbox_tests::BlackHoleProxy,
    delay: std::time::Duration,
) {
    use outbox_core::Publisher;
    let warm = event("order.created", "order", "warm", 0, json!("x".repeat(4096)));
    let outcomes = publisher.publish(&[warm]).await.unwrap();
    assert!(
        matches!(outcomes[0], PublishOutcome::Published),
        "{outcomes:?}"
    );
    proxy.delay_requests(delay);
}
