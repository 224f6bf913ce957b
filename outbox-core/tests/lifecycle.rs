//! The relay's life: NOTIFY wake-ups and LISTEN recovery, graceful shutdown, publish time-outs,
//! unavailable destinations, and the builder's validation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use outbox_core::{FailureKind, PublishOutcome, Relay, emit, emit_all};
use outbox_tests::{
    FlakyPublisher, RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually,
};
use uuid::Uuid;

#[tokio::test]
async fn notify_wakes_an_idle_relay_and_listening_resumes_after_the_connection_is_killed() {
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .listen(db.config().clone())
        .poll_interval(Duration::from_secs(60))
        .concurrency(1)
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    // Let the relay go idle on its (long) poll.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let client = db.pool().get().await.unwrap();
    let start = Instant::now();
    emit(&client, &TestEvent::new("o-1", 1)).await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), async || publisher.ids().len() == 1).await,
        "a notification wakes the relay long before its 60 s poll"
    );
    let woke_after = start.elapsed();

    // Kill the LISTEN connection; the relay reconnects and listens again.
    let admin = db.connect().await;
    let killed = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND datname = current_database()",
            &[&outbox_core::LISTENER_APPLICATION_NAME],
        )
        .await
        .unwrap();
    assert_eq!(
        killed.len(),
        1,
        "the relay's LISTEN connection was found and killed"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    emit(&client, &TestEvent::new("o-2", 1)).await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), async || publisher.ids().len() == 2).await,
        "after reconnecting, notifications wake the relay again"
    );
    running.stop().await;
    eprintln!("woke {woke_after:?} after commit");
}

#[tokio::test]
async fn shutdown_finishes_the_batch_in_flight_within_the_grace_period() {
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::with_delay(Duration::from_millis(800)));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .concurrency(1)
        .poll_interval(Duration::from_millis(50))
        .shutdown_grace(Duration::from_secs(5))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..5)
        .map(|n| TestEvent::new(format!("o-{n}"), n))
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();
    let running = RunningRelay::start(&relay);
    assert!(eventually(Duration::from_secs(5), async || publisher.calls() == 1).await);
    running.stop().await;
    assert_eq!(publisher.ids(), ids, "the batch in flight was published");
    assert_eq!(
        db.pending().await,
        0,
        "and marked before the relay returned"
    );
}

/// At shutdown a batch starts no further wave: what it published is marked at once. Before, a hot
/// aggregate's batch (one wave per event) went on publishing until the grace period ended, was
/// dropped mid-wave and rolled back, and the events it had published were sent again by the next
/// relay.
#[tokio::test]
async fn shutdown_starts_no_new_wave_and_marks_what_was_published() {
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::with_delay(Duration::from_millis(300)));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .concurrency(1)
        .batch_size(10)
        .poll_interval(Duration::from_millis(50))
        .shutdown_grace(Duration::from_millis(800))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    // One aggregate: ten waves of one event in one batch.
    let events: Vec<TestEvent> = (0..10).map(|n| TestEvent::new("hot", n)).collect();
    emit_all(&client, &events).await.unwrap();
    let running = RunningRelay::start(&relay);
    assert!(eventually(Duration::from_secs(5), async || publisher.calls() == 1).await);
    let stopping = Instant::now();
    running.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_millis(700),
        "returned after the wave in flight, not at the end of the grace period: {:?}",
        stopping.elapsed()
    );
    let published = publisher.ids().len();
    assert!(published >= 1, "the wave in flight finished");
    assert_eq!(
        db.pending().await,
        10 - published as i64,
        "everything published was marked: nothing will be sent again"
    );
}

/// Publishes its first call at once and takes 10 s over every later one.
#[derive(Default)]
struct SlowAfterFirst {
    calls: std::sync::atomic::AtomicUsize,
}

impl outbox_core::Publisher for SlowAfterFirst {
    type Error = std::io::Error;

    async fn publish(
        &self,
        events: &[outbox_core::ClaimedEvent],
    ) -> Result<Vec<outbox_core::PublishOutcome>, Self::Error> {
        if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        Ok(vec![outbox_core::PublishOutcome::Published; events.len()])
    }
}

