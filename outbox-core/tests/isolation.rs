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
    calls: AtomicUsize,
    published: std::sync::Mutex<Vec<String>>,
}

impl Publisher for FailsWholeOn {
    type Error = std::io::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.always || events.iter().any(|e| e.aggregate_id == "poison") {
            return Err(std::io::Error::other("the broker refused the whole call"));
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

fn relay(db: &TestDb, publisher: Arc<FailsWholeOn>, ordered: bool) -> Relay<Arc<FailsWholeOn>> {
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
        let relay = relay(&db, Arc::clone(&publisher), ordered);

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
    let relay = relay(&db, Arc::clone(&publisher), true);
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
    // The whole wave, then its two halves: three calls per batch.
    assert_eq!(publisher.calls.load(Ordering::SeqCst), 3 * 3);
}
