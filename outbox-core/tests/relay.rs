//! The relay engine against a real PostgreSQL with in-process publishers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outbox_core::{CancellationToken, FailureKind, PublishOutcome, Relay, emit, emit_all};
use outbox_queries::queries::admin;
use outbox_tests::{
    FlakyPublisher, RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually,
};
use uuid::Uuid;

#[tokio::test]
async fn committed_event_is_published_exactly_once_and_rolled_back_never() {
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .listen(db.config().clone())
        .poll_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);

    let mut client = db.pool().get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    emit(&tx, &TestEvent::new("o-1", 1).note("rolled back"))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let committed = emit(&tx, &TestEvent::new("o-2", 1)).await.unwrap();
    tx.commit().await.unwrap();

    assert!(eventually(Duration::from_secs(5), async || publisher.ids().len() == 1).await);
    // Give the relay time to (wrongly) publish again.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(publisher.ids(), vec![committed]);
    assert!(db.event(committed).await.processed_at.is_some());
    assert_eq!(db.pending().await, 0);
    running.stop().await;
}

#[tokio::test]
async fn failed_events_are_retried_after_backoff_and_dead_lettered_when_permanent_or_exhausted() {
    let db = TestDb::new().await;
    let publisher = Arc::new(FlakyPublisher::new({
        move |e| match outbox_tests::note(e).as_deref() {
            Some("retry-once") if e.attempts == 0 => {
                Some(PublishOutcome::retry(FailureKind::Other, "throttled"))
            }
            Some("permanent") => Some(PublishOutcome::permanent(
                FailureKind::Other,
                "invalid content",
            )),
            Some("always") => Some(PublishOutcome::retry(FailureKind::Other, "server error")),
            _ => None,
        }
    }));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .max_attempts(3)
        .backoff(Duration::from_millis(400), Duration::from_secs(10))
        .backoff_jitter(0.0)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("ok", 1),
            TestEvent::new("retry", 1).note("retry-once"),
            TestEvent::new("perm", 1).note("permanent"),
            TestEvent::new("always", 1).note("always"),
        ],
    )
    .await
    .unwrap();
    let (ok, retry, perm, always) = (ids[0], ids[1], ids[2], ids[3]);

    let report = relay.run_once().await.unwrap();
    assert_eq!(
        (
            report.claimed,
            report.published,
            report.retried,
            report.dead_lettered
        ),
        (4, 1, 2, 1)
    );
    assert!(db.event(ok).await.processed_at.is_some());
    let r = db.event(retry).await;
    assert_eq!(
        (r.attempts, r.last_error.as_deref()),
        (1, Some("throttled"))
    );
    assert!(r.processed_at.is_none() && r.dead_lettered_at.is_none());
    let wait = r.retry_after.unwrap() - chrono::Utc::now();
    assert!(
        wait.num_milliseconds() > 200,
        "retry_after = now() + base backoff: {wait:?}"
    );
    let p = db.event(perm).await;
    assert!(
        p.dead_lettered_at.is_some(),
        "a permanent failure is dead-lettered at once"
    );
    assert_eq!(
        (p.attempts, p.last_error.as_deref()),
        (1, Some("invalid content"))
    );

    // Not before retry_after.
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.claimed, 0, "{report:?}");

    tokio::time::sleep(Duration::from_millis(450)).await;
    let report = relay.run_once().await.unwrap();
    assert_eq!(
        (report.claimed, report.published, report.retried),
        (2, 1, 1),
        "{report:?}"
    );
    assert!(db.event(retry).await.processed_at.is_some());
    let a = db.event(always).await;
    assert_eq!(a.attempts, 2);
    let wait = a.retry_after.unwrap() - chrono::Utc::now();
    assert!(
        wait.num_milliseconds() > 600,
        "the second retry waits twice the base: {wait:?}"
    );

    tokio::time::sleep(Duration::from_millis(850)).await;
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.dead_lettered, 1, "{report:?}");
    let a = db.event(always).await;
    assert_eq!(a.attempts, 3);
    assert!(a.dead_lettered_at.is_some(), "dead after max attempts");
    assert_eq!(a.last_error.as_deref(), Some("server error"));
    let published: Vec<Uuid> = publisher.published().iter().map(|e| e.id).collect();
    assert_eq!(published, vec![ok, retry]);
}

