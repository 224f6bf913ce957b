//! Every wait of the relay is bounded: backoff counted from the failure, a black-holed connection
//! released within the bound, publish deadlines, and the claim's byte budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use outbox_core::{
    CLAIM_IDLE_MARGIN, ClaimedEvent, ErrorKind, FailureKind, PublishOutcome, Publisher, Relay,
    emit, emit_all,
};
use outbox_tests::{BlackHoleProxy, RecordingPublisher, TestDb, TestEvent, eventually};
use uuid::Uuid;

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

/// Takes `delay` per call and fails every event with a retry.
struct SlowFailing(Duration);

impl Publisher for SlowFailing {
    type Error = std::io::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        tokio::time::sleep(self.0).await;
        Ok(vec![
            PublishOutcome::retry(
                FailureKind::Other,
                "slow and failing"
            );
            events.len()
        ])
    }
}

#[tokio::test]
async fn backoff_and_processed_at_count_from_when_it_happened_not_from_the_claim() {
    let db = TestDb::new().await;
    let slow = Duration::from_millis(1_500);
    let relay = Relay::builder(db.pool().clone(), SlowFailing(slow))
        .backoff(Duration::from_secs(2), Duration::from_secs(2))
        .backoff_jitter(0.0)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let id = emit(&client, &TestEvent::new("a", 1)).await.unwrap();
    relay.run_once().await.unwrap();
    // retry_after = (failure time) + 2 s: about 2 s from now, not 2 s from the claim (0.5 s).
    let left: f64 = client
        .query_one(
            "SELECT EXTRACT(EPOCH FROM retry_after - clock_timestamp())::float8 \
               FROM outbox_events WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        left > 1.5,
        "retry_after is {left} s away; the backoff is 2 s"
    );

    let publisher = Arc::new(RecordingPublisher::with_delay(slow));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .build()
        .unwrap();
    let id = emit(&client, &TestEvent::new("b", 1)).await.unwrap();
    relay.run_once().await.unwrap();
    let lag: f64 = client
        .query_one(
            "SELECT EXTRACT(EPOCH FROM processed_at - created_at)::float8 \
               FROM outbox_events WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        lag >= 1.4,
        "processed_at is {lag} s after created_at; publishing took 1.5 s"
    );
}

/// Counts calls and sleeps in each, so a test can act while a batch is in flight.
struct Stalling {
    calls: AtomicUsize,
    delay: Duration,
}

impl Publisher for Stalling {
    type Error = std::io::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        Ok(vec![PublishOutcome::Published; events.len()])
    }
}

#[tokio::test]
async fn a_relay_black_holed_mid_batch_releases_its_rows_within_the_bound() {
    let db = TestDb::new().await;
    let upstream = db
        .url()
        .split('@')
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("127.0.0.1:5432")
        .to_owned();
    let proxy = BlackHoleProxy::start(upstream.parse().unwrap()).await;
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(proxy.addr().port())
        .user(db.config().get_user().unwrap_or("postgres"))
        .application_name("relay-a")
        .dbname(db.name());
    let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
    let pool = deadpool_postgres::Pool::builder(manager)
        .max_size(2)
        .build()
        .unwrap();
    let publish_timeout = Duration::from_secs(2);
    let stalling = Arc::new(Stalling {
        calls: AtomicUsize::new(0),
        delay: Duration::from_millis(1_500),
    });
    let partitioned = Relay::builder(pool, Arc::clone(&stalling))
        .publish_timeout(publish_timeout)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..10)
        .map(|i| TestEvent::new(format!("o-{i}"), i))
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();

    let stuck = tokio::spawn(async move { partitioned.run_once().await });
    assert!(
        eventually(Duration::from_secs(5), async || stalling
            .calls
            .load(Ordering::SeqCst)
            > 0)
        .await
    );
    // The batch is claimed and being published: cut the relay off from the database.
    proxy.black_hole();
    let cut = Instant::now();
    assert_eq!(
        db.pending().await,
        10,
        "the cut came before the batch committed"
    );

    let healthy = Arc::new(RecordingPublisher::new());
    let other = Relay::builder(db.pool().clone(), Arc::clone(&healthy))
        .build()
        .unwrap();
    let bound = publish_timeout + CLAIM_IDLE_MARGIN + Duration::from_secs(3);
    while healthy.ids().len() < ids.len() && cut.elapsed() < bound + Duration::from_secs(10) {
        other.run_once().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = cut.elapsed();
    if healthy.ids().len() < ids.len() {
        for row in client
            .query(
                "SELECT pid, state, backend_type, coalesce(query, ''), \
                        (now() - state_change)::text || ' xact ' || coalesce((now() - xact_start)::text, '-') || ' backend ' || (now() - backend_start)::text, coalesce(wait_event, '') || ' ' || application_name \
                   FROM pg_stat_activity WHERE datname = current_database()",
                &[],
            )
            .await
            .unwrap()
        {
            let (pid, state, kind, query, since, app): (i32, Option<String>, String, String, Option<String>, String) =
                (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4), row.get(5));
            println!("session {pid} {kind} {app} {state:?} since {since:?}: {query}");
        }
    }
    println!(
        "black-holed relay: its {} events published by another relay {:.1} s after the cut \
         (bound {:.1} s)",
        ids.len(),
        took.as_secs_f64(),
        bound.as_secs_f64()
    );
    assert_eq!(
        healthy.ids().len(),
        ids.len(),
        "the other relay gets every event"
    );
    assert!(took <= bound, "took {took:?}, bound {bound:?}");
    // The partitioned relay does not hang either: its wait on the database is bounded too.
    let stuck = tokio::time::timeout(Duration::from_secs(10), stuck)
        .await
        .expect("the partitioned relay's batch ends")
        .unwrap();
    let e = stuck.expect_err("its batch could not be acknowledged");
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
}

