//! Operator-facing pieces of the library: inbox, metrics, stats and dead-letter functions.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::{
    DeadLetterFilter, FailureKind, PublishOutcome, Relay, RelayMetrics, emit_all,
    list_dead_letters, process_once, purge_dead_letters, retry_dead_letters, stats,
};
use outbox_tests::{FlakyPublisher, RunningRelay, TestDb, TestEvent};
use uuid::Uuid;

#[tokio::test]
async fn inbox_processes_an_event_once_per_consumer() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let id = Uuid::new_v4();
    assert!(process_once(&client, "billing", id).await.unwrap());
    assert!(
        !process_once(&client, "billing", id).await.unwrap(),
        "a duplicate"
    );
    assert!(
        process_once(&client, "shipping", id).await.unwrap(),
        "another consumer"
    );

    // Rolled back: the event was not processed, so the next delivery processes it.
    let mut c = db.pool().get().await.unwrap();
    let other = Uuid::new_v4();
    let tx = c.transaction().await.unwrap();
    assert!(process_once(&tx, "billing", other).await.unwrap());
    tx.rollback().await.unwrap();
    assert!(process_once(&client, "billing", other).await.unwrap());
}

/// `recorded_in_this_transaction` tells a transaction still open from one that code in between
/// ended with its own COMMIT or ROLLBACK (the next statement then runs in a transaction of its
/// own), and fails in an aborted one.
#[tokio::test]
async fn the_inbox_record_tells_whether_its_transaction_is_still_open() {
    use outbox_core::recorded_in_this_transaction as ours;
    let db = TestDb::new().await;
    let mut c = db.pool().get().await.unwrap();
    for (end, still_ours) in [("", true), ("COMMIT", false), ("ROLLBACK", false)] {
        let id = Uuid::new_v4();
        let tx = c.transaction().await.unwrap();
        assert!(process_once(&tx, "billing", id).await.unwrap());
        // Savepoints and the handler's own writes leave it this transaction's.
        tx.batch_execute("SAVEPOINT s; SELECT txid_current(); RELEASE SAVEPOINT s")
            .await
            .unwrap();
        if !end.is_empty() {
            tx.batch_execute(end).await.unwrap();
        }
        assert_eq!(
            ours(&tx, "billing", id).await.unwrap(),
            still_ours,
            "{end:?}"
        );
        assert!(
            !ours(&tx, "shipping", id).await.unwrap(),
            "another consumer's"
        );
        tx.rollback().await.unwrap();
    }
    // Written inside a savepoint (a nested `transaction()`), released: still this transaction's.
    let id = Uuid::new_v4();
    let mut tx = c.transaction().await.unwrap();
    let nested = tx.transaction().await.unwrap();
    assert!(process_once(&nested, "billing", id).await.unwrap());
    nested.commit().await.unwrap();
    assert!(
        ours(&tx, "billing", id).await.unwrap(),
        "written in a savepoint"
    );
    tx.rollback().await.unwrap();
    // Committed on its own: no transaction holds it any more.
    let id = Uuid::new_v4();
    assert!(process_once(&**c, "billing", id).await.unwrap());
    assert!(!ours(&**c, "billing", id).await.unwrap());
    // Aborted: the question fails, as `ensure_transaction_usable` does.
    let tx = c.transaction().await.unwrap();
    assert!(process_once(&tx, "billing", Uuid::new_v4()).await.unwrap());
    assert!(tx.batch_execute("SELECT 1/0").await.is_err());
    assert!(ours(&tx, "billing", id).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_consumers_of_one_event_get_exactly_one_true() {
    let db = TestDb::new().await;
    let id = Uuid::new_v4();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let pool = db.pool().clone();
        tasks.push(tokio::spawn(async move {
            let mut client = pool.get().await.unwrap();
            let tx = client.transaction().await.unwrap();
            let first = process_once(&tx, "billing", id).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.commit().await.unwrap();
            first
        }));
    }
    let mut trues = 0;
    for t in tasks {
        trues += usize::from(t.await.unwrap());
    }
    assert_eq!(trues, 1);
}

#[tokio::test]
async fn metrics_report_a_known_run() {
    let db = TestDb::new().await;
    let publisher = Arc::new(FlakyPublisher::new(|e| {
        match outbox_tests::note(e).as_deref() {
            Some("poison") => Some(PublishOutcome::permanent(
                FailureKind::InvalidContent,
                "rejected",
            )),
            Some("retry") => Some(PublishOutcome::retry(FailureKind::Throttled, "throttled")),
            _ => None,
        }
    }));
    let metrics = RelayMetrics::new();
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .metrics(metrics.clone())
        .backoff(Duration::from_secs(60), Duration::from_secs(60))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let events = [
        TestEvent::new("a", 1),
        TestEvent::new("b", 1),
        TestEvent::new("c", 1),
        TestEvent::new("d", 1).note("poison"),
        TestEvent::new("d", 2),
        TestEvent::new("e", 1).note("retry"),
    ];
    emit_all(&client, &events).await.unwrap();
    relay.run_once().await.unwrap();
    // Run the relay briefly so the gauges refresh.
    let running = RunningRelay::start(&relay);
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.stop().await;

    let text = metrics.encode();
    let has = |line: &str| {
        assert!(
            text.lines().any(|l| l == line),
            "missing `{line}` in\n{text}"
        )
    };
    has(r#"outbox_events_published_total{event_type="order.test"} 3"#);
    has(r#"outbox_events_failed_total{event_type="order.test",reason="invalid_content"} 1"#);
    has(r#"outbox_events_failed_total{event_type="order.test",reason="throttled"} 1"#);
    has(r#"outbox_events_dead_lettered_total{event_type="order.test"} 1"#);
    has("outbox_pending_events 2");
    has("outbox_dead_letter_events 1");
    has("outbox_blocked_aggregates 1");
    has("outbox_batch_duration_seconds_count 1");
    has("outbox_commit_to_publish_seconds_count 3");
    // Same machine: the two clocks agree within the round trip.
    let ahead: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("outbox_database_clock_ahead_seconds "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no clock offset in {text}"));
    assert!(ahead.abs() < 0.5, "{ahead}");
    assert!(
        text.contains("outbox_oldest_pending_age_seconds "),
        "{text}"
    );
    assert!(text.contains("outbox_relay_errors_total 0"), "{text}");
    let refreshed: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("outbox_gauges_refreshed_timestamp_seconds "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("the refresh time is exported: {text}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (now - 60.0..=now).contains(&refreshed),
        "{refreshed} vs {now}"
    );
}

#[tokio::test]
async fn dead_letter_functions_change_exactly_the_rows_asked_for() {
    let db = TestDb::new().await;
    let publisher =
        FlakyPublisher::new(|_| Some(PublishOutcome::permanent(FailureKind::Other, "no")));
    let relay = Relay::builder(db.pool().clone(), publisher)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("a", 1),
            TestEvent::new("b", 1),
            TestEvent::new("c", 1),
        ],
    )
    .await
    .unwrap();
    relay.run_once().await.unwrap();
    assert_eq!(stats(&client).await.unwrap().dead_letters, 3);

    let all = list_dead_letters(&client, &DeadLetterFilter::default(), 10)
        .await
        .unwrap();
    assert_eq!(all.iter().map(|d| d.id).collect::<Vec<_>>(), ids);
    let only_b = DeadLetterFilter {
        aggregate_id: Some("b".into()),
        ..Default::default()
    };
    assert_eq!(
        list_dead_letters(&client, &only_b, 10).await.unwrap().len(),
        1
    );
    assert_eq!(
        list_dead_letters(&client, &DeadLetterFilter::default(), 2)
            .await
            .unwrap()
            .len(),
        2
    );

    let retried = retry_dead_letters(&client, &only_b).await.unwrap();
    assert_eq!(retried, vec![ids[1]]);
    let by_id = DeadLetterFilter {
        ids: Some(vec![ids[0]]),
        ..Default::default()
    };
    assert_eq!(
        purge_dead_letters(&client, &by_id).await.unwrap(),
        vec![ids[0]]
    );
    let s = stats(&client).await.unwrap();
    assert_eq!((s.dead_letters, s.pending), (1, 1));
}

#[tokio::test]
async fn the_relay_runs_retention_when_configured() {
    // Row retention is the plain layout's; the partitioned one retires whole partitions
    // (tests/partitions.rs: the_relay_maintains_partitions).
    let db = TestDb::plain().await;
    let publisher = Arc::new(outbox_tests::RecordingPublisher::new());
    let client = db.pool().get().await.unwrap();
    let old = emit_all(&client, &[TestEvent::new("a", 1), TestEvent::new("b", 1)])
        .await
        .unwrap();
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .build()
        .unwrap();
    relay.run_once().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let fresh = emit_all(&client, &[TestEvent::new("c", 1)]).await.unwrap();

    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .retention(Some(Duration::from_secs(1)))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    // Both: housekeeping's first round can delete the old rows before a worker has published
    // the fresh event (stopping then left it pending: a flaky failure under load).
    let gone = outbox_tests::eventually(Duration::from_secs(5), async || {
        let q = outbox_queries::queries::admin::get_outbox_event();
        q.bind(&client, &old[0]).opt().await.unwrap().is_none()
            && db.event(fresh[0]).await.processed_at.is_some()
    })
    .await;
    running.stop().await;
    assert!(gone, "processed rows older than the retention were deleted");
    let q = outbox_queries::queries::admin::get_outbox_event();
    assert!(q.bind(&client, &old[1]).opt().await.unwrap().is_none());
    let kept = db.event(fresh[0]).await;
    assert!(
        kept.processed_at.is_some(),
        "the fresh event was published and kept"
    );
}
