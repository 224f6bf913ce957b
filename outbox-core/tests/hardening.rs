//! Issue 13: no single row, setting or network fault may stall the relay silently.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::{
    CancellationToken, ClaimedEvent, ErrorKind, FailureKind, MAX_LAST_ERROR_CHARS, OutboxEvent,
    PublishOutcome, Relay, RelayMetrics, emit, emit_all,
};
use outbox_tests::{
    FlakyPublisher, RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually, note,
};
use uuid::Uuid;

/// Inserts a row the way an older producer or plain SQL would: no `emit` checks.
async fn insert_raw(db: &TestDb, aggregate_id: &str, payload: &str) -> Uuid {
    let client = db.pool().get().await.unwrap();
    client
        .query_one(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload) \
             VALUES ('order', $1, 'order.raw', $2::text::jsonb) RETURNING id",
            &[&aggregate_id, &payload],
        )
        .await
        .unwrap()
        .get(0)
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// (processed, dead-lettered, last_error) of a row, read without parsing its payload.
async fn state(db: &TestDb, id: Uuid) -> (bool, bool, Option<String>) {
    let client = db.pool().get().await.unwrap();
    let row = client
        .query_one(
            "SELECT processed_at IS NOT NULL, dead_lettered_at IS NOT NULL, last_error \
               FROM outbox_events WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

#[tokio::test]
async fn deep_and_huge_number_payloads_reach_the_publisher_as_raw_text() {
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let before = emit(&client, &TestEvent::new("a", 1)).await.unwrap();
    let deep = insert_raw(&db, "b", &nested(300)).await;
    let huge = insert_raw(
        &db,
        "c",
        r#"{"n": 1e400, "m": -123456789012345678901234567890}"#,
    )
    .await;
    let after = emit(&client, &TestEvent::new("d", 1)).await.unwrap();

    let report = relay.run_once().await.expect("no panic, no error");
    assert_eq!(report.claimed, 4);
    assert_eq!(report.published, 4);
    let published = publisher.published();
    let by_id = |id| {
        published
            .iter()
            .find(|e: &&ClaimedEvent| e.id == id)
            .unwrap()
    };
    // The text as PostgreSQL prints the jsonb, unparsed.
    let expected: String = client
        .query_one(
            "SELECT payload::text FROM outbox_events WHERE id = $1",
            &[&deep],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(by_id(deep).payload(), expected);
    assert!(by_id(deep).payload().starts_with(&"[".repeat(300)));
    assert!(
        by_id(huge)
            .payload()
            .contains("123456789012345678901234567890")
    );
    assert_eq!(note(by_id(before)).as_deref(), Some(""));
    for id in [before, deep, huge, after] {
        assert!(state(&db, id).await.0, "{id} is processed");
    }
}

#[derive(serde::Serialize, OutboxEvent)]
#[outbox(aggregate = "doc", event_type = "doc.nested")]
struct Nested {
    #[outbox(aggregate_id)]
    id: String,
    body: serde_json::Value,
}

#[tokio::test]
async fn emit_refuses_payloads_nested_past_the_limit() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let value = |depth: usize| serde_json::from_str::<serde_json::Value>(&nested(depth)).unwrap();
    // The struct adds one level: a body 126 deep makes a payload 127 deep.
    let ok = Nested {
        id: "1".into(),
        body: value(outbox_core::message::MAX_JSON_DEPTH - 1),
    };
    emit(&client, &ok).await.expect("at the limit is fine");
    let too_deep = Nested {
        id: "2".into(),
        body: value(outbox_core::message::MAX_JSON_DEPTH),
    };
    let e = emit(&client, &too_deep).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooDeep, "{e}");
    assert!(e.to_string().contains("128 levels"), "{e}");
}

/// A publisher that panics on some events fails those events only: each is charged an attempt
/// (reason `panic`) and dead-lettered when they run out, while the worker goes on. Before, every
/// such batch also killed its worker; twelve poisoned events used up the restart budget (10 in
/// 60 s) within seconds and the whole relay stopped, holding back every healthy event.
#[tokio::test]
async fn a_publisher_that_panics_on_some_events_dead_letters_them_and_the_relay_runs_on() {
    let db = TestDb::new().await;
    let publisher = Arc::new(FlakyPublisher::new(|e| {
        if note(e).as_deref() == Some("panic") {
            panic!("injected publisher panic on {}", e.aggregate_id);
        }
        None
    }));
    let metrics = RelayMetrics::new();
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .metrics(metrics.clone())
        .concurrency(2)
        .batch_size(1)
        .max_attempts(2)
        .backoff(Duration::from_millis(50), Duration::from_millis(50))
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..30)
        .map(|i| match i % 5 < 2 {
            true => TestEvent::new(format!("poison-{i}"), 0).note("panic"),
            false => TestEvent::new(format!("o-{i}"), i),
        })
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();
    let poisoned: Vec<Uuid> = (0..30).filter(|i| i % 5 < 2).map(|i| ids[i]).collect();
    assert_eq!(poisoned.len(), 12);

    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (relay, shutdown) = (relay.clone(), shutdown.clone());
        async move { relay.run(shutdown).await }
    });
    let delivered = || {
        let ids: HashSet<Uuid> = publisher.published().iter().map(|e| e.id).collect();
        ids.len()
    };
    assert!(
        eventually(Duration::from_secs(20), async || delivered() == 18).await,
        "every other event is delivered (got {})",
        delivered()
    );
    for &id in &poisoned {
        assert!(
            eventually(Duration::from_secs(10), async || state(&db, id).await.1).await,
            "an event the publisher panics on is dead-lettered once its attempts are used"
        );
        let error = state(&db, id).await.2.unwrap_or_default();
        assert!(
            error.contains("panicked") && error.contains("injected publisher panic"),
            "{error}"
        );
    }
    assert!(!run.is_finished(), "the relay runs on");
    assert_eq!(metrics.worker_restarts(), 0, "no worker died");
    assert!(
        metrics
            .encode()
            .contains("outbox_events_failed_total{event_type=\"order.test\",reason=\"panic\"}"),
        "{}",
        metrics.encode()
    );
    shutdown.cancel();
    run.await.unwrap().expect("a clean stop");
}

