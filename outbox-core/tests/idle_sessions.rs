//! The relay's pool ends the server sessions its connections leave behind when they stall while
//! idle, even when the relay cannot open a connection to end them.

use std::time::Duration;

use outbox_core::connect::{POOL_IDLE_SESSION_TIMEOUT, PgConnector};
use outbox_tests::{BlackHoleProxy, TestDb, eventually};

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
#[tokio::test]
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
    let pooled: Vec<i32> = db
        .connect()
        .await
        .query(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND application_name = $1",
            &[&outbox_core::RELAY_APPLICATION_NAME],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(pooled.len(), 2, "the pool's sessions: {pooled:?}");
    proxy.black_hole();
    let ended = eventually(
        POOL_IDLE_SESSION_TIMEOUT + Duration::from_secs(15),
        async || {
            let now = db.session_pids().await;
            !pooled.iter().any(|pid| now.contains(pid))
        },
    )
    .await;
    assert!(ended, "the stalled sessions are still there");
}

/// Behind a pooler (start-ups name another process than the session that answers, as
/// PgBouncer's do), nothing is set: the server connection serves other clients too, and a setting
/// made on it would outlive the relay's use of it.
#[tokio::test]
async fn behind_a_pooler_server_sessions_are_left_as_they_are() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    proxy.name_other_processes();
    let pool = relay_pool_via(&db, &proxy, 1);
    let client = pool.get().await.unwrap();
    let limit: String = client
        .query_one("SHOW idle_session_timeout", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(limit, "0");
}
