//! The relay's own connections (the LISTEN one, the one advertising waiting) stalling without
//! closing — a middlebox holding the server's bytes, both sockets open — at each step: found within
//! a few seconds, replaced, and the server session they leave behind ended (a stalled LISTEN session
//! holds back the server's notification queue; a stalled advertising one keeps the waiting lock, so
//! every writer notifies).

use std::sync::Arc;
use std::time::Duration;

use outbox_core::{LISTENER_APPLICATION_NAME, Relay, WAITING_APPLICATION_NAME};
use outbox_tests::{
    BlackHoleProxy, LogCapture, RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually,
    waiting_lock_holders,
};

/// The sessions named `name` in the test's database: (pid, state, last statement).
async fn sessions(admin: &tokio_postgres::Client, name: &str) -> Vec<(i32, String, String)> {
    admin
        .query(
            "SELECT pid, coalesce(state, ''), query FROM pg_stat_activity \
             WHERE application_name = $1 AND datname = current_database() ORDER BY pid",
            &[&name],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// A relay listening (and advertising) through `proxy` without TLS (so the proxy can catch a
/// statement by its text), one worker, polling every 2 s.
fn relay_via(
    db: &TestDb,
    proxy: &BlackHoleProxy,
    publisher: Arc<RecordingPublisher>,
) -> Relay<Arc<RecordingPublisher>> {
    relay_with_workers(db, proxy, publisher, 1)
}

/// [`relay_via`] with `workers` workers.
fn relay_with_workers(
    db: &TestDb,
    proxy: &BlackHoleProxy,
    publisher: Arc<RecordingPublisher>,
    workers: usize,
) -> Relay<Arc<RecordingPublisher>> {
    Relay::builder(db.pool().clone(), publisher)
        .listen(
            db.config_via(proxy.addr())
                .ssl_mode(tokio_postgres::config::SslMode::Disable)
                .clone(),
        )
        .poll_interval(Duration::from_secs(2))
        .concurrency(workers)
        .build()
        .unwrap()
}

/// The session listening (its `LISTEN` answered), once there is exactly one.
/// Waits until one new connection (none of `first`) holds the waiting lock, alone advertising:
/// the stalled one's session, and its lock, are gone.
async fn a_new_connection_advertises(
    admin: &tokio_postgres::Client,
    first: &[i32],
    logs: &LogCapture,
) {
    assert!(
        eventually(Duration::from_secs(20), async || {
            let holders = waiting_lock_holders(admin).await;
            let advertising = sessions(admin, WAITING_APPLICATION_NAME).await;
            holders.len() == 1 && holders != first && advertising.len() == 1
        })
        .await,
        "a new connection advertises; the stalled one's session (and its lock) is gone: {:?} {:?}\n{}",
        waiting_lock_holders(admin).await,
        sessions(admin, WAITING_APPLICATION_NAME).await,
        logs.text()
    );
}

async fn the_listening_session(admin: &tokio_postgres::Client) -> Option<i32> {
    // Its last statement `LISTEN`, or one of those that follow it: the setting that has the
    // server end the session once idle a minute, and the checks.
    let after_listen = |query: &str| {
        [
            "LISTEN",
            "SELECT set_config('idle_session_timeout'",
            "SELECT 1 AS alive",
        ]
        .iter()
        .any(|q| query.starts_with(q))
    };
    match sessions(admin, LISTENER_APPLICATION_NAME).await.as_slice() {
        [(pid, state, query)] if state == "idle" && after_listen(query) => Some(*pid),
        _ => None,
    }
}

/// Stalled while quiet: asked whether it answers after a poll interval without a notification,
/// found silent, replaced (black-box run: never noticed; the relay fell back to polling for good,
/// without a line), and its session ended.
#[tokio::test]
async fn a_stalled_listen_connection_is_found_and_replaced() {
    let logs = LogCapture::default();
    let _g = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let relay = relay_via(&db, &proxy, Arc::new(RecordingPublisher::new()));
    let running = RunningRelay::start(&relay);
    let admin = db.connect().await;
    let mut first = None;
    // Listening, `LISTEN` answered (black-holed before that, the test would catch the start-up
    // instead: see the next test).
    assert!(
        eventually(Duration::from_secs(10), async || {
            first = the_listening_session(&admin).await;
            first.is_some()
        })
        .await,
        "the relay listens"
    );
    // The connection goes silent (caught within 20 ms); new ones pass again 3 s on.
    proxy.black_hole();
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.heal();
    // Checked after 2 s without a notification, given 5 s to answer: a new LISTEN connection,
    // which ends the stalled one's session.
    assert!(
        eventually(Duration::from_secs(15), async || {
            the_listening_session(&admin)
                .await
                .is_some_and(|pid| Some(pid) != first)
        })
        .await,
        "a new LISTEN connection replaced the stalled one, whose session was ended: {:?}\n{}",
        sessions(&admin, LISTENER_APPLICATION_NAME).await,
        logs.text()
    );
    let text = logs.text();
    assert!(
        text.contains("LISTEN connection lost")
            && text.contains("did not answer within 5 s")
            && text.contains("ended the server session of the stalled LISTEN connection"),
        "{text}"
    );
    running.stop().await;
}

/// Stalled on its `LISTEN` (right after connecting: the statement had no time limit, and the
/// listener waited for good — a CI run caught the previous test's connection there).
#[tokio::test]
async fn a_listen_statement_without_an_answer_is_given_up() {
    let logs = LogCapture::default();
    let _g = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    proxy.catch_first_sending(b"LISTEN");
    let relay = relay_via(&db, &proxy, Arc::new(RecordingPublisher::new()));
    let running = RunningRelay::start(&relay);
    let admin = db.connect().await;
    assert!(
        eventually(Duration::from_secs(15), async || {
            the_listening_session(&admin).await.is_some()
        })
        .await,
        "listening on a second connection, the first one's session ended: {:?}\n{}",
        sessions(&admin, LISTENER_APPLICATION_NAME).await,
        logs.text()
    );
    assert!(
        logs.text().contains("LISTEN connection lost"),
        "{}",
        logs.text()
    );
    running.stop().await;
}

/// Stalled while giving the waiting lock back (the relay got busy): given up after 5 s; the next
/// connection ends the stalled session, and the lock goes with it. Before, the stalled session kept
/// the lock until a restart, and every writer notified.
#[tokio::test]
async fn an_advertising_connection_stalled_on_its_unlock_is_replaced_and_its_lock_freed() {
    let logs = LogCapture::default();
    let _g = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let publisher = Arc::new(RecordingPublisher::with_delay(Duration::from_millis(300)));
    let relay = relay_via(&db, &proxy, Arc::clone(&publisher));
    let running = RunningRelay::start(&relay);
    let admin = db.connect().await;
    let mut first = Vec::new();
    assert!(
        eventually(Duration::from_secs(10), async || {
            first = waiting_lock_holders(&admin).await;
            first.len() == 1
        })
        .await,
        "the idle relay advertises"
    );
    proxy.catch_first_sending(b"pg_advisory_unlock");
    // The relay busy for 300 ms (more than it holds the lock through): it gives the lock back.
    let id = outbox_core::emit(&db.pool().get().await.unwrap(), &TestEvent::new("a", 1))
        .await
        .unwrap();
    a_new_connection_advertises(&admin, &first, &logs).await;
    assert_eq!(publisher.ids(), vec![id]);
    // The stalled connection's socket is closed (it stayed open for good, one per stall: a
    // black-box run counted 11 after 10 stalls): the LISTEN one and the new one are left.
    assert!(
        eventually(Duration::from_secs(5), async || proxy.open_connections()
            == 2)
        .await,
        "{} connections open through the proxy",
        proxy.open_connections()
    );
    let text = logs.text();
    assert!(
        text.contains("the connection advertising waiting was lost")
            && text.contains("did not answer within 5 s"),
        "{text}"
    );
    running.stop().await;
}

/// Stalled while it holds the waiting lock, the relay idle: found by a check after a quiet spell
/// (the poll interval, as for the LISTEN connection), its session (and the lock) ended, and a new
/// connection advertises. Before, it was noticed only once the relay was next busy and gave the
/// lock back: an idle relay's stalled session kept the lock, every writer notifying, for as long.
#[tokio::test]
async fn an_idle_relays_stalled_advertising_connection_is_found_and_replaced() {
    let logs = LogCapture::default();
    let _g = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    // Four workers polling every 2 s, each poll a busy instant: the check after a quiet spell
    // started again at each, and never came (black-box run: a stalled connection kept the lock
    // 10 minutes; with one worker the test had passed).
    let relay = relay_with_workers(&db, &proxy, Arc::new(RecordingPublisher::new()), 4);
    let running = RunningRelay::start(&relay);
    let admin = db.connect().await;
    let mut first = Vec::new();
    assert!(
        eventually(Duration::from_secs(10), async || {
            first = waiting_lock_holders(&admin).await;
            first.len() == 1 && logs.text().contains("advertising: writers notify")
        })
        .await,
        "the idle relay advertises"
    );
    proxy.black_hole();
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.heal();
    a_new_connection_advertises(&admin, &first, &logs).await;
    let text = logs.text();
    assert!(
        text.contains("the connection advertising waiting was lost")
            && text
                .contains("ended the server session of the stalled connection advertising waiting"),
        "{text}"
    );
    running.stop().await;
}

/// Stalled on its request for the waiting lock (the request never reached the server: nobody held
/// the lock, and writers stopped notifying this relay until a restart): given up once the server
/// would have answered (its `lock_timeout`) and 5 s more; the next connection takes the lock.
#[tokio::test]
async fn an_advertising_connection_stalled_on_its_lock_request_is_replaced() {
    let logs = LogCapture::default();
    let _g = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    proxy.catch_first_sending(b"pg_advisory_lock(");
    let relay = relay_via(&db, &proxy, Arc::new(RecordingPublisher::new()));
    let running = RunningRelay::start(&relay);
    let admin = db.connect().await;
    assert!(
        eventually(Duration::from_secs(20), async || {
            let holders = waiting_lock_holders(&admin).await;
            let advertising = sessions(&admin, WAITING_APPLICATION_NAME).await;
            holders.len() == 1 && advertising.len() == 1 && advertising[0].0 == holders[0]
        })
        .await,
        "a second connection advertises, the first one's session ended: {:?} {:?}\n{}",
        waiting_lock_holders(&admin).await,
        sessions(&admin, WAITING_APPLICATION_NAME).await,
        logs.text()
    );
    assert!(
        logs.text()
            .contains("ended the server session of the stalled connection advertising waiting")
    );
    running.stop().await;
}

/// Stopped while both its connections have stalled unnoticed (the LISTEN one between two checks,
/// the advertising one holding the waiting lock): each is asked once more, found silent, and its
/// session ended from a new connection. Before, both sessions ran on for good behind a middlebox
/// that keeps the server's side open; the advertising one kept the waiting lock (every writer
/// notified, and a relay started again queued behind it). A relay stopped with healthy connections
/// ends nothing.
#[tokio::test]
async fn a_relay_stopped_with_stalled_connections_leaves_no_session_behind() {
    let logs = LogCapture::default();
    let _g = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let admin = db.connect().await;
    let gone = async || {
        sessions(&admin, LISTENER_APPLICATION_NAME).await.is_empty()
            && sessions(&admin, WAITING_APPLICATION_NAME).await.is_empty()
            && waiting_lock_holders(&admin).await.is_empty()
    };
    for (round, stall) in [false, true].into_iter().enumerate() {
        let relay = relay_via(&db, &proxy, Arc::new(RecordingPublisher::new()));
        let running = RunningRelay::start(&relay);
        // Both answers must have reached the relay (not only the server's view of them): a LISTEN
        // answer held by the black hole leaves a statement in flight at stop, not a stall (the
        // race CI once lost).
        let heard = |line: &str| logs.text().matches(line).count() > round;
        assert!(
            eventually(Duration::from_secs(10), async || {
                the_listening_session(&admin).await.is_some()
                    && waiting_lock_holders(&admin).await.len() == 1
                    && heard("listening for outbox notifications")
                    && heard("advertising: writers notify")
            })
            .await,
            "the relay listens and advertises"
        );
        if stall {
            // Both connections go silent; a new one passes.
            proxy.black_hole();
            tokio::time::sleep(Duration::from_millis(100)).await;
            proxy.heal();
        }
        running.stop().await;
        assert!(
            eventually(Duration::from_secs(2), gone).await,
            "stalled: {stall}; sessions left: {:?} {:?}, lock held by {:?}\n{}",
            sessions(&admin, LISTENER_APPLICATION_NAME).await,
            sessions(&admin, WAITING_APPLICATION_NAME).await,
            waiting_lock_holders(&admin).await,
            logs.text()
        );
        let text = logs.text();
        for what in ["LISTEN connection", "connection advertising waiting"] {
            let ended = format!("ended the server session of the stalled {what}");
            assert_eq!(text.contains(&ended), stall, "{what}\n{text}");
        }
    }
}

/// A relay stopped while its lock request waits behind another relay's waiting lock (every stop
/// but one's, with two relays): its session is ended all the same, without calling anything
/// stalled (a black-box run read "ended the server session of the stalled connection" on every
/// stop).
#[tokio::test]
async fn a_relay_stopped_behind_another_relays_lock_says_nothing_stalled() {
    let logs = LogCapture::default();
    let _g = logs.install();
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let admin = db.connect().await;
    let first = relay_via(&db, &proxy, Arc::new(RecordingPublisher::new()));
    let first = RunningRelay::start(&first);
    assert!(
        eventually(Duration::from_secs(10), async || {
            waiting_lock_holders(&admin).await.len() == 1
        })
        .await
    );
    let second = relay_via(&db, &proxy, Arc::new(RecordingPublisher::new()));
    let second = RunningRelay::start(&second);
    assert!(
        eventually(Duration::from_secs(10), async || {
            sessions(&admin, WAITING_APPLICATION_NAME).await.len() == 2
        })
        .await,
        "the second relay asks for the lock"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    second.stop().await;
    assert!(
        eventually(Duration::from_secs(2), async || {
            sessions(&admin, WAITING_APPLICATION_NAME).await.len() == 1
        })
        .await,
        "{:?}",
        sessions(&admin, WAITING_APPLICATION_NAME).await
    );
    first.stop().await;
    let text = logs.text();
    assert!(!text.contains("stalled"), "{text}");
}