/// A publisher that panics on every call is a publisher that fails every event: attempts are
/// counted and the events dead-lettered with the panic's message (`outbox dead-letters retry` once
/// it is fixed); the relay itself keeps running.
#[tokio::test]
async fn a_publisher_that_always_panics_fails_every_event_and_no_worker_dies() {
    let db = TestDb::new().await;
    let publisher = Arc::new(FlakyPublisher::new(|_| panic!("always")));
    let metrics = RelayMetrics::new();
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .metrics(metrics.clone())
        .concurrency(4)
        .max_attempts(3)
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..20)
        .map(|i| TestEvent::new(format!("o-{i}"), i))
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();
    let running = RunningRelay::start(&relay);
    for id in ids {
        assert!(
            eventually(Duration::from_secs(20), async || state(&db, id).await.1).await,
            "dead-lettered after its attempts"
        );
    }
    assert_eq!(metrics.worker_restarts(), 0);
    running.stop().await;
}

#[tokio::test]
async fn an_error_with_nul_or_of_any_length_is_stored_cleaned_and_the_batch_commits() {
    let db = TestDb::new().await;
    let long = "é".repeat(10_000);
    let publisher = Arc::new(FlakyPublisher::new(move |e| match note(e).as_deref() {
        Some("nul") => Some(PublishOutcome::retry(FailureKind::Other, "bad\0byte")),
        Some("long") => Some(PublishOutcome::permanent(FailureKind::Other, long.clone())),
        _ => None,
    }));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("a", 1).note("nul"),
            TestEvent::new("b", 1).note("long"),
            TestEvent::new("c", 1),
        ],
    )
    .await
    .unwrap();
    let report = relay.run_once().await.expect("the batch commits");
    assert_eq!(
        (report.published, report.retried, report.dead_lettered),
        (1, 1, 1)
    );
    assert_eq!(state(&db, ids[0]).await.2.as_deref(), Some("badbyte"));
    let stored = state(&db, ids[1]).await.2.unwrap();
    assert_eq!(stored.chars().count(), MAX_LAST_ERROR_CHARS);
    assert!(state(&db, ids[2]).await.0);
}

/// Keeps an aggregate's order within one call (as batched FIFO calls do) and panics on every call
/// that holds an event noted "panic".
#[derive(Default)]
struct OrderKeepingPanicky {
    published: std::sync::Mutex<Vec<Uuid>>,
}

impl outbox_core::Publisher for OrderKeepingPanicky {
    type Error = std::io::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        if events.iter().any(|e| note(e).as_deref() == Some("panic")) {
            panic!("injected publisher panic");
        }
        let mut published = self.published.lock().unwrap();
        published.extend(events.iter().map(|e| e.id));
        Ok(vec![PublishOutcome::Published; events.len()])
    }

    fn keeps_aggregate_order(&self) -> bool {
        true
    }
}