/// Four relays, 5 000 events over 50 aggregates written while they run, a publisher failing 10 % of
/// calls as a whole and 3 % of events on their own: every event published exactly once, and per
/// aggregate in `seq` order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_relays_keep_per_aggregate_order_under_failures() {
    let db = TestDb::new().await;
    let publisher = Arc::new(
        FlakyPublisher::new(|e| {
            (e.id.as_u128() % 33 == 0 && e.attempts == 0)
                .then(|| PublishOutcome::retry(FailureKind::Other, "injected"))
        })
        .failing_calls(0.10),
    );
    let stop = CancellationToken::new();
    let mut relays = Vec::new();
    for _ in 0..4 {
        let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
            .listen(db.config().clone())
            .batch_size(50)
            .concurrency(2)
            .max_attempts(1000)
            .backoff(Duration::from_millis(5), Duration::from_millis(50))
            .poll_interval(Duration::from_millis(50))
            .build()
            .unwrap();
        let stop = stop.clone();
        relays.push(tokio::spawn(async move { relay.run(stop).await }));
    }

    let mut ids = Vec::new();
    let client = db.pool().get().await.unwrap();
    for chunk in 0..50u64 {
        let events: Vec<TestEvent> = (0..100u64)
            .map(|i| {
                let n = chunk * 100 + i;
                TestEvent::new(format!("agg-{}", n % 50), n)
            })
            .collect();
        ids.extend(emit_all(&client, &events).await.unwrap());
    }
    assert_eq!(ids.len(), 5000);

    let drained = eventually(Duration::from_secs(60), async || db.pending().await == 0).await;
    stop.cancel();
    for r in relays {
        r.await.unwrap().unwrap();
    }
    assert!(drained, "the backlog drains: {} left", db.pending().await);

    let published = publisher.published();
    let unique: HashSet<Uuid> = published.iter().map(|e| e.id).collect();
    assert_eq!(unique.len(), published.len(), "no event published twice");
    assert_eq!(
        unique,
        ids.iter().copied().collect::<HashSet<_>>(),
        "every event published"
    );
    let mut last: HashMap<String, i64> = HashMap::new();
    for e in &published {
        let prev = last.insert(e.aggregate_id.clone(), e.seq).unwrap_or(0);
        assert!(
            prev < e.seq,
            "aggregate {} published seq {} after {}",
            e.aggregate_id,
            e.seq,
            prev
        );
    }
    let (calls, failed) = publisher.calls();
    assert!(
        failed > 0 && calls > failed,
        "faults were injected: {failed} of {calls} calls"
    );
}

#[tokio::test]
async fn a_dead_event_blocks_its_aggregate_only() {
    let db = TestDb::new().await;
    let poisoned = Arc::new(AtomicBool::new(true));
    let publisher = Arc::new(FlakyPublisher::new({
        let poisoned = Arc::clone(&poisoned);
        move |e| {
            (outbox_tests::note(e).as_deref() == Some("poison") && poisoned.load(Ordering::SeqCst))
                .then(|| PublishOutcome::permanent(FailureKind::Other, "poison"))
        }
    }));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("x", 1).note("poison"),
            TestEvent::new("y", 1),
            TestEvent::new("x", 2),
            TestEvent::new("y", 2),
            TestEvent::new("x", 3),
        ],
    )
    .await
    .unwrap();
    while relay.run_once().await.unwrap().claimed > 0 {}
    let published: Vec<Uuid> = publisher.published().iter().map(|e| e.id).collect();
    assert_eq!(
        published,
        vec![ids[1], ids[3]],
        "y flows, x waits behind its dead letter"
    );
    assert!(db.event(ids[0]).await.dead_lettered_at.is_some());

    // The cause is fixed and the operator retries the dead letter: x drains in order.
    poisoned.store(false, Ordering::SeqCst);
    admin::retry_dead_letters()
        .bind(
            &client,
            &Some(vec![ids[0]]),
            &None::<&str>,
            &None::<&str>,
            &None::<&str>,
        )
        .all()
        .await
        .unwrap();
    while relay.run_once().await.unwrap().claimed > 0 {}
    let published: Vec<Uuid> = publisher.published().iter().map(|e| e.id).collect();
    assert_eq!(published, vec![ids[1], ids[3], ids[0], ids[2], ids[4]]);
}

