//! The server sessions the relay's connections (its pool's, its LISTEN and advertising ones) leave
//! behind when they stall while idle end themselves, even when the relay cannot open a connection
//! to end them.

use std::time::Duration;

use outbox_core::connect::{IDLE_SESSION_TIMEOUT, PgConnector};
use outbox_core::{LISTENER_APPLICATION_NAME, WAITING_APPLICATION_NAME};
use outbox_tests::{BlackHoleProxy, RecordingPublisher, RunningRelay, TestDb, eventually};

/// A relay pool (`PgConnector::relay_pool`) of `size` connections to `db` through `proxy`.
fn relay_pool_via(db: &TestDb, proxy: &BlackHoleProxy, size: usize) -> deadpool_postgres::Pool {
    let url = format!(
        "postgres://postgres@{}/{}?sslmode=disable",
        proxy.addr(),
        db.name()
    );
    PgConnector::from_url(&url)
        .unwrap()
        .relay_pool(size, Duration::from_secs(30))
        .unwrap()
}

/// The relay pool's connections go silent while idle (a middlebox holding their bytes, both
/// sockets open, the server's side kept open by the middlebox): the server ends their sessions
/// itself a minute on, freeing the connection slots they hold. Before, they stayed for good: with
/// every slot of the relay's role so held, no relay could connect to end them (black-box run:
/// publishing stopped for good, and a relay started again exited with "too many connections for
/// role").
async fn sessions_of_pool_connections_stalled_while_idle_end_themselves() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let pool = relay_pool_via(&db, &proxy, 2);
    let held: Vec<_> = futures::future::join_all((0..2).map(|_| pool.get())).await;
    let held: Vec<_> = held.into_iter().map(Result::unwrap).collect();
    let limit: String = held[0]
        .query_one("SHOW idle_session_timeout", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(limit, "1min");
    drop(held);
    // By name: a session of the test's own looks may still be ending.
    let pooled = pool_sessions(&db).await;
    assert_eq!(pooled.len(), 2, "the pool's sessions: {pooled:?}");
    proxy.black_hole();
    let ended = eventually(IDLE_SESSION_TIMEOUT + Duration::from_secs(15), async || {
        let now = db.session_pids().await;
        !pooled.iter().any(|pid| now.contains(pid))
    })
    .await;
    assert!(ended, "the stalled sessions are still there");
}

/// A pool connection that stalls between its start-up and the statement setting the limit (the
/// pool's hook gives it up after 5 s) still leaves a session that ends itself: once one connection
/// has shown that the server takes the setting, the next ones ask for it in their start-up. Before,
/// such a session had no limit and stayed for good (black-box run).
async fn a_session_whose_connection_stalls_before_its_limit_is_set_still_ends_itself() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let pool = relay_pool_via(&db, &proxy, 2);
    let first = pool.get().await.unwrap();
    let first_pid: i32 = first
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    // The next connection's start-up passes; the statement after it never arrives.
    proxy.catch_first_sending(b"set_config('idle_session_timeout'");
    let refused = pool.get().await;
    assert!(refused.is_err(), "the hook gives the connection up");
    let left: Vec<i32> = pool_sessions(&db)
        .await
        .into_iter()
        .filter(|pid| *pid != first_pid)
        .collect();
    assert_eq!(left.len(), 1, "the stalled connection's session: {left:?}");
    // Kept busy meanwhile, the first is not ended.
    let ended = eventually(IDLE_SESSION_TIMEOUT + Duration::from_secs(15), async || {
        first.query_one("SELECT 1", &[]).await.unwrap();
        !db.session_pids().await.contains(&left[0])
    })
    .await;
    assert!(ended, "the stalled session is still there");
}

/// The two cases above, each on its own database, at the same time: each waits a minute for the
/// server, and the suite's threads are few.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_sessions_stalled_while_idle_end_themselves_even_before_their_limit_is_set() {
    tokio::join!(
        sessions_of_pool_connections_stalled_while_idle_end_themselves(),
        a_session_whose_connection_stalls_before_its_limit_is_set_still_ends_itself(),
    );
}

