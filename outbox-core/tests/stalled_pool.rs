//! A pool connection that stalls (a middlebox holding its bytes, the sockets open): the batch gives
//! up at its bound, and the pool's other idle connections, opened the same way, are closed rather
//! than stalling the next batches one by one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_core::Relay;
use outbox_tests::{
    BlackHoleProxy, RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually,
};

/// A pool of four connections to `db` through a proxy, all four opened and idle.
async fn four_idle_connections(db: &TestDb) -> (BlackHoleProxy, deadpool_postgres::Pool) {
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let pool = db.open_pool_via(proxy.addr(), 4).await;
    (proxy, pool)
}

/// Four idle pool connections black-holed together: one batch stalls (its bound: the publish
/// timeout and 5 s), the next connects anew. Before, each later batch took another stalled idle
/// connection and stalled again (black-box run: 35 s each time, with the defaults).
#[tokio::test]
async fn after_a_stall_the_pools_idle_connections_are_not_used_again() {
    let db = TestDb::new().await;
    let (proxy, pool) = four_idle_connections(&db).await;
    // The four go silent; new connections pass.
    proxy.black_hole();
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.heal();
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(pool, Arc::clone(&publisher))
        .publish_timeout(Duration::from_secs(1))
        .poll_interval(Duration::from_millis(200))
        .concurrency(1)
        .build()
        .unwrap();
    let first = outbox_core::emit(&db.pool().get().await.unwrap(), &TestEvent::new("a", 1))
        .await
        .unwrap();
    let started = Instant::now();
    let running = RunningRelay::start(&relay);
    assert!(
        eventually(Duration::from_secs(30), async || publisher
            .ids()
            .contains(&first))
        .await
    );
    let took = started.elapsed();
    running.stop().await;
    // One stall (6 s), not one per stalled connection (a housekeeping round may take one).
    assert!(took < Duration::from_secs(11), "published after {took:?}");
}

/// The relay's sessions through `proxy` after the pool's connections went silent: those of
/// `before` still there 8 s after, and whether all are gone.
async fn stall_all(db: &TestDb, proxy: BlackHoleProxy) -> (Vec<i32>, Vec<i32>, bool) {
    stall_all_for(db, proxy, Duration::from_millis(100)).await
}

/// The same with the connections silent for `outage` (new ones too) before new ones pass.
async fn stall_all_for(
    db: &TestDb,
    proxy: BlackHoleProxy,
    outage: Duration,
) -> (Vec<i32>, Vec<i32>, bool) {
    let pool = db.open_pool_via(proxy.addr(), 4).await;
    let relay = Relay::builder(pool, Arc::new(RecordingPublisher::new()))
        .publish_timeout(Duration::from_secs(1))
        .poll_interval(Duration::from_millis(50))
        .concurrency(1)
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    // The worker claims on each idle connection in turn (the pool hands them out first in, first
    // out), and so learns their sessions.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = db.session_pids().await;
    assert!(before.len() >= 3, "the pool's sessions: {before:?}");
    proxy.black_hole();
    tokio::time::sleep(outage).await;
    proxy.heal();
    // The next claim stalls (1 s and 5 s), then the sessions are ended a second later (or once
    // the database can be reached).
    let ended = eventually(Duration::from_secs(15), async || {
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
    (before, left, ended)
}

/// The pool's connections all go silent behind a middlebox that keeps the server's side open: the
/// claim that stalls closes them, and their server sessions are ended too. Before, the idle ones'
/// sessions stayed (until the server's TCP time-outs; behind a proxy, for good), each holding a
/// connection slot.
#[tokio::test]
async fn the_sessions_of_connections_closed_after_a_stall_are_ended() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let (_, left, ended) = stall_all(&db, proxy).await;
    assert!(ended, "sessions left from before the stall: {left:?}");
}

/// The outage goes on past the stall's discovery (10 s: new connections hang too): the sessions
/// are ended once the database can be reached again. Before, one try a second after the stall
/// failed, and they were left for good (black-box run: one more session per stall).
#[tokio::test]
async fn sessions_are_ended_once_a_longer_outage_ends() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let (_, left, ended) = stall_all_for(&db, proxy, Duration::from_secs(10)).await;
    assert!(ended, "sessions left from before the stall: {left:?}");
}

