//! A publisher that fails as a whole (`Err`) whenever one particular event is in the call: the
//! relay finds that event by halves, counts its attempts until it is dead-lettered, and publishes
//! the rest; a publisher that fails every call (an outage) still counts no attempt.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use outbox_core::{ClaimedEvent, PublishOutcome, Publisher, Relay, emit_all};
use outbox_tests::{TestDb, TestEvent};

/// Fails the whole call when it holds an event of aggregate `poison` (or every call, when
/// `always`); publishes otherwise. Counts its calls.
#[derive(Default)]
struct FailsWholeOn {
    always: bool,
    /// Answers the calls it does not fail with every event put back (`Unavailable`, sent nowhere),
    /// as a publisher out of time or behind an open circuit breaker does.
    sends_nothing: bool,
    calls: AtomicUsize,
    published: std::sync::Mutex<Vec<String>>,
}

impl Publisher for FailsWholeOn {
    type Error = std::io::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.always || events.iter().any(|e| e.aggregate_id.starts_with("poison")) {
            return Err(std::io::Error::other("the broker refused the whole call"));
        }
        if self.sends_nothing {
            return Ok(vec![
                PublishOutcome::unavailable(
                    outbox_core::FailureKind::NotSent,
                    "not sent: out of time"
                );
                events.len()
            ]);
        }
        let mut published = self.published.lock().unwrap();
        published.extend(events.iter().map(|e| e.aggregate_id.clone()));
        Ok(vec![PublishOutcome::Published; events.len()])
    }
}

async fn state(db: &TestDb, aggregate_id: &str) -> (i32, bool, bool, Option<String>) {
    let row = db
        .connect()
        .await
        .query_one(
            "SELECT attempts, processed_at IS NOT NULL, dead_lettered_at IS NOT NULL, last_error \
               FROM outbox_events WHERE aggregate_id = $1",
            &[&aggregate_id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

fn relay_for(db: &TestDb, publisher: Arc<FailsWholeOn>, ordered: bool) -> Relay<Arc<FailsWholeOn>> {
    Relay::builder(db.pool().clone(), publisher)
        .per_aggregate_order(ordered)
        .max_attempts(2)
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
        .build()
        .unwrap()
}

/// Before, the whole batch was released without an attempt every time: nothing of it was ever
/// published and the event that caused it was never dead-lettered.
#[tokio::test]
async fn an_event_the_publisher_always_fails_on_is_dead_lettered_and_the_rest_published() {
    for ordered in [true, false] {
        let db = TestDb::new().await;
        let client = db.pool().get().await.unwrap();
        let mut events: Vec<TestEvent> = (0..9)
            .map(|i| TestEvent::new(format!("a-{i}"), i))
            .collect();
        events.insert(4, TestEvent::new("poison", 0));
        emit_all(&client, &events).await.unwrap();
        let publisher = Arc::new(FailsWholeOn::default());
        let relay = relay_for(&db, Arc::clone(&publisher), ordered);

        let first = relay
            .run_once()
            .await
            .expect("published in parts, not failed");
        assert_eq!(
            (first.published, first.retried),
            (9, 1),
            "ordered {ordered}: {first:?}"
        );
        let (attempts, processed, dead, _) = state(&db, "poison").await;
        assert_eq!(
            (attempts, processed, dead),
            (1, false, false),
            "ordered {ordered}"
        );
        // Halving ten events down to one: two calls per halving, four halvings.
        assert!(
            publisher.calls.load(Ordering::SeqCst) <= 1 + 2 * 4,
            "ordered {ordered}: {} calls",
            publisher.calls.load(Ordering::SeqCst)
        );

        // Alone in its batch it proves nothing; with another event beside it, it counts again.
        emit_all(&client, &[TestEvent::new("later", 0)])
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let second = relay.run_once().await.expect("published in parts");
        assert_eq!(
            (second.published, second.dead_lettered),
            (1, 1),
            "{second:?}"
        );
        let (attempts, _, dead, error) = state(&db, "poison").await;
        assert_eq!((attempts, dead), (2, true), "ordered {ordered}");
        let error = error.unwrap_or_default();
        assert!(
            error.contains("the broker refused the whole call"),
            "{error}"
        );
        let mut published = publisher.published.lock().unwrap().clone();
        published.sort();
        assert_eq!(published.len(), 10, "ordered {ordered}: {published:?}");
        assert!(!published.contains(&"poison".to_owned()));
    }
}

/// Every call failing is an outage: the batch is released, nothing counted, the relay backs off.
#[tokio::test]
async fn a_publisher_failing_every_call_counts_no_attempt() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..10)
        .map(|i| TestEvent::new(format!("a-{i}"), i))
        .collect();
    emit_all(&client, &events).await.unwrap();
    let publisher = Arc::new(FailsWholeOn {
        always: true,
        ..FailsWholeOn::default()
    });
    let relay = relay_for(&db, Arc::clone(&publisher), true);
    for _ in 0..3 {
        relay
            .run_once()
            .await
            .expect_err("an outage fails the batch");
    }
    let attempts: i64 = db
        .connect()
        .await
        .query_one("SELECT sum(attempts) FROM outbox_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(attempts, 0, "no attempt counted in an outage");
    // The whole wave, its two halves, their four halves: seven calls per batch, then it is an
    // outage.
    assert_eq!(publisher.calls.load(Ordering::SeqCst), 3 * 7);

    // Parts answered without anything published (the publisher out of time, a queue's breaker
    // open) prove nothing about the broker: the event that failed as a whole counts nothing.
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    emit_all(
        &client,
        &[TestEvent::new("poison", 0), TestEvent::new("a", 0)],
    )
    .await
    .unwrap();
    let idle = relay_for(
        &db,
        Arc::new(FailsWholeOn {
            sends_nothing: true,
            ..FailsWholeOn::default()
        }),
        true,
    );
    idle.run_once().await.expect_err("released as in an outage");
    assert_eq!(state(&db, "poison").await.0, 0, "no attempt counted");
}

/// Two such events in different halves of the wave (both halves fail): found all the same, as
/// long as some quarter of the wave goes through.
#[tokio::test]
async fn two_events_the_publisher_fails_on_in_both_halves_are_both_found() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let mut events: Vec<TestEvent> = (0..8)
        .map(|i| TestEvent::new(format!("a-{i}"), i))
        .collect();
    events.insert(2, TestEvent::new("poison-1", 0));
    events.insert(7, TestEvent::new("poison-2", 0));
    emit_all(&client, &events).await.unwrap();
    let publisher = Arc::new(FailsWholeOn::default());
    let relay = relay_for(&db, Arc::clone(&publisher), true);
    let report = relay.run_once().await.expect("published in parts");
    assert_eq!((report.published, report.retried), (8, 2), "{report:?}");
    for poison in ["poison-1", "poison-2"] {
        let (attempts, processed, _, _) = state(&db, poison).await;
        assert_eq!((attempts, processed), (1, false), "{poison}");
    }
}
