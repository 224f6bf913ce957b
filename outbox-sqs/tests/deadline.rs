//! `SqsPublisher` and the relay's publish deadline: it stops sending when a call could not be
//! answered in time, keeps what SQS accepted, and says how long it needs.

mod common;

use std::time::Duration;

use common::{builder, events};
use outbox_core::{PublishOutcome, Publisher};
use outbox_sqs_fixture::{CallFault, SqsFixture};

#[tokio::test]
async fn a_publish_near_its_deadline_sends_what_fits_and_puts_back_the_rest() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = builder(&fx)
        .await
        .max_in_flight(1)
        .call_timeout(Duration::from_millis(500))
        // The publish waits for its calls (the deadline, 1.2 s, is what this test is about; with
        // the default wait of 1 s the fourth call went on, accepted after the publish returned).
        .call_wait(Duration::from_secs(3600))
        .default_queue(q)
        .build()
        .await
        .unwrap();
    assert_eq!(publisher.min_publish_timeout(1), Duration::from_millis(500));
    // 50 events: 5 calls, one at a time.
    assert_eq!(
        publisher.min_publish_timeout(50),
        Duration::from_millis(2_500)
    );
    fx.set_latency(Duration::from_millis(300));
    let evs = events(50, "order.created");
    let started = tokio::time::Instant::now();
    let deadline = started + Duration::from_millis(1_200);
    let outcomes = publisher.publish_within(&evs, deadline).await.unwrap();
    assert!(
        tokio::time::Instant::now() <= deadline,
        "returned by the deadline"
    );
    let published = outcomes
        .iter()
        .filter(|o| **o == PublishOutcome::Published)
        .count();
    let put_back = outcomes
        .iter()
        .filter(|o| matches!(o, PublishOutcome::Unavailable(_)))
        .count();
    assert_eq!(
        published as u64,
        fx.accepted(),
        "Published is what SQS accepted"
    );
    assert!((10..50).contains(&published), "{published} published");
    assert_eq!(published + put_back, 50, "{outcomes:?}");
}

/// A batch refused as a whole is re-sent entry by entry: those re-sends stop too when a call could
/// not be answered before the deadline (they went on one after the other past it, and the relay,
/// dropping the late call, released events SQS had accepted: sent again, duplicates).
#[tokio::test]
async fn the_entry_by_entry_resend_of_a_refused_batch_stops_at_the_deadline() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = builder(&fx)
        .await
        .call_timeout(Duration::from_millis(200))
        .default_queue(q)
        .build()
        .await
        .unwrap();
    fx.set_latency(Duration::from_millis(100));
    fx.fail_next_calls(
        1,
        CallFault::Error {
            status: 400,
            code: "InvalidParameterValue".into(),
            message: "one of the entries is invalid".into(),
        },
    );
    let evs = events(10, "order.created");
    let deadline = tokio::time::Instant::now() + Duration::from_millis(450);
    let outcomes = publisher.publish_within(&evs, deadline).await.unwrap();
    assert!(
        tokio::time::Instant::now() <= deadline,
        "returned by the deadline"
    );
    let published = outcomes
        .iter()
        .filter(|o| **o == PublishOutcome::Published)
        .count();
    assert_eq!(published as u64, fx.accepted());
    assert!((1..10).contains(&published), "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|o| *o == PublishOutcome::Published || matches!(o, PublishOutcome::Unavailable(_))),
        "the rest put back without an attempt: {outcomes:?}"
    );
}
