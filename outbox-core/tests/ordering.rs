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
