//! The stall watch over a connection that still carries the server's word.

use std::time::Duration;

use outbox_tests::{BlackHoleProxy, DelayProxy, TestDb};

use super::{Patience, Watching, watched_session};
use crate::error::ErrorKind;
use crate::relay::{PoolSessions, Session};

/// A statement that fails because the watch ended its session fails with the watch's word ("the
/// … stopped answering: its server session had sat idle …"), not with the server's "terminating
/// connection due to administrator command", which reaches a connection that still carries bytes
/// before the watch's own answer (black-box recheck: `dead-letters retry` over a slow uplink
/// failed with the raw 57P01). Here the request is held on its way and the watch's answers come
/// late, so the server's word always arrives first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_failing_as_the_watch_ends_its_session_fails_with_the_watchs_word() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let (client, connection) = db
        .config_via(proxy.addr())
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let session = Session::of(&client, "test connection").await.unwrap();
    assert!(
        session.is_direct(),
        "the proxy names the server's own process"
    );
    let late = DelayProxy::start(db.server_addr(), Duration::from_millis(500)).await;
    let watchers = db.pool_via(late.addr(), 1);
    let watching = Watching {
        patience: Patience {
            idle_at_most: Duration::from_secs(1),
            unseen_at_most: None,
        },
        activity: None,
    };
    proxy.delay_requests(Duration::from_secs(60));
    let work = client.simple_query("SELECT 'held on its way'");
    let known = PoolSessions::default();
    let what = "test connection";
    let outcome = watched_session(
        &watchers,
        &known,
        session,
        what,
        watching,
        work,
        Result::is_err,
    )
    .await;
    let e = match outcome {
        Ok(Ok(_)) => panic!("answered, though the request never arrived"),
        Ok(Err(e)) => panic!("the work's own error came out: {e}"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("the test connection stopped answering") && text.contains("ended now"),
        "{text}"
    );
}