/// At shutdown, a publish call that would outlast the grace period is cut short at three quarters
/// of it, so that what the batch's earlier waves published is marked in time. Before, the call
/// ran on until the grace period ended and the whole batch was rolled back: the first event,
/// published, was left pending and sent again by the next relay.
#[tokio::test]
async fn shutdown_cuts_a_slow_publish_short_and_marks_the_earlier_waves() {
    let db = TestDb::new().await;
    let publisher = Arc::new(SlowAfterFirst::default());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .concurrency(1)
        .poll_interval(Duration::from_millis(50))
        .shutdown_grace(Duration::from_secs(1))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    // One aggregate: two waves of one event in one batch.
    let ids = emit_all(
        &client,
        &[TestEvent::new("hot", 1), TestEvent::new("hot", 2)],
    )
    .await
    .unwrap();
    let running = RunningRelay::start(&relay);
    assert!(
        eventually(Duration::from_secs(5), async || {
            publisher.calls.load(std::sync::atomic::Ordering::SeqCst) == 2
        })
        .await
    );
    running.stop().await;
    assert!(
        db.event(ids[0]).await.processed_at.is_some(),
        "the first wave's event is marked"
    );
    let second = db.event(ids[1]).await;
    assert!(second.processed_at.is_none());
    assert_eq!(second.attempts, 0, "released without an attempt");
}

/// Publishes its first call, fails the second as a whole, and takes 10 s over every later one.
#[derive(Default)]
struct FailsThenSlow {
    calls: std::sync::atomic::AtomicUsize,
}

impl outbox_core::Publisher for FailsThenSlow {
    type Error = std::io::Error;

    async fn publish(
        &self,
        events: &[outbox_core::ClaimedEvent],
    ) -> Result<Vec<outbox_core::PublishOutcome>, Self::Error> {
        match self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => {}
            1 => return Err(std::io::Error::other("injected whole failure")),
            _ => tokio::time::sleep(Duration::from_secs(10)).await,
        }
        Ok(vec![outbox_core::PublishOutcome::Published; events.len()])
    }
}

/// The same when the slow calls are the halves a whole failure is published again in: they are
/// cut short too. They ran on until the grace period ended and the batch, first wave included,
/// was rolled back.
#[tokio::test]
async fn shutdown_cuts_the_halving_of_a_failed_wave_short_too() {
    let db = TestDb::new().await;
    let publisher = Arc::new(FailsThenSlow::default());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .concurrency(1)
        .poll_interval(Duration::from_millis(50))
        .shutdown_grace(Duration::from_secs(1))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    // Two aggregates of two events: two waves of two events in one batch.
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("a", 1),
            TestEvent::new("b", 1),
            TestEvent::new("a", 2),
            TestEvent::new("b", 2),
        ],
    )
    .await
    .unwrap();
    let running = RunningRelay::start(&relay);
    assert!(
        eventually(Duration::from_secs(5), async || {
            publisher.calls.load(std::sync::atomic::Ordering::SeqCst) == 3
        })
        .await,
        "the halving of the failed second wave began"
    );
    running.stop().await;
    for id in &ids[..2] {
        assert!(
            db.event(*id).await.processed_at.is_some(),
            "the first wave's events are marked"
        );
    }
    for id in &ids[2..] {
        let e = db.event(*id).await;
        assert!(e.processed_at.is_none());
        assert_eq!(e.attempts, 0, "released without an attempt");
    }
}

#[tokio::test]
async fn shutdown_past_the_grace_period_releases_the_batch_and_marks_nothing() {
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::with_delay(Duration::from_secs(3)));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .concurrency(1)
        .poll_interval(Duration::from_millis(50))
        .shutdown_grace(Duration::from_millis(200))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..5)
        .map(|n| TestEvent::new(format!("o-{n}"), n))
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();
    let running = RunningRelay::start(&relay);
    assert!(eventually(Duration::from_secs(5), async || publisher.calls() == 1).await);
    let stopping = Instant::now();
    running.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(2),
        "returned after the grace period"
    );
    assert!(publisher.ids().is_empty(), "the publish was cut short");
    assert_eq!(
        db.pending().await,
        5,
        "nothing marked that was not published"
    );

    // The claims were released: a new relay publishes everything.
    let fresh = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&fresh))
        .build()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), async || {
            relay.run_once().await.map(|r| r.published).unwrap_or(0) > 0
        })
        .await
    );
    assert_eq!(fresh.ids(), ids);
}

