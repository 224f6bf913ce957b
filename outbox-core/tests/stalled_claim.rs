//! A claim's connection that stalls (a middlebox holding its bytes, the sockets open) is given up
//! once its server session has sat idle while the relay waited for an answer, long before the
//! claim's bound (the publish timeout and 5 s: 35 s with the defaults); a claim waiting for a lock
//! is left to wait.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_core::Relay;
use outbox_tests::{
    BlackHoleProxy, LogCapture, RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually,
};

/// What the relay says when it gives up on a claim's connection before the bound.
const GIVEN_UP: &str = "the claim's connection stopped answering";

/// Far below the claim's bound with the default publish timeout (35 s), above what the watch
/// needs (a look after 5 s, one more after a look that got no answer, a batch after the stall).
const WITHIN: Duration = Duration::from_secs(22);

/// A relay with the default publish timeout through `proxy`, on a pool of four connections.
fn relay_via(db: &TestDb, proxy: &BlackHoleProxy) -> Relay<Arc<RecordingPublisher>> {
    Relay::builder(
        db.pool_via(proxy.addr(), 4),
        Arc::new(RecordingPublisher::new()),
    )
    .poll_interval(Duration::from_millis(50))
    .concurrency(1)
    .build()
    .unwrap()
}

/// The relay's pool connection goes silent while idle, after the relay has claimed on it (a
/// 100 ms outage; new connections pass after it): the next claim, which never reaches the server,
/// is given up in seconds, and the event it was for is published. Before, the claim waited for its
/// bound, 35 s (black-box run: a 3 s outage stopped publishing for ~35 s).
#[tokio::test]
async fn a_claim_on_a_silent_connection_is_given_up_long_before_its_bound() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    // Polling every 4 s: the outage comes while the worker sleeps, no statement in flight (one
    // whose answer it cut would rightly be left to the bound).
    let relay = Relay::builder(
        db.pool_via(proxy.addr(), 4),
        Arc::new(RecordingPublisher::new()),
    )
    .poll_interval(Duration::from_secs(4))
    .concurrency(1)
    .build()
    .unwrap();
    // Claimed at the start (the connection's session learned), and the next claim finds nothing:
    // the worker sleeps.
    let warm = outbox_core::emit(&db.pool().get().await.unwrap(), &TestEvent::new("a", 1))
        .await
        .unwrap();
    let running = RunningRelay::start(&relay);
    assert!(eventually(Duration::from_secs(3), async || db.processed(&[warm]).await).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.black_hole();
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.heal();
    let started = Instant::now();
    let id = outbox_core::emit(&db.pool().get().await.unwrap(), &TestEvent::new("a", 2))
        .await
        .unwrap();
    let published = eventually(WITHIN, async || db.processed(&[id]).await).await;
    let took = started.elapsed();
    running.stop().await;
    let text = logs.text();
    assert!(published, "not published within {WITHIN:?}: {text}");
    assert!(text.contains(GIVEN_UP), "{text}");
    assert!(took < WITHIN, "published after {took:?}");
}

/// The acknowledgement (the mark and `COMMIT`, one round trip) is held by a middlebox (its session
/// sits idle in the claim's transaction, holding the claimed row): given up in seconds, the
/// session ended, and the event claimed again and marked. Before, the relay waited for the bound,
/// 35 s.
#[tokio::test]
async fn an_acknowledgement_that_never_arrives_is_given_up_long_before_the_bound() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    // The simple-query message `COMMIT` (not the `READ COMMITTED` of a claim's `BEGIN`).
    proxy.catch_first_sending(b"\x00\x00\x00\x0bCOMMIT\x00");
    let relay = relay_via(&db, &proxy);
    let id = outbox_core::emit(&db.pool().get().await.unwrap(), &TestEvent::new("a", 1))
        .await
        .unwrap();
    let started = Instant::now();
    let running = RunningRelay::start(&relay);
    let marked = eventually(WITHIN, async || db.processed(&[id]).await).await;
    let took = started.elapsed();
    running.stop().await;
    let text = logs.text();
    assert!(marked, "not marked within {WITHIN:?}: {text}");
    assert!(text.contains(GIVEN_UP), "{text}");
    assert!(took < WITHIN, "marked after {took:?}");
}

