//! Trains (issue 18, goal 4): with per-aggregate order and a publisher that does not keep an
//! aggregate's order within a call (a standard SQS queue), the waves that the relay's concurrent
//! batches have ready at the same time share one publish call. A call still never holds two events
//! of one aggregate, order holds with events failing part-way, and a panic or an outage in a
//! shared call is charged to the events that cause it, not to the other batches' events.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome, Publisher, Relay, emit_all};
use outbox_tests::interleaved::{order_violations, seqs};
use outbox_tests::{RunningRelay, TestDb, TestEvent, eventually};
use uuid::Uuid;

/// `per_aggregate` events for each of `aggregates` aggregates, interleaved (round-robin) in `seq`.
async fn backlog(db: &TestDb, aggregates: usize, per_aggregate: u64) -> Vec<Uuid> {
    let events: Vec<TestEvent> = (1..=per_aggregate)
        .flat_map(|n| (0..aggregates).map(move |a| TestEvent::new(format!("hot-{a}"), n)))
        .collect();
    let client = db.pool().get().await.unwrap();
    emit_all(&client, &events).await.unwrap()
}

/// A standard queue: no order within a call. Takes a few milliseconds per call (so that batches
/// overlap), refuses events at random the first time (`rate`), panics on any call holding
/// `poison`, fails every call holding `outage` as a whole. Records each call and what it accepted.
#[derive(Default)]
struct Broker {
    rate: f64,
    poison: Option<Uuid>,
    outage: Option<Uuid>,
    refused: Mutex<HashSet<Uuid>>,
    calls: Mutex<Vec<Vec<ClaimedEvent>>>,
    accepted: Mutex<Vec<Uuid>>,
}

impl Publisher for Broker {
    type Error = std::io::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        self.calls.lock().unwrap().push(events.to_vec());
        tokio::time::sleep(Duration::from_millis(3)).await;
        if events.iter().any(|e| Some(e.id) == self.poison) {
            panic!("injected panic");
        }
        if events.iter().any(|e| Some(e.id) == self.outage) {
            return Err(std::io::Error::other("injected outage"));
        }
        let mut accepted = self.accepted.lock().unwrap();
        let outcomes = events
            .iter()
            .map(|e| {
                if Uuid::new_v4().as_u128() % 1000 < (self.rate * 1000.0) as u128
                    && self.refused.lock().unwrap().insert(e.id)
                {
                    PublishOutcome::retry(FailureKind::Throttled, "throttled")
                } else {
                    accepted.push(e.id);
                    PublishOutcome::Published
                }
            })
            .collect();
        Ok(outcomes)
    }
}

fn relay(db: &TestDb, broker: &Arc<Broker>) -> Relay<Arc<Broker>> {
    Relay::builder(db.pool().clone(), Arc::clone(broker))
        .batch_size(100)
        .concurrency(4)
        .max_attempts(2)
        .backoff(Duration::from_millis(1), Duration::from_millis(5))
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap()
}

async fn drain(db: &TestDb, relay: &Relay<Arc<Broker>>) {
    let running = RunningRelay::start(relay);
    assert!(
        eventually(Duration::from_secs(120), async || db.pending().await == 0).await,
        "the relay did not drain the outbox"
    );
    running.stop().await;
}

/// 10 hot aggregates, 4 workers: a claim takes at most 3 of them, so a batch's waves hold at most 3
/// events; calls hold more (waves of several batches), never two events of one aggregate, and
/// everything is accepted once, in order, with 5 % of the events refused part-way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_batches_share_calls_and_keep_order() {
    let db = TestDb::new().await;
    let ids = backlog(&db, 10, 60).await;
    let broker = Arc::new(Broker {
        rate: 0.05,
        ..Broker::default()
    });
    drain(&db, &relay(&db, &broker)).await;

    let calls = broker.calls.lock().unwrap().clone();
    for call in &calls {
        let aggregates: HashSet<&str> = call.iter().map(|e| e.aggregate_id.as_str()).collect();
        assert_eq!(
            aggregates.len(),
            call.len(),
            "a call held two events of one aggregate"
        );
    }
    let widest = calls.iter().map(Vec::len).max().unwrap_or(0);
    assert!(
        widest > 3,
        "no call held the waves of more than one batch (widest {widest} events)"
    );
    let accepted = broker.accepted.lock().unwrap().clone();
    let distinct: HashSet<Uuid> = accepted.iter().copied().collect();
    let lost = ids.iter().filter(|id| !distinct.contains(id)).count();
    assert!(!broker.refused.lock().unwrap().is_empty(), "some refusals");
    assert_eq!(
        (
            lost,
            accepted.len() - distinct.len(),
            order_violations(&accepted, &seqs(db.pool()).await)
        ),
        (0, 0, 0),
        "lost, duplicates, order violations"
    );
}

