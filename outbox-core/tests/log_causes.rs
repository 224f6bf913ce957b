//! The relay's log lines about failures carry their causes: tokio-postgres and deadpool print
//! their own words alone ("db error", "error connecting to server"), the server's message or the
//! socket's error only in their sources.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::Relay;
use outbox_tests::{LogCapture, RecordingPublisher, RunningRelay, TestDb, eventually};

// A current-thread runtime: the relay's tasks run on this thread, under the capturing subscriber.
#[tokio::test]
async fn housekeeping_says_why_it_could_not_get_a_connection() {
    let logs = LogCapture::default();
    let _guard = logs.install();

    let db = TestDb::new().await;
    let mut config = db.config().clone();
    config.dbname("outbox_no_such_database");
    let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
    let pool = deadpool_postgres::Pool::builder(manager)
        .max_size(2)
        .build()
        .unwrap();
    let relay = Relay::builder(pool, Arc::new(RecordingPublisher::new()))
        .housekeeping_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let logged = eventually(Duration::from_secs(10), async || {
        logs.text()
            .contains("housekeeping could not get a connection")
    })
    .await;
    running.stop().await;
    let text = logs.text();
    assert!(logged, "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("housekeeping could not get a connection"))
        .unwrap_or_default();
    assert!(
        line.contains("database \"outbox_no_such_database\" does not exist"),
        "the server's reason is missing: {line}"
    );
}
