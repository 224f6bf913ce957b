//! Housekeeping's connection watched through its rounds: one that stalls (a middlebox holding its
//! bytes, the sockets open) is given up and its server session ended, so retention goes on; one
//! whose statement rightly takes long (waiting for a lock) is left to finish.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::Relay;
use outbox_tests::{
    BlackHoleProxy, LogCapture, RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually,
};

/// The relay's warning when it gives a round up.
const GIVEN_UP: &str = "housekeeping connection stopped answering";

/// Three events published an hour ago: past a retention of a minute.
async fn published_an_hour_ago(db: &TestDb) {
    let client = db.connect().await;
    let events: Vec<_> = (0..3).map(|i| TestEvent::new("hk", i)).collect();
    outbox_core::emit_all(&client, &events).await.unwrap();
    db.execute("UPDATE outbox_events SET processed_at = now() - interval '1 hour'")
        .await;
}

/// A relay through `proxy` with a retention of a minute, rounds every 200 ms, and its first
/// retention delete caught by the proxy (the connection stalls as it is sent).
fn relay_whose_delete_stalls(
    db: &TestDb,
    proxy: &BlackHoleProxy,
) -> Relay<Arc<RecordingPublisher>> {
    proxy.catch_first_sending(b"DELETE FROM outbox_events");
    Relay::builder(
        db.pool_via(proxy.addr(), 4),
        Arc::new(RecordingPublisher::new()),
    )
    .retention(Some(Duration::from_secs(60)))
    .housekeeping_interval(Duration::from_millis(200))
    .build()
    .unwrap()
}

async fn rows(db: &TestDb) -> i64 {
    db.connect()
        .await
        .query_one("SELECT count(*) FROM outbox_events", &[])
        .await
        .unwrap()
        .get(0)
}

/// Sessions of the test database whose last statement was housekeeping's look at the layout and
/// that wait for another: a stalled housekeeping connection's (each round closes its own).
async fn stalled_housekeeping_sessions(db: &TestDb) -> i64 {
    db.connect()
        .await
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND state = 'idle' AND query LIKE '%FROM outbox_partitioning%' \
             AND state_change < now() - interval '1 s'",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// The retention's delete never reaches the server (the connection stalls as it is sent): the
/// round is given up within seconds, its session ended, and the next round deletes. Before, the
/// round waited until shutdown and nothing was deleted again.
#[tokio::test]
async fn a_round_whose_connection_stalls_is_given_up_and_the_next_deletes() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    // Row retention: the plain layout (the partitioned one retires partitions).
    let db = TestDb::plain().await;
    published_an_hour_ago(&db).await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let relay = relay_whose_delete_stalls(&db, &proxy);
    let running = RunningRelay::start(&relay);
    let deleted = eventually(Duration::from_secs(30), async || rows(&db).await == 0).await;
    let ended = eventually(Duration::from_secs(5), async || {
        stalled_housekeeping_sessions(&db).await == 0
    })
    .await;
    running.stop().await;
    let text = logs.text();
    assert!(deleted, "retention went on after the stall: {text}");
    assert!(text.contains(GIVEN_UP), "{text}");
    assert!(
        text.contains("housekeeping connection stopped answering: its server session had sat idle")
            && text.contains("(ended now)"),
        "{text}"
    );
    assert!(ended, "the stalled round's server session is gone");
}

/// Behind a pooler (start-ups naming other processes than the sessions that answer), the session
/// that answered may serve another client next: it is not watched, nor ended, so a round is never
/// given up on its account (here the round's delete never reaches the server, and waits).
#[tokio::test]
async fn behind_a_pooler_a_round_is_not_judged_by_a_session_that_may_not_be_its_own() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    // Row retention: the plain layout (the partitioned one retires partitions).
    let db = TestDb::plain().await;
    published_an_hour_ago(&db).await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    proxy.name_other_processes();
    let relay = relay_whose_delete_stalls(&db, &proxy);
    let running = RunningRelay::start(&relay);
    tokio::time::sleep(Duration::from_secs(12)).await;
    let left = stalled_housekeeping_sessions(&db).await;
    running.stop().await;
    let text = logs.text();
    assert!(!text.contains(GIVEN_UP), "{text}");
    assert!(text.contains("leads through a pooler"), "{text}");
    assert_eq!(left, 1, "the session that answered is left alone");
    assert_eq!(rows(&db).await, 3, "nothing deleted: the round waits");
}

