//! Per-aggregate order however writers interleave: an event is never published while an earlier
//! event of its aggregate (lower `seq`) is still uncommitted, pending, retrying or dead.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_core::{Emitter, Relay, emit, emit_all};
use outbox_tests::interleaved::{Interleaving, order_violations, seqs, write_interleaved};
use outbox_tests::{RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually};

/// T1 emits event 1 of an aggregate and stays open; T2 emits event 2 of the same aggregate and
/// commits. The aggregate lock makes T2 wait for T1: event 2 can only follow event 1.
#[tokio::test]
async fn a_second_writer_of_an_aggregate_waits_for_the_first_to_finish() {
    let db = TestDb::new().await;
    let mut c1 = db.pool().get().await.unwrap();
    let t1 = c1.transaction().await.unwrap();
    let first = emit(&t1, &TestEvent::new("race", 1)).await.unwrap();

    let second = tokio::spawn({
        let pool = db.pool().clone();
        async move {
            let mut c2 = pool.get().await.unwrap();
            let t2 = c2.transaction().await.unwrap();
            let id = emit(&t2, &TestEvent::new("race", 2)).await.unwrap();
            t2.commit().await.unwrap();
            (id, Instant::now())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "T2 committed while T1 was open");
    // A writer of another aggregate does not wait.
    let other = db.pool().get().await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(2),
        emit(&other, &TestEvent::new("elsewhere", 1)),
    )
    .await
    .expect("writers of other aggregates never wait")
    .unwrap();
    let t1_committed = Instant::now();
    t1.commit().await.unwrap();
    let (second_id, t2_committed) = second.await.unwrap();
    assert!(t2_committed >= t1_committed);
    let seqs = seqs(db.pool()).await;
    assert!(
        seqs[&first].1 < seqs[&second_id].1,
        "seq follows commit order"
    );
}

/// A writer in plain SQL that takes the lock the README documents waits for an open `emit` of the
/// same aggregate, and another aggregate's does not: the key is `emit`'s own (a black-box run with
/// `psql` writers that took no lock saw two events of one aggregate reach a FIFO queue out of
/// order).
#[tokio::test]
async fn a_plain_sql_writer_taking_the_documented_lock_waits_for_emit() {
    let db = TestDb::new().await;
    let mut c1 = db.pool().get().await.unwrap();
    let t1 = c1.transaction().await.unwrap();
    emit(&t1, &TestEvent::new("42", 1)).await.unwrap();
    let writer = db.connect().await;
    let recipe = |id: &str| {
        format!(
            "BEGIN; SET LOCAL lock_timeout = '300ms'; \
             SELECT pg_advisory_xact_lock(hashtextextended('order' || E'\\x1f' || '{id}', 0)); \
             INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload, metadata) \
             VALUES (gen_random_uuid(), 'order', '{id}', 'order.test', '{{}}', '{{}}'); COMMIT;"
        )
    };
    let waited = writer.batch_execute(&recipe("42")).await;
    let code = waited.as_ref().err().and_then(|e| e.code().cloned());
    assert_eq!(
        code,
        Some(tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE),
        "the plain-SQL writer did not wait for emit: {waited:?}"
    );
    writer.batch_execute("ROLLBACK").await.unwrap();
    writer
        .batch_execute(&recipe("43"))
        .await
        .expect("another aggregate's writer does not wait");
    t1.commit().await.unwrap();
    writer
        .batch_execute(&recipe("42"))
        .await
        .expect("free once emit's transaction committed");
}

/// The same for a rolled-back first writer: the second proceeds once it is gone.
#[tokio::test]
async fn a_rolled_back_first_writer_releases_the_aggregate() {
    let db = TestDb::new().await;
    let mut c1 = db.pool().get().await.unwrap();
    let t1 = c1.transaction().await.unwrap();
    emit_all(&t1, &[TestEvent::new("b", 1), TestEvent::new("a", 1)])
        .await
        .unwrap();
    let second = tokio::spawn({
        let pool = db.pool().clone();
        async move {
            let c2 = pool.get().await.unwrap();
            emit(&c2, &TestEvent::new("a", 2)).await.unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!second.is_finished());
    t1.rollback().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), second)
        .await
        .expect("the second writer proceeds after the rollback")
        .unwrap();
}

/// With the lock off (relays without per-aggregate order), writers never wait for each other.
#[tokio::test]
async fn without_order_writers_of_one_aggregate_do_not_wait() {
    let db = TestDb::new().await;
    let unordered = Emitter::new().per_aggregate_order(false);
    let mut c1 = db.pool().get().await.unwrap();
    let t1 = c1.transaction().await.unwrap();
    unordered
        .emit(&t1, &TestEvent::new("race", 1))
        .await
        .unwrap();
    let c2 = db.pool().get().await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(2),
        unordered.emit_all(&c2, &[TestEvent::new("race", 2)]),
    )
    .await
    .expect("no lock without order")
    .unwrap();
    t1.commit().await.unwrap();
}