/// `(attempts, dead-lettered)` of every event.
async fn attempts(db: &TestDb) -> HashMap<Uuid, (i32, bool)> {
    let client = db.pool().get().await.unwrap();
    client
        .query(
            "SELECT id, attempts, dead_lettered_at IS NOT NULL FROM outbox_events",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect()
}

/// A call holding one poison event panics: only that event counts attempts (and is dead-lettered
/// when they are used up, as are the later events of its aggregate, which wait behind it); the
/// other batches' events that shared its calls are published without an attempt counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panic_in_a_shared_call_is_charged_to_its_event_only() {
    let db = TestDb::new().await;
    let ids = backlog(&db, 10, 60).await;
    // The 5th event of hot-3.
    let poison = ids[4 * 10 + 3];
    let broker = Arc::new(Broker {
        poison: Some(poison),
        ..Broker::default()
    });
    let relay = relay(&db, &broker);
    let running = RunningRelay::start(&relay);
    assert!(
        eventually(Duration::from_secs(60), async || {
            attempts(&db).await.get(&poison).is_some_and(|a| a.1)
        })
        .await,
        "the poison event is dead-lettered"
    );
    running.stop().await;

    let shared = broker
        .calls
        .lock()
        .unwrap()
        .iter()
        .any(|c| c.len() > 3 && c.iter().any(|e| e.id == poison));
    assert!(shared, "the poison event rode with other batches' events");
    let charged: Vec<Uuid> = attempts(&db)
        .await
        .into_iter()
        .filter(|(id, (n, _))| *n > 0 && *id != poison)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(charged, Vec::<Uuid>::new(), "events charged for the panic");
    let accepted: HashSet<Uuid> = broker.accepted.lock().unwrap().iter().copied().collect();
    let hot3: HashSet<Uuid> = (0..60).map(|n| ids[n * 10 + 3]).collect();
    let missing = ids
        .iter()
        .filter(|id| !accepted.contains(id) && !hot3.contains(id))
        .count();
    assert_eq!(missing, 0, "events of other aggregates not published");
}

/// A call failing as a whole (an outage) releases every wave that rode it, without an attempt
/// counted, and they are published once it passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_outage_in_a_shared_call_costs_no_attempt() {
    let db = TestDb::new().await;
    let ids = backlog(&db, 10, 60).await;
    let broker = Arc::new(Broker {
        outage: Some(ids[2 * 10 + 5]),
        ..Broker::default()
    });
    let running = RunningRelay::start(&relay(&db, &broker));
    // The outage lasts until the event it keys on is let through (below), about a second.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let blocked = db.pending().await;
    assert!(blocked > 0, "the outage held events back");
    let shared = broker
        .calls
        .lock()
        .unwrap()
        .iter()
        .any(|c| c.len() > 3 && c.iter().any(|e| e.id == ids[2 * 10 + 5]));
    running.stop().await;
    assert!(shared, "the failing call held other batches' events");
    let charged = attempts(&db).await.values().filter(|a| a.0 > 0).count();
    assert_eq!(charged, 0, "an outage counts no attempt");

    let healed = Arc::new(Broker::default());
    drain(&db, &relay(&db, &healed)).await;
    let accepted: HashSet<Uuid> = [&broker, &healed]
        .iter()
        .flat_map(|b| b.accepted.lock().unwrap().clone())
        .collect();
    assert_eq!(
        accepted.len(),
        ids.len(),
        "every event published in the end"
    );
}