/// The gauges' refresh stalls (its connection goes silent as it asks the database's clock): cut
/// by its time-out, the connection is discarded and its session ended. Before, the connection went
/// back to the pool with its session idle in a transaction, for good.
#[tokio::test]
async fn a_gauge_refresh_cut_by_its_time_out_leaves_no_session() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    proxy.catch_first_sending(b"clock_timestamp() AS now");
    let relay = Relay::builder(
        db.pool_via(proxy.addr(), 4),
        Arc::new(RecordingPublisher::new()),
    )
    .metrics(outbox_core::RelayMetrics::new())
    .concurrency(1)
    .build()
    .unwrap();
    let running = RunningRelay::start(&relay);
    let left_in_refresh = async || {
        db.connect()
            .await
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND state = 'idle in transaction' AND query LIKE '%AS pending%'",
                &[],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    let caught = eventually(Duration::from_secs(10), async || {
        left_in_refresh().await == 1
    })
    .await;
    // The refresh's time-out (20 s), then the session is ended a second later.
    let ended = eventually(Duration::from_secs(30), async || {
        left_in_refresh().await == 0
    })
    .await;
    running.stop().await;
    assert!(caught, "the refresh stalled with its transaction open");
    assert!(ended, "the stalled refresh's session is left");
}

/// The same behind a pooler (its clients' start-ups name other processes than the sessions that
/// answer them): those sessions may serve other clients, and are left alone. (The stalled claim's
/// own is ended by the server, `idle_in_transaction_session_timeout`; the idle ones stay.)
#[tokio::test]
async fn behind_a_pooler_the_sessions_are_left_alone() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    proxy.name_other_processes();
    let (before, left, ended) = stall_all(&db, proxy).await;
    assert!(!ended, "sessions ended: {before:?}");
    assert!(left.len() >= 2, "left: {left:?} of {before:?}");
}

/// While every new connection stalls right after its start-up (a middlebox holding its bytes once
/// the login is through), the relay's pool opens them one at a time, spaced out, rather than each
/// worker opening another after each back-off: the server sessions they leave take few of the
/// server's connection slots (black-box run: one relay held ~90 within a minute). Once new
/// connections answer again, publishing resumes within the longest pause (10 s).
#[tokio::test]
async fn while_new_connections_stall_the_pool_opens_them_one_at_a_time() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    proxy.catch_every_sending(b"set_config('idle_session_timeout'");
    let url = format!(
        "postgres://postgres@{}/{}?sslmode=disable",
        proxy.addr(),
        db.name()
    );
    let pool = outbox_core::PgConnector::from_url(&url)
        .unwrap()
        .relay_pool(6, Duration::from_secs(2))
        .unwrap();
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(pool, Arc::clone(&publisher))
        .publish_timeout(Duration::from_secs(2))
        .poll_interval(Duration::from_millis(100))
        .concurrency(4)
        .build()
        .unwrap();
    let id = outbox_core::emit(&db.pool().get().await.unwrap(), &TestEvent::new("a", 1))
        .await
        .unwrap();
    let running = RunningRelay::start(&relay);
    tokio::time::sleep(Duration::from_secs(25)).await;
    let sessions = db
        .sessions_named(outbox_core::RELAY_APPLICATION_NAME)
        .await
        .len();
    // The first workers' connections at once (4), then one at a time: one each 5 s (its bound)
    // and the pause after it.
    assert!(
        (4..=8).contains(&sessions),
        "{sessions} sessions left by stalled new connections"
    );
    assert!(publisher.ids().is_empty());
    proxy.stop_catching();
    let published = eventually(Duration::from_secs(20), async || {
        publisher.ids().contains(&id)
    })
    .await;
    running.stop().await;
    assert!(published, "not published once new connections answered");
}