/// The claim's answer leaves the server but takes 12 s to arrive (a large claim over a slow link):
/// its session waits in the claim's transaction meanwhile, as it would had the answer been lost,
/// but it got the request, so the claim is left to its bound and publishes once the answer
/// arrives. Before (review), the claim was given up after 10 s, and with it every claim of such
/// a link.
#[tokio::test]
async fn a_claim_whose_answer_is_on_its_way_is_left_to_arrive() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    proxy.hold_answer_to(
        b"BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL statement_timeout",
        Duration::from_secs(12),
    );
    let id = outbox_core::emit(&db.pool().get().await.unwrap(), &TestEvent::new("a", 1))
        .await
        .unwrap();
    let relay = relay_via(&db, &proxy);
    let started = Instant::now();
    let running = RunningRelay::start(&relay);
    let published = eventually(WITHIN, async || db.processed(&[id]).await).await;
    let took = started.elapsed();
    running.stop().await;
    let text = logs.text();
    assert!(published, "{text}");
    assert!(
        took >= Duration::from_secs(11),
        "the answer was held: {took:?}"
    );
    assert!(text.contains(LOOKED), "{text}");
    assert!(
        !text.contains(GIVEN_UP),
        "a claim on its way was given up: {text}"
    );
}

/// What the relay says (debug) when it looks at a claim's session.
const LOOKED: &str = "looked at the server session of the claim's connection";

/// The claim waits 12 s for a lock (another transaction holds the table): its connection is busy,
/// not stalled, and the claim goes on once the lock is released, looked at meanwhile without being
/// given up.
#[tokio::test]
async fn a_claim_waiting_for_a_lock_is_left_to_wait() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let id = outbox_core::emit(&db.pool().get().await.unwrap(), &TestEvent::new("a", 1))
        .await
        .unwrap();
    let mut holder = db.connect().await;
    let lock = holder.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE outbox_events IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let relay = relay_via(&db, &proxy);
    let running = RunningRelay::start(&relay);
    let waiting = eventually(Duration::from_secs(10), async || {
        db.lock_waiters("SELECT id, seq, aggregate_type, %").await >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    lock.rollback().await.unwrap();
    let published = eventually(Duration::from_secs(10), async || db.processed(&[id]).await).await;
    running.stop().await;
    let text = logs.text();
    assert!(waiting, "the claim waited for the lock: {text}");
    assert!(published, "{text}");
    assert!(text.contains(LOOKED), "{text}");
    assert!(
        !text.contains(GIVEN_UP),
        "a claim waiting for a lock was given up: {text}"
    );
}

/// A large acknowledgement (100 dead letters with 2 000-character reasons, ~200 kB) over a slow
/// uplink (20 kB/s): the server reads it for ~10 s, waiting in the claim's transaction meanwhile
/// as it would had it never come, and the acknowledgement is left to arrive. Before (review), it
/// was cut every time after 5–10 s: the dead letters were never recorded, and the batch was
/// claimed again and again.
#[tokio::test]
async fn a_large_acknowledgement_over_a_slow_uplink_is_left_to_arrive() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    let proxy = outbox_tests::DelayProxy::slow_upload(db.server_addr(), 20 * 1024).await;
    let client = db.pool().get().await.unwrap();
    let events: Vec<_> = (0..100).map(|n| TestEvent::new("a", n)).collect();
    let ids = outbox_core::emit_all(&client, &events).await.unwrap();
    let reason = "refused: ".repeat(250);
    let publisher = outbox_tests::FlakyPublisher::new(move |_| {
        Some(outbox_core::PublishOutcome::Permanent(
            outbox_core::PublishFailure::new(outbox_core::FailureKind::InvalidContent, &reason),
        ))
    });
    let relay = Relay::builder(db.pool_via(proxy.addr(), 6), Arc::new(publisher))
        .poll_interval(Duration::from_millis(200))
        .per_aggregate_order(false)
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let recorded = eventually(Duration::from_secs(30), async || {
        client
            .query_one(
                "SELECT count(*) FROM outbox_events WHERE id = ANY($1) \
                 AND dead_lettered_at IS NOT NULL",
                &[&ids],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 100
    })
    .await;
    running.stop().await;
    let text = logs.text();
    assert!(recorded, "the dead letters were not recorded: {text}");
    assert!(
        !text.contains(GIVEN_UP),
        "an acknowledgement on its way was cut: {text}"
    );
}