/// Publishes the first `accepted` events of each call, then waits out the deadline and reports
/// the rest as not sent in time, as a deadline-aware broker client does.
struct OutOfTime {
    accepted: usize,
    published: std::sync::Mutex<Vec<Uuid>>,
}

impl Publisher for OutOfTime {
    type Error = std::io::Error;

    async fn publish(&self, _: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        unreachable!("the relay calls publish_within")
    }

    async fn publish_within(
        &self,
        events: &[ClaimedEvent],
        deadline: tokio::time::Instant,
    ) -> Result<Vec<PublishOutcome>, Self::Error> {
        let n = self.accepted.min(events.len());
        self.published
            .lock()
            .unwrap()
            .extend(events[..n].iter().map(|e| e.id));
        tokio::time::sleep_until(deadline).await;
        let mut outcomes = vec![PublishOutcome::Published; n];
        outcomes.resize(
            events.len(),
            PublishOutcome::unavailable(FailureKind::Other, "not sent before the deadline"),
        );
        Ok(outcomes)
    }

    fn min_publish_timeout(&self, events: usize) -> Duration {
        Duration::from_millis(100) * u32::try_from(events).unwrap_or(u32::MAX)
    }
}

#[tokio::test]
async fn a_wave_out_of_time_keeps_what_the_broker_accepted() {
    let db = TestDb::new().await;
    let publisher = Arc::new(OutOfTime {
        accepted: 3,
        published: Default::default(),
    });
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .publish_timeout(Duration::from_millis(800))
        .batch_size(20)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    // Wave 1: the first event of 8 aggregates; wave 2: their second events.
    let events: Vec<TestEvent> = (0..16)
        .map(|i| TestEvent::new(format!("o-{}", i % 8), i))
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();
    let started = Instant::now();
    let report = relay
        .run_once()
        .await
        .expect("running out of time is not an error");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(report.published, 3);
    assert_eq!(report.deferred, 5);
    assert_eq!(
        report.released, 8,
        "the second wave waits for the next claim"
    );
    let accepted = publisher.published.lock().unwrap().clone();
    assert_eq!(accepted.len(), 3);
    for id in &ids {
        let (processed, _, _) = state(&db, *id).await;
        assert_eq!(processed, accepted.contains(id), "{id}");
        let attempts: i32 = client
            .query_one("SELECT attempts FROM outbox_events WHERE id = $1", &[id])
            .await
            .unwrap()
            .get(0);
        assert_eq!(attempts, 0, "running out of time counts no attempt");
    }
}

#[tokio::test]
async fn build_refuses_a_publish_timeout_the_publisher_cannot_work_with() {
    let db = TestDb::new().await;
    let publisher = OutOfTime {
        accepted: 0,
        published: Default::default(),
    };
    let e = Relay::builder(db.pool().clone(), publisher)
        .publish_timeout(Duration::from_millis(100))
        .build()
        .err()
        .expect("100 ms is not above one call's 100 ms");
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(e.to_string().contains("publish_timeout"), "{e}");
}

#[tokio::test]
async fn a_claim_stops_at_its_byte_budget_but_always_takes_one_event() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..5)
        .map(|i| TestEvent::new(format!("o-{i}"), i).note("x".repeat(1_000)))
        .collect();
    emit_all(&client, &events).await.unwrap();
    let publisher = Arc::new(RecordingPublisher::new());
    // Each payload is a little over 1 000 bytes: 2 500 bytes hold the first three (the third
    // starts below the budget).
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .batch_max_bytes(2_500)
        .build()
        .unwrap();
    assert_eq!(relay.run_once().await.unwrap().claimed, 3);
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .batch_max_bytes(1)
        .per_aggregate_order(false)
        .build()
        .unwrap();
    assert_eq!(
        relay.run_once().await.unwrap().claimed,
        1,
        "one event, however large"
    );
    assert_eq!(relay.run_once().await.unwrap().claimed, 1);
    assert_eq!(relay.run_once().await.unwrap().claimed, 0);
    assert_eq!(publisher.ids().len(), 5);
}