/// The retention's delete waits 12 s for a lock (another transaction holds the table): the
/// connection is busy, not stalled, and the round finishes once the lock is released.
#[tokio::test]
async fn a_round_waiting_for_a_lock_is_left_to_finish() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    // Row retention: the plain layout (the partitioned one retires partitions).
    let db = TestDb::plain().await;
    published_an_hour_ago(&db).await;
    let mut holder = db.connect().await;
    let lock = holder.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE outbox_events IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let relay = Relay::builder(db.pool().clone(), Arc::new(RecordingPublisher::new()))
        .retention(Some(Duration::from_secs(60)))
        .housekeeping_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    // The round waits for the lock (and is looked at twice meanwhile).
    let waiting = eventually(Duration::from_secs(10), async || {
        db.lock_waiters("DELETE FROM outbox_events%").await == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    lock.rollback().await.unwrap();
    let deleted = eventually(Duration::from_secs(10), async || rows(&db).await == 0).await;
    running.stop().await;
    let text = logs.text();
    assert!(waiting, "the retention's delete waited for the lock");
    assert!(deleted, "{text}");
    assert!(
        !text.contains(GIVEN_UP),
        "a busy round was given up: {text}"
    );
}

/// The pool's idle connections go silent (a claim had used each) and the next round starts on
/// one: it is given up at its first statement, and that connection's session is ended too, with
/// the rest. Before, the round's own session was left behind (black-box run: one per stall).
#[tokio::test]
async fn a_round_started_on_a_connection_stalled_in_the_pool_leaves_no_session() {
    let db = TestDb::plain().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let pool = db.open_pool_via(proxy.addr(), 4).await;
    let relay = Relay::builder(pool, Arc::new(RecordingPublisher::new()))
        .retention(Some(Duration::from_secs(60)))
        .publish_timeout(Duration::from_secs(1))
        .poll_interval(Duration::from_millis(50))
        .concurrency(1)
        .housekeeping_interval(Duration::from_secs(3))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    // The worker claims on each idle connection in turn and learns their sessions; the next
    // round starts 3 s after the first.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let before = db.session_pids().await;
    proxy.black_hole();
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.heal();
    let ended = eventually(Duration::from_secs(20), async || {
        let now = db.session_pids().await;
        !before.iter().any(|pid| now.contains(pid))
    })
    .await;
    let left: Vec<_> = db
        .session_pids()
        .await
        .into_iter()
        .filter(|pid| before.contains(pid))
        .collect();
    running.stop().await;
    assert!(
        ended,
        "sessions left from before the stall: {left:?} of {before:?}"
    );
}

/// The inbox retention's delete never reaches the server: the round is given up within seconds
/// and its server session ended (before, it waited until shutdown, and the inbox grew).
#[tokio::test]
async fn an_inbox_retention_round_whose_connection_stalls_is_given_up() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    db.execute(
        "INSERT INTO processed_events (consumer, event_id, processed_at) \
         VALUES ('billing', gen_random_uuid(), now() - interval '2 days')",
    )
    .await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    proxy.catch_first_sending(b"DELETE FROM processed_events");
    let stop = tokio_util::sync::CancellationToken::new();
    let retention = tokio::spawn(outbox_core::run_inbox_retention(
        db.pool_via(proxy.addr(), 2),
        Duration::from_secs(86_400),
        stop.clone(),
    ));
    let given_up = eventually(Duration::from_secs(20), async || {
        logs.text().contains(
            "inbox retention connection stopped answering: its server session had sat idle",
        )
    })
    .await;
    stop.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(5), retention).await;
    let text = logs.text();
    assert!(given_up, "{text}");
    assert!(text.contains("(ended now)"), "{text}");
    assert!(stopped.is_ok(), "stopped at shutdown");
}