/// 8 writers × 10 aggregates with random pauses between emit and commit and 10 % rollbacks, 4
/// relays, 20 000 events: nothing lost, nothing rolled back published, nothing published twice,
/// and within every aggregate events published in `seq` (= commit) order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn randomized_interleaving_with_four_relays_keeps_order() {
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::new());
    let relays: Vec<RunningRelay> = (0..4)
        .map(|_| {
            let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
                .listen(db.config().clone())
                .batch_size(50)
                .concurrency(2)
                .poll_interval(Duration::from_millis(100))
                .build()
                .unwrap();
            RunningRelay::start(&relay)
        })
        .collect();
    let shape = Interleaving {
        writers: 8,
        aggregates: 10,
        events: 20_000,
        rollback_rate: 0.1,
        max_pause: Duration::from_millis(3),
    };
    let started = Instant::now();
    let writes = write_interleaved(db.pool(), "agg", shape).await;
    let written_in = started.elapsed();
    assert_eq!(writes.committed.len(), shape.events);
    assert!(
        eventually(Duration::from_secs(120), async || db.pending().await == 0).await,
        "the relays did not drain the outbox"
    );
    for r in relays {
        r.stop().await;
    }
    let published = publisher.ids();
    let seqs = seqs(db.pool()).await;
    let distinct: HashSet<_> = published.iter().copied().collect();
    let committed: HashSet<_> = writes.committed.iter().copied().collect();
    let rolled_back_published = writes
        .rolled_back
        .iter()
        .filter(|id| distinct.contains(id))
        .count();
    let lost = committed.difference(&distinct).count();
    let violations = order_violations(&published, &seqs);
    eprintln!(
        "ordering randomized: events={} rolled_back={} published={} lost={lost} duplicates={} \
         order_violations={violations} rolled_back_published={rolled_back_published} \
         written_in={:.1}s total={:.1}s",
        committed.len(),
        writes.rolled_back.len(),
        published.len(),
        published.len() - distinct.len(),
        written_in.as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
    assert_eq!(
        (
            lost,
            published.len() - distinct.len(),
            violations,
            rolled_back_published
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(distinct, committed);
}

/// A broker that keeps an aggregate's order within one call (as a FIFO queue does with one
/// message group per call): it accepts events in order until the one noted "fail", and sends none
/// of that aggregate's later events. Records the events of every call.
struct OrderKeeping {
    calls: std::sync::Mutex<Vec<Vec<uuid::Uuid>>>,
}

impl outbox_core::Publisher for OrderKeeping {
    type Error = std::io::Error;

    async fn publish(
        &self,
        events: &[outbox_core::ClaimedEvent],
    ) -> Result<Vec<outbox_core::PublishOutcome>, Self::Error> {
        use outbox_core::{FailureKind, PublishOutcome};
        self.calls
            .lock()
            .unwrap()
            .push(events.iter().map(|e| e.id).collect());
        let mut failed: HashSet<String> = HashSet::new();
        Ok(events
            .iter()
            .map(|e| {
                if failed.contains(&e.aggregate_id) {
                    PublishOutcome::retry(FailureKind::NotSent, "held back")
                } else if outbox_tests::note(e).as_deref() == Some("fail") && e.attempts == 0 {
                    failed.insert(e.aggregate_id.clone());
                    PublishOutcome::retry(FailureKind::Throttled, "throttled")
                } else {
                    PublishOutcome::Published
                }
            })
            .collect())
    }

    fn keeps_aggregate_order(&self) -> bool {
        true
    }
}

/// A publisher that keeps an aggregate's order within a call gets a whole batch in one call (not
/// one wave per position); after a failure, the aggregate's later events of that call are put back
/// without counting an attempt, and nothing overtakes the failed event.
#[tokio::test]
async fn an_order_keeping_publisher_gets_whole_batches_and_held_back_events_cost_no_attempt() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (1..=6)
        .map(|n| {
            let e = TestEvent::new("hot", n);
            if n == 3 { e.note("fail") } else { e }
        })
        .chain([TestEvent::new("cool", 1)])
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();
    let publisher = Arc::new(OrderKeeping {
        calls: std::sync::Mutex::new(Vec::new()),
    });
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
        .build()
        .unwrap();

    let report = relay.run_once().await.unwrap();
    assert_eq!(
        publisher.calls.lock().unwrap().clone(),
        vec![ids.clone()],
        "one call with the whole batch, in seq order"
    );
    assert_eq!(
        (report.published, report.retried, report.released),
        (3, 1, 3),
        "{report:?}"
    );
    assert_eq!(
        db.event(ids[2]).await.attempts,
        1,
        "the failed event counts an attempt"
    );
    for &held in &ids[3..6] {
        let e = db.event(held).await;
        assert_eq!(e.attempts, 0, "held back: no attempt");
        assert!(e.processed_at.is_none());
    }

    tokio::time::sleep(Duration::from_millis(20)).await;
    relay.run_once().await.unwrap();
    let calls = publisher.calls.lock().unwrap().clone();
    assert_eq!(
        calls[1],
        ids[2..6].to_vec(),
        "the rest of the aggregate, in order"
    );
    assert_eq!(db.pending().await, 0);
}
