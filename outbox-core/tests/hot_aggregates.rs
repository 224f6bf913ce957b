//! A few hot aggregates carrying the whole backlog (issue 18, goal 4): concurrent claims share the
//! aggregates out instead of one claim holding every head, and per-aggregate order still holds —
//! across workers and relays, with events failing part-way through an aggregate's run in one call.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome, Publisher, Relay, emit_all};
use outbox_tests::interleaved::{order_violations, seqs};
use outbox_tests::{RunningRelay, TestDb, TestEvent, eventually};
use tokio::sync::Notify;

/// `per_aggregate` events for each of `aggregates` aggregates, interleaved (round-robin) in `seq`.
async fn backlog(db: &TestDb, aggregates: usize, per_aggregate: u64) -> Vec<uuid::Uuid> {
    let events: Vec<TestEvent> = (1..=per_aggregate)
        .flat_map(|n| (0..aggregates).map(move |a| TestEvent::new(format!("hot-{a}"), n)))
        .collect();
    let client = db.pool().get().await.unwrap();
    emit_all(&client, &events).await.unwrap()
}

/// Holds its first call until [`Gate::open`]; every call is recorded and accepted.
#[derive(Default)]
struct Gate {
    calls: Mutex<Vec<Vec<ClaimedEvent>>>,
    entered: Notify,
    open: Notify,
}

impl Publisher for Gate {
    type Error = std::io::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        let first = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(events.to_vec());
            calls.len() == 1
        };
        if first {
            self.entered.notify_one();
            self.open.notified().await;
        }
        Ok(vec![PublishOutcome::Published; events.len()])
    }

    fn keeps_aggregate_order(&self) -> bool {
        true
    }
}

fn aggregates(events: &[ClaimedEvent]) -> HashSet<String> {
    events.iter().map(|e| e.aggregate_id.clone()).collect()
}

/// 10 hot aggregates, 4 workers: while one batch is publishing, another claim still finds work —
/// other aggregates, none of the first batch's — and each batch is full, with its aggregates' runs
/// of followers. (Before, the first claim took all 10 heads and the second found nothing.)
#[tokio::test]
async fn a_claim_during_a_hot_batch_takes_other_aggregates() {
    let db = TestDb::new().await;
    backlog(&db, 10, 60).await;
    let publisher = Arc::new(Gate::default());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .batch_size(100)
        .concurrency(4)
        .per_aggregate_order(true)
        .build()
        .unwrap();

    let first = tokio::spawn({
        let relay = relay.clone();
        async move { relay.run_once().await }
    });
    tokio::time::timeout(Duration::from_secs(10), publisher.entered.notified())
        .await
        .expect("the first batch reaches the publisher");
    let second = tokio::time::timeout(Duration::from_secs(10), relay.run_once())
        .await
        .expect("the second batch does not wait for the first")
        .unwrap();
    publisher.open.notify_one();
    let first = first.await.unwrap().unwrap();

    let calls = publisher.calls.lock().unwrap().clone();
    assert!(
        second.claimed > 0,
        "the second claim found nothing while the first batch was in flight ({first:?})"
    );
    let (a, b) = (aggregates(&calls[0]), aggregates(&calls[1]));
    assert!(a.is_disjoint(&b), "aggregates in both batches: {a:?} {b:?}");
    assert!(
        a.len() <= 3 && b.len() <= 3,
        "a claim takes about a quarter of the 10 hot aggregates: {a:?} {b:?}"
    );
    assert_eq!(
        (first.claimed, second.claimed),
        (100, 100),
        "full batches of followers"
    );
}

/// With few aggregates and little backlog (less than a full batch per worker) a claim still takes
/// every head it finds: nothing is held back for workers that would have nothing else to do.
#[tokio::test]
async fn a_small_backlog_is_claimed_whole() {
    let db = TestDb::new().await;
    let ids = backlog(&db, 10, 5).await;
    let publisher = Arc::new(Gate::default());
    publisher.open.notify_one();
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .batch_size(100)
        .concurrency(4)
        .build()
        .unwrap();
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.claimed, ids.len());
}

