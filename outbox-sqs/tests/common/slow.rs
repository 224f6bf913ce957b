//! Fixtures and checks for the tests of a slow destination's calls going on without their
//! publish (`slow_destination.rs`, `slow_destination_slots.rs`).

use std::time::{Duration, Instant};

use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome, Publisher};
use outbox_sqs::{SqsPublisher, SqsPublisherBuilder};
use outbox_sqs_fixture::SqsFixture;
use serde_json::json;

use super::{builder, event};

/// The fixture with a queue `fast` and a queue `slow` answering every call `latency` late, and
/// a publisher sending `slow.*` events to `slow`, the others to `fast`.
pub async fn fast_and_slow(
    latency: Duration,
    slow: &str,
    max_in_flight: usize,
) -> (SqsFixture, SqsPublisher) {
    let fx = SqsFixture::start().await;
    let fast_url = fx.create_queue("fast");
    let slow_url = fx.create_queue(slow);
    fx.slow_queue(slow, latency);
    let publisher = builder(&fx)
        .await
        .default_queue(fast_url)
        .route("slow.*", slow_url)
        .max_in_flight(max_in_flight)
        .build()
        .await
        .unwrap();
    (fx, publisher)
}

/// The fixture with a queue `slow` answering every call `latency` late, and a publisher sending
/// everything there, built by `configure` from the common builder.
pub async fn slow_alone(
    latency: Duration,
    configure: impl FnOnce(SqsPublisherBuilder) -> SqsPublisherBuilder,
) -> (SqsFixture, SqsPublisher) {
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("slow");
    fx.slow_queue("slow", latency);
    let publisher = configure(builder(&fx).await.default_queue(url))
        .build()
        .await
        .unwrap();
    (fx, publisher)
}

/// Whether `outcome` puts its event back, uncounted, for a second or more (as long as the
/// destination's last answer took), its call going on.
pub fn goes_on(outcome: &PublishOutcome) -> bool {
    matches!(outcome, PublishOutcome::Unavailable(f)
        if f.kind() == FailureKind::InProgress
            && f.put_back().is_some_and(|d| d >= Duration::from_secs(1)))
}

/// Publishes `events` every 200 ms while one of them is put back in progress (20 s at most): the
/// last publish's outcomes, and how long it took.
pub async fn until_answered(
    publisher: &SqsPublisher,
    events: &[ClaimedEvent],
) -> (Vec<PublishOutcome>, Duration) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let started = Instant::now();
        let outcomes = publisher.publish(events).await.unwrap();
        let took = started.elapsed();
        if !outcomes.iter().any(goes_on) || Instant::now() > until {
            return (outcomes, took);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How many messages the fixture accepted for `event` (its payload is unique).
pub fn accepted(fx: &SqsFixture, event: &ClaimedEvent) -> usize {
    let payload = event.payload();
    fx.messages()
        .iter()
        .filter(|m| m.body.contains(payload))
        .count()
}

/// `n` events bound for the slow queue.
pub fn slow_events(n: i64) -> Vec<ClaimedEvent> {
    (0..n)
        .map(|n| {
            event(
                "slow.created",
                "order",
                &format!("s{n}"),
                n,
                json!(format!("slow-{n}")),
            )
        })
        .collect()
}