/// A publisher that keeps aggregate order gets a whole batch in one call, several events of an
/// aggregate included. When it panics, the relay publishes the batch one event at a time to find
/// the culprit: an event whose earlier event of the same aggregate failed there is not sent.
#[tokio::test]
async fn after_a_panic_the_one_by_one_retry_never_sends_an_event_ahead_of_its_failed_predecessor() {
    let db = TestDb::new().await;
    let publisher = Arc::new(OrderKeepingPanicky::default());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("a", 1).note("panic"),
            TestEvent::new("a", 2),
            TestEvent::new("b", 1),
        ],
    )
    .await
    .unwrap();
    let report = relay.run_once().await.expect("the batch commits");
    assert_eq!((report.published, report.retried), (1, 1));
    let published = publisher.published.lock().unwrap().clone();
    assert_eq!(published, vec![ids[2]], "only the other aggregate's event");
    let follower = db.event(ids[1]).await;
    assert!(follower.processed_at.is_none());
    assert_eq!(follower.attempts, 0, "released without an attempt");
    assert_eq!(db.event(ids[0]).await.attempts, 1, "the culprit counts one");
}

/// A row whose attempt count is at the top of its `int` (edited by hand, imported) fails like any
/// other: dead-lettered with its reason, the rest of the batch published and marked. Counting it
/// once more overflowed (`integer out of range`), rolled the whole batch back and left the row due:
/// the same events sent again and again.
#[tokio::test]
async fn an_attempt_count_at_its_maximum_does_not_roll_the_batch_back() {
    let db = TestDb::new().await;
    let publisher = Arc::new(FlakyPublisher::new(|e| {
        (e.aggregate_id == "worn").then(|| PublishOutcome::retry(FailureKind::Broker, "refused"))
    }));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[TestEvent::new("worn", 1), TestEvent::new("fine", 1)],
    )
    .await
    .unwrap();
    client
        .execute(
            "UPDATE outbox_events SET attempts = 2147483647 WHERE id = $1",
            &[&ids[0]],
        )
        .await
        .unwrap();
    relay.run_once().await.expect("the batch commits");
    assert_eq!(
        state(&db, ids[0]).await,
        (false, true, Some("refused".into())),
        "dead-lettered with its reason"
    );
    assert!(state(&db, ids[1]).await.0, "the other event is marked");
    assert!(
        Relay::builder(db.pool().clone(), RecordingPublisher::new())
            .max_attempts(u32::MAX)
            .build()
            .is_err(),
        "more attempts than the column counts are refused"
    );
}

/// A publisher that panics before it returns its future (eager work ahead of its `async` block).
struct PanicsEagerly;

impl outbox_core::Publisher for PanicsEagerly {
    type Error = std::io::Error;

    #[allow(clippy::manual_async_fn)]
    fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Self::Error>> + Send {
        assert!(events.is_empty(), "injected eager panic");
        async { Ok(Vec::new()) }
    }
}

/// Such a panic is caught like one inside the future: the batch's events are charged an attempt
/// and the batch commits. It unwound through the relay before (the caller of `run_once`
/// panicked; a worker died with its batch rolled back, nothing charged, the event claimed again).
#[tokio::test]
async fn a_publisher_that_panics_before_its_future_is_caught() {
    let db = TestDb::new().await;
    let relay = Relay::builder(db.pool().clone(), PanicsEagerly)
        .backoff(Duration::from_millis(50), Duration::from_millis(50))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let id = emit(&client, &TestEvent::new("o-1", 1)).await.unwrap();
    let result = tokio::spawn(async move { relay.run_once().await })
        .await
        .expect("run_once does not panic");
    let report = result.expect("the batch commits");
    assert_eq!((report.claimed, report.retried), (1, 1));
    let (processed, dead, error) = state(&db, id).await;
    assert!(!processed && !dead);
    assert!(
        error.is_some_and(|e| e.contains("injected eager panic")),
        "the attempt is charged with the panic's message"
    );
}

/// A server error's detail can quote the row ("Failing row contains (…)": an event's payload):
/// the printed chain gives the server's message once, without its detail (it gave the detail, and
/// the message twice).
#[tokio::test]
async fn printed_database_errors_carry_no_row_values() {
    let db = outbox_tests::TestDb::new().await;
    let client = db.connect().await;
    let e = client
        .batch_execute(
            "CREATE TEMP TABLE t (body text CHECK (length(body) < 5));
             INSERT INTO t VALUES ('SECRET-PAYLOAD-BODY')",
        )
        .await
        .expect_err("the check refuses it");
    let text = outbox_core::error_chain(&outbox_core::Error::from(e));
    assert!(text.contains("violates check constraint"), "{text}");
    assert!(!text.contains("SECRET-PAYLOAD-BODY"), "{text}");
    assert_eq!(
        text.matches("violates check constraint").count(),
        1,
        "{text}"
    );
    assert!(!text.contains("db error"), "{text}");
}