/// A batch shares its room among its aggregates' followers evenly: with per-aggregate order it is
/// published in waves, one event per aggregate each, so its longest run of one aggregate is its
/// number of sequential calls. Three aggregates whose backlogs lie one after the other in `seq`:
/// before, the followers were taken in `seq` order and the first aggregate got all 27 of them (28
/// waves); shared out, 10 events each (10 waves).
#[tokio::test]
async fn a_batch_shares_its_room_evenly_among_its_aggregates() {
    let db = TestDb::new().await;
    let events: Vec<TestEvent> = ["a", "b", "c"]
        .iter()
        .flat_map(|a| (1..=100).map(move |n| TestEvent::new(format!("hot-{a}"), n)))
        .collect();
    let client = db.pool().get().await.unwrap();
    emit_all(&client, &events).await.unwrap();
    let publisher = Arc::new(outbox_tests::RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .batch_size(30)
        .concurrency(1)
        .build()
        .unwrap();
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.published, 30);
    let mut per_aggregate: HashMap<String, Vec<u64>> = HashMap::new();
    for e in publisher.published() {
        let n = e.payload_json::<serde_json::Value>().unwrap()["n"]
            .as_u64()
            .unwrap();
        per_aggregate
            .entry(e.aggregate_id.clone())
            .or_default()
            .push(n);
    }
    for (aggregate, ns) in &per_aggregate {
        assert_eq!(
            ns,
            &(1..=10).collect::<Vec<u64>>(),
            "{aggregate}: its first 10 events, in order ({per_aggregate:?})"
        );
    }
    assert_eq!(per_aggregate.len(), 3);
    assert_eq!(publisher.calls(), 10, "one call per wave: 10 waves");
}

/// A batch's followers stop at the first later event of their aggregate that waits for a retry or
/// is dead: the events behind it wait too, while the head and the followers before it go.
#[tokio::test]
async fn followers_stop_at_an_event_waiting_for_a_retry_or_dead() {
    let db = TestDb::new().await;
    let events: Vec<TestEvent> = ["waits", "dead"]
        .iter()
        .flat_map(|a| (1..=5).map(move |n| TestEvent::new(*a, n)))
        .collect();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(&client, &events).await.unwrap();
    // The third event of each aggregate: one waits a minute for its retry, one is dead.
    db.fail(&[ids[2]], "throttled", 60.0).await;
    db.dead_letter(&[ids[7]], "poison").await;
    let publisher = Arc::new(outbox_tests::RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .build()
        .unwrap();
    while relay.run_once().await.unwrap().claimed > 0 {}
    let published: Vec<uuid::Uuid> = publisher.ids();
    assert_eq!(
        published.iter().collect::<HashSet<_>>(),
        [ids[0], ids[1], ids[5], ids[6]]
            .iter()
            .collect::<HashSet<_>>(),
        "each aggregate's first two events, none behind the blocked third"
    );
}

/// Quiet aggregates whose events all lie beyond the head window, behind a hot backlog that fills
/// it, are claimed alongside the claim's share of hot heads: sharing the window's heads out must
/// not starve them (they used to wait until the hot backlog shrank into the window).
#[tokio::test]
async fn quiet_aggregates_behind_a_hot_backlog_are_not_starved() {
    let db = TestDb::new().await;
    // 4 hot aggregates × 300 events fill the 1 000-event window; then 20 quiet aggregates.
    backlog(&db, 4, 300).await;
    let quiet: Vec<TestEvent> = (0..20)
        .map(|a| TestEvent::new(format!("quiet-{a}"), 1))
        .collect();
    let client = db.pool().get().await.unwrap();
    emit_all(&client, &quiet).await.unwrap();
    let publisher = Arc::new(Gate::default());
    publisher.open.notify_one();
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .batch_size(100)
        .concurrency(4)
        .per_aggregate_order(true)
        .build()
        .unwrap();
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.claimed, 100);
    let batch = aggregates(&publisher.calls.lock().unwrap()[0]);
    let (hot, quiet): (Vec<&String>, Vec<&String>) =
        batch.iter().partition(|a| a.starts_with("hot-"));
    assert_eq!(
        quiet.len(),
        20,
        "every quiet aggregate is claimed in the first batch: {batch:?}"
    );
    assert_eq!(
        hot.len(),
        1,
        "one hot aggregate per claim of 4 workers: {hot:?}"
    );
}