/// A connection string whose `options` set `idle_session_timeout` keeps its value: the relay's
/// pool sets nothing, at start-up or after.
#[tokio::test]
async fn a_connection_strings_own_idle_session_timeout_stands() {
    let db = TestDb::new().await;
    let url = format!(
        "postgres://postgres@{}/{}?sslmode=disable&options=-c%20idle_session_timeout%3D300000",
        db.server_addr(),
        db.name()
    );
    let pool = PgConnector::from_url(&url)
        .unwrap()
        .relay_pool(2, Duration::from_secs(30))
        .unwrap();
    assert_eq!(limits_of_two_connections(&pool).await, ["5min", "5min"]);
}

/// The pids of the sessions named as a relay pool's.
async fn pool_sessions(db: &TestDb) -> Vec<i32> {
    db.sessions_named(outbox_core::RELAY_APPLICATION_NAME).await
}

/// Behind a pooler (start-ups name another process than the session that answers, as
/// PgBouncer's do), nothing is set: the server connection serves other clients too, and a setting
/// made on it would outlive the relay's use of it.
#[tokio::test]
async fn behind_a_pooler_server_sessions_are_left_as_they_are() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    proxy.name_other_processes();
    let pool = relay_pool_via(&db, &proxy, 2);
    // The second connection is made once the first has been looked at: it is not asked for at
    // start-up either.
    assert_eq!(limits_of_two_connections(&pool).await, ["0", "0"]);
}

/// `idle_session_timeout` as two connections of `pool` see it, the second opened after the first.
async fn limits_of_two_connections(pool: &deadpool_postgres::Pool) -> Vec<String> {
    let first = pool.get().await.unwrap();
    let second = pool.get().await.unwrap();
    let mut limits = Vec::new();
    for client in [first, second] {
        let row = client.query_one("SHOW idle_session_timeout", &[]).await;
        limits.push(row.unwrap().get(0));
    }
    limits
}

/// How many sessions named `name` the test's database has.
async fn named(db: &TestDb, name: &str) -> i64 {
    db.connect()
        .await
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND application_name = $1",
            &[&name],
        )
        .await
        .unwrap()
        .get(0)
}

/// A relay stops while its LISTEN and advertising connections have stalled, and no new
/// connection gets through to end their sessions (the database unreachable, or every slot of the
/// relay's role held): the sessions end themselves a minute on. Before, both stayed for good
/// behind a middlebox that keeps the server's side open (black-box run: over 5 minutes, a relay
/// started again refused its LISTEN and advertising connections every 30 s), the LISTEN one
/// holding back the notification queue and the advertising one keeping the waiting lock.
#[tokio::test]
async fn a_stopped_relays_stalled_listen_and_advertising_sessions_end_themselves() {
    let logs = outbox_tests::LogCapture::default();
    let _g = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let relay = outbox_core::Relay::builder(
        db.pool().clone(),
        std::sync::Arc::new(RecordingPublisher::new()),
    )
    .listen(
        db.config_via(proxy.addr())
            .ssl_mode(tokio_postgres::config::SslMode::Disable)
            .clone(),
    )
    .concurrency(1)
    .build()
    .unwrap();
    let running = RunningRelay::start(&relay);
    let names = [LISTENER_APPLICATION_NAME, WAITING_APPLICATION_NAME];
    // Both answers must have reached the relay, not only the server's view of them.
    assert!(
        eventually(Duration::from_secs(10), async || {
            let text = logs.text();
            named(&db, names[0]).await == 1
                && named(&db, names[1]).await == 1
                && text.contains("listening for outbox notifications")
                && text.contains("advertising: writers notify")
        })
        .await,
        "the relay listens and advertises"
    );
    // For good: new connections hang too.
    proxy.black_hole();
    running.stop().await;
    let left = async || named(&db, names[0]).await + named(&db, names[1]).await;
    assert_eq!(
        left().await,
        2,
        "both sessions are left at the stop: listener {}, advertising {}",
        named(&db, names[0]).await,
        named(&db, names[1]).await,
    );
    let ended = eventually(IDLE_SESSION_TIMEOUT + Duration::from_secs(15), async || {
        left().await == 0
    })
    .await;
    assert!(ended, "the stalled sessions are still there");
}
