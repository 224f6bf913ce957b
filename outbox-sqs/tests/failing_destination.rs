//! A destination that fails every call as a whole (5xx) while another works is down, as a silent
//! one is: its events wait uncounted until it works again.

mod common;

use std::time::{Duration, Instant};

use common::event;
use common::slow::accepted;
use outbox_core::{PublishOutcome, Publisher};
use outbox_sqs_fixture::{CallFault, SqsFixture};
use serde_json::json;

/// A queue answering every call and probe with a 500 beside a working queue: its events are put
/// back uncounted (at most the first failure counted), the other queue's go on, and once it works
/// again its events are sent, once each. Before, every failed call charged its events an attempt
/// (black-box run: a topic failing with 500s for 30 s charged its events up to 5 attempts each;
/// at the default 10 attempts a 17-minute 5xx incident dead-letters them).
#[tokio::test]
async fn a_queue_failing_every_call_beside_a_working_one_is_down_not_charged_attempts() {
    let fx = SqsFixture::start().await;
    let a = fx.create_queue("a");
    let b = fx.create_queue("b");
    let publisher = common::builder(&fx)
        .await
        .default_queue(a)
        .route("b.*", b)
        .breaker_probe_interval(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    publisher.check().await.unwrap();
    fx.fail_queue("b", CallFault::InternalError);

    let to_b = event("b.created", "order", "b", 1, json!("to-b"));
    let mut counted = 0;
    let mut seq = 2;
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let to_a = event(
            "a.created",
            "order",
            &format!("a{seq}"),
            seq,
            json!(format!("to-a-{seq}")),
        );
        let outcomes = publisher.publish(&[to_b.clone(), to_a]).await.unwrap();
        assert_eq!(outcomes[1], PublishOutcome::Published, "{outcomes:?}");
        match &outcomes[0] {
            PublishOutcome::Retry(_) => counted += 1,
            PublishOutcome::Unavailable(_) => {}
            other => panic!("expected it put back, got {other:?}"),
        }
        seq += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(counted <= 1, "{counted} attempts charged in 5 s");

    fx.answer_queue("b");
    let sent = outbox_tests::eventually(Duration::from_secs(10), async || {
        let outcomes = publisher.publish(std::slice::from_ref(&to_b)).await;
        matches!(outcomes.as_deref(), Ok([PublishOutcome::Published]))
    })
    .await;
    assert!(sent, "not sent once the queue works");
    assert_eq!(accepted(&fx, &to_b), 1, "sent once");
}