/// An order-keeping broker (one FIFO group per aggregate) that refuses events at random, the first
/// time only; after a refusal it sends none of that aggregate's later events of the call. Records
/// what it accepted, in order.
struct RandomRefusals {
    rate: f64,
    refused: Mutex<HashSet<uuid::Uuid>>,
    accepted: Mutex<Vec<uuid::Uuid>>,
}

impl Publisher for RandomRefusals {
    type Error = std::io::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        // Long enough for batches of different workers to overlap.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let mut failed: HashSet<&str> = HashSet::new();
        let mut outcomes = Vec::with_capacity(events.len());
        let mut accepted = self.accepted.lock().unwrap();
        for e in events {
            let key = e.aggregate_id.as_str();
            if failed.contains(key) {
                outcomes.push(PublishOutcome::retry(FailureKind::NotSent, "held back"));
            } else if uuid::Uuid::new_v4().as_u128() % 1000 < (self.rate * 1000.0) as u128
                && self.refused.lock().unwrap().insert(e.id)
            {
                failed.insert(key);
                outcomes.push(PublishOutcome::retry(FailureKind::Throttled, "throttled"));
            } else {
                accepted.push(e.id);
                outcomes.push(PublishOutcome::Published);
            }
        }
        Ok(outcomes)
    }

    fn keeps_aggregate_order(&self) -> bool {
        true
    }
}

/// Two relays of 4 workers drain 10 hot aggregates (6 000 events) through a broker that refuses
/// 5 % of events part-way through an aggregate's run: everything is published, and within each
/// aggregate in `seq` order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hot_aggregates_keep_order_across_workers_and_relays_with_partial_failures() {
    let db = TestDb::new().await;
    let ids = backlog(&db, 10, 600).await;
    let publisher = Arc::new(RandomRefusals {
        rate: 0.05,
        refused: Mutex::default(),
        accepted: Mutex::default(),
    });
    let relays: Vec<RunningRelay> = (0..2)
        .map(|_| {
            let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
                .batch_size(100)
                .concurrency(4)
                .backoff(Duration::from_millis(1), Duration::from_millis(5))
                .poll_interval(Duration::from_millis(50))
                .build()
                .unwrap();
            RunningRelay::start(&relay)
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(120), async || db.pending().await == 0).await,
        "the relays did not drain the outbox"
    );
    for r in relays {
        r.stop().await;
    }
    let accepted = publisher.accepted.lock().unwrap().clone();
    let seqs = seqs(db.pool()).await;
    let distinct: HashSet<_> = accepted.iter().copied().collect();
    let lost = ids.iter().filter(|id| !distinct.contains(id)).count();
    let mut per_aggregate: HashMap<&str, usize> = HashMap::new();
    for id in &accepted {
        *per_aggregate.entry(seqs[id].0.as_str()).or_default() += 1;
    }
    assert_eq!(per_aggregate.len(), 10);
    assert!(
        !publisher.refused.lock().unwrap().is_empty(),
        "some events were refused"
    );
    assert_eq!(
        (
            lost,
            accepted.len() - distinct.len(),
            order_violations(&accepted, &seqs)
        ),
        (0, 0, 0),
        "lost, duplicates, order violations"
    );
}