#[tokio::test]
async fn a_publish_call_over_the_timeout_releases_the_events_without_counting_an_attempt() {
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::with_delay(Duration::from_secs(2)));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .publish_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let id = emit(&client, &TestEvent::new("o-1", 1)).await.unwrap();
    let started = Instant::now();
    let e = relay.run_once().await.unwrap_err();
    assert_eq!(e.kind(), outbox_core::ErrorKind::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the claim was not held past the timeout"
    );
    let r = db.event(id).await;
    assert_eq!((r.attempts, r.processed_at), (0, None));
}

#[tokio::test]
async fn an_unavailable_destination_puts_its_events_back_without_an_attempt_and_blocks_nothing_else()
 {
    let db = TestDb::new().await;
    let broken = Arc::new(AtomicBool::new(true));
    let publisher = Arc::new(FlakyPublisher::new({
        let broken = Arc::clone(&broken);
        move |e| {
            (outbox_tests::note(e).as_deref() == Some("broken-queue")
                && broken.load(Ordering::SeqCst))
            .then(|| PublishOutcome::unavailable(FailureKind::Other, "QueueDoesNotExist"))
        }
    }));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .max_attempts(1)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let stuck = emit(&client, &TestEvent::new("a", 1).note("broken-queue"))
        .await
        .unwrap();
    let behind = emit(&client, &TestEvent::new("a", 2)).await.unwrap();
    let other = emit(&client, &TestEvent::new("b", 1)).await.unwrap();

    let report = relay.run_once().await.unwrap();
    assert_eq!((report.published, report.deferred), (1, 1), "{report:?}");
    assert!(db.event(other).await.processed_at.is_some());
    let r = db.event(stuck).await;
    // max_attempts(1): a counted failure would have dead-lettered it.
    assert_eq!((r.attempts, r.dead_lettered_at), (0, None));
    assert!(r.retry_after.is_some() && r.last_error.as_deref() == Some("QueueDoesNotExist"));
    assert!(db.event(behind).await.processed_at.is_none(), "order kept");

    // The destination comes back: once the short delay is over, both are published in order.
    broken.store(false, Ordering::SeqCst);
    client
        .execute(
            "UPDATE outbox_events SET retry_after = now() WHERE id = $1",
            &[&stuck],
        )
        .await
        .unwrap();
    relay.run_once().await.unwrap();
    let order: Vec<Uuid> = publisher.published().iter().map(|e| e.id).collect();
    assert_eq!(order, vec![other, stuck, behind]);
    // Published: the outage's reason is gone (it said why the event was not published yet).
    let r = db.event(stuck).await;
    assert_eq!((r.attempts, r.last_error), (0, None));
    assert!(r.processed_at.is_some());
}

/// A gauge refresh stuck behind a lock does not hold shutdown up: an idle relay stops at once, not
/// at the end of its grace period (before, the refresh was awaited to its end or the grace).
#[tokio::test]
async fn shutdown_does_not_wait_for_a_stuck_gauge_refresh() {
    let db = TestDb::new().await;
    let config = outbox_core::RelayConfig {
        metrics_interval: Duration::from_millis(100),
        poll_interval: Duration::from_secs(60),
        shutdown_grace: Duration::from_secs(5),
        ..Default::default()
    };
    let relay = Relay::builder(db.pool().clone(), RecordingPublisher::new())
        .config(config)
        .metrics(outbox_core::RelayMetrics::new())
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    tokio::time::sleep(Duration::from_millis(300)).await; // idle, refreshing
    let mut locker = db.connect().await;
    let tx = locker.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE outbox_events IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await; // a refresh waits for the lock
    let stopping = Instant::now();
    running.stop().await;
    let took = stopping.elapsed();
    tx.rollback().await.unwrap();
    assert!(took < Duration::from_secs(1), "stopped in {took:?}");
}

#[test]
fn builder_validates_settings() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = TestDb::new().await;
        let e = Relay::builder(db.pool().clone(), RecordingPublisher::new())
            .batch_size(0)
            .build()
            .err()
            .unwrap();
        assert_eq!(e.kind(), outbox_core::ErrorKind::Config);
        assert!(e.to_string().contains("batch_size"));
    });
}
