//! Shutdown while a slow destination's batch calls go on after their publish: the relay waits for
//! them, within its grace period, and marks the events they got accepted (deletes them, with a
//! zero retention), so that a restart does not send them again. Before, shutdown cut those calls
//! and a restart sent their events a second time.

mod common;

use std::time::{Duration, Instant};

use common::builder;
use outbox_core::{Emitter, Relay};
use outbox_sqs_fixture::SqsFixture;
use outbox_tests::{RunningRelay, TestDb, TestEvent, eventually};

/// How many messages the fixture accepted for aggregate `order_id`.
fn accepted(fx: &SqsFixture, order_id: &str) -> usize {
    fx.messages()
        .iter()
        .filter(|m| {
            serde_json::from_str::<serde_json::Value>(&m.body)
                .is_ok_and(|v| v["order_id"] == order_id)
        })
        .count()
}

/// Stops a relay 1.3 s into a call answered in 3 s (going on after the call wait, 1 s), with
/// `retention`; returns the database, the fixture, the slow event's id and how long stopping took.
async fn stopped_during_a_call(
    retention: Option<Duration>,
) -> (TestDb, SqsFixture, uuid::Uuid, Duration) {
    let db = TestDb::new().await;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("slow");
    let publisher = builder(&fx).await.default_queue(url).build().await.unwrap();
    let relay = Relay::builder(db.pool().clone(), publisher.clone())
        .poll_interval(Duration::from_millis(100))
        .retention(retention)
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let emitter = Emitter::for_publisher(&publisher);
    let client = db.pool().get().await.unwrap();
    emitter
        .emit(&**client, &TestEvent::new("warm", 1))
        .await
        .unwrap();
    assert!(eventually(Duration::from_secs(10), async || accepted(&fx, "warm") == 1).await);
    fx.slow_queue("slow", Duration::from_millis(3_000));
    let calls = fx.calls_to("SendMessageBatch");
    let slow = emitter
        .emit(&**client, &TestEvent::new("slow", 1))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), async || fx
            .calls_to("SendMessageBatch")
            > calls)
        .await
    );
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert_eq!(accepted(&fx, "slow"), 0, "its call still runs");
    let stopping = Instant::now();
    running.stop().await;
    (db, fx, slow, stopping.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_calls_going_on_at_shutdown_are_marked_and_not_sent_again() {
    let (db, fx, slow, took) = stopped_during_a_call(None).await;
    assert!(
        took < Duration::from_secs(4),
        "stopping took {took:?} for a call ending 1.7 s later"
    );
    assert_eq!(accepted(&fx, "slow"), 1, "the call went on to its end");
    assert!(db.processed(&[slow]).await, "marked at shutdown");

    // A restart does not send it again.
    fx.slow_queue("slow", Duration::ZERO);
    let publisher = builder(&fx)
        .await
        .default_queue(fx.queue_url("slow"))
        .build()
        .await
        .unwrap();
    let relay = Relay::builder(db.pool().clone(), publisher.clone())
        .poll_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let client = db.pool().get().await.unwrap();
    let after = Emitter::for_publisher(&publisher)
        .emit(&**client, &TestEvent::new("after", 1))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), async || db
            .processed(&[after])
            .await)
        .await
    );
    running.stop().await;
    assert_eq!(accepted(&fx, "slow"), 1, "sent again after the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_zero_retention_they_are_deleted() {
    let (db, fx, slow, _) = stopped_during_a_call(Some(Duration::ZERO)).await;
    assert_eq!(accepted(&fx, "slow"), 1);
    let rows: i64 = db
        .connect()
        .await
        .query_one("SELECT count(*) FROM outbox_events WHERE id = $1", &[&slow])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "deleted at shutdown");
}

/// Any wait is taken, `Duration::MAX` too (an instant that far ahead overflowed), and with
/// nothing going on nothing is waited for.
#[tokio::test]
async fn settle_takes_any_wait_and_returns_at_once_with_nothing_going_on() {
    use outbox_core::Publisher;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("q");
    let publisher = builder(&fx).await.default_queue(url).build().await.unwrap();
    let started = Instant::now();
    assert!(publisher.settle(Duration::MAX).await.is_empty());
    assert!(started.elapsed() < Duration::from_secs(1));
}