/// A long backlog blocked behind a dead letter fills the oldest pending events; an aggregate whose
/// events come after it must not starve, and a few aggregates with long backlogs drain in order.
#[tokio::test]
async fn aggregates_behind_a_long_blocked_backlog_do_not_starve() {
    let db = TestDb::new().await;
    let publisher = Arc::new(FlakyPublisher::new(|e| {
        (outbox_tests::note(e).as_deref() == Some("poison"))
            .then(|| PublishOutcome::permanent(FailureKind::Other, "poison"))
    }));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .batch_size(50)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let mut clog = vec![TestEvent::new("x", 0).note("poison")];
    clog.extend((1..1500).map(|n| TestEvent::new("x", n)));
    emit_all(&client, &clog).await.unwrap();
    relay.run_once().await.unwrap();
    // Three aggregates with 400 events each, all after the blocked backlog.
    let late: Vec<TestEvent> = (0..1200)
        .map(|n| TestEvent::new(format!("y-{}", n % 3), n))
        .collect();
    let late_ids = emit_all(&client, &late).await.unwrap();
    while relay.run_once().await.unwrap().claimed > 0 {}
    let published = publisher.published();
    assert_eq!(
        published.len(),
        1200,
        "every event behind the clog was published"
    );
    let published_ids: HashSet<Uuid> = published.iter().map(|e| e.id).collect();
    assert_eq!(published_ids, late_ids.iter().copied().collect());
    let mut last: HashMap<String, i64> = HashMap::new();
    for e in &published {
        let prev = last.insert(e.aggregate_id.clone(), e.seq).unwrap_or(0);
        assert!(prev < e.seq, "in order within {}", e.aggregate_id);
    }
    assert_eq!(
        db.pending().await,
        1499,
        "x stays blocked behind its dead letter"
    );
}

#[tokio::test]
async fn without_ordering_a_dead_event_blocks_nothing() {
    let db = TestDb::new().await;
    let publisher = Arc::new(FlakyPublisher::new(|e| {
        (outbox_tests::note(e).as_deref() == Some("poison"))
            .then(|| PublishOutcome::permanent(FailureKind::Other, "poison"))
    }));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .per_aggregate_order(false)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("x", 1).note("poison"),
            TestEvent::new("x", 2),
        ],
    )
    .await
    .unwrap();
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.published, report.dead_lettered), (1, 1));
    assert_eq!(publisher.published()[0].id, ids[1]);
}

/// A database in an encoding that lacks characters of a failure's text (LATIN1): the failure is
/// recorded in ASCII instead of failing the statement — which rolled the batch back, counted no
/// attempt and repeated for ever, and took the events published with it in the same batch along.
#[tokio::test]
async fn failures_are_recorded_in_a_database_whose_encoding_lacks_their_characters() {
    let db = TestDb::with_encoding("LATIN1").await;
    let long = format!("{} – {}", "x".repeat(3_000), "失敗");
    let publisher = Arc::new(FlakyPublisher::new(move |e| {
        match outbox_tests::note(e).as_deref() {
            Some("unicode") => Some(PublishOutcome::retry(FailureKind::Other, "échec … 失敗")),
            Some("long") => Some(PublishOutcome::permanent(FailureKind::Other, long.clone())),
            _ => None,
        }
    }));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .backoff(Duration::from_secs(60), Duration::from_secs(60))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("ok", 1),
            TestEvent::new("unicode", 1).note("unicode"),
            TestEvent::new("long", 1).note("long"),
        ],
    )
    .await
    .unwrap();
    let report = relay.run_once().await.expect("the batch is recorded");
    assert_eq!(
        (report.published, report.retried, report.dead_lettered),
        (1, 1, 1)
    );
    assert!(db.event(ids[0]).await.processed_at.is_some());
    let unicode = db.event(ids[1]).await;
    assert_eq!(unicode.attempts, 1);
    assert_eq!(
        unicode.last_error.as_deref(),
        Some("\\u{e9}chec \\u{2026} \\u{5931}\\u{6557}"),
        "every character beyond ASCII is written as an escape"
    );
    let long = db.event(ids[2]).await;
    assert!(long.dead_lettered_at.is_some());
    let error = long.last_error.unwrap_or_default();
    assert_eq!(error.chars().count(), outbox_core::MAX_LAST_ERROR_CHARS);
    assert!(error.ends_with("..."), "cut with an ASCII marker");
}
