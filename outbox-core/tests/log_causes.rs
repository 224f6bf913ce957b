//! The relay's log lines about failures carry their causes: tokio-postgres and deadpool print
//! their own words alone ("db error", "error connecting to server"), the server's message or the
//! socket's error only in their sources.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::{FailureKind, PublishOutcome, Relay};
use outbox_tests::{
    FlakyPublisher, LogCapture, RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually,
};

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

/// Dead letters are logged one by one a few at a time (ten every 10 s across the relay's
/// batches), the rest of each batch in one line counting them: 100 000 events refused by their
/// queue made 100 000 `error` lines, 28 MB (black-box run). Every one is dead-lettered all the
/// same.
#[tokio::test]
async fn a_batch_of_dead_letters_is_logged_a_few_lines_and_a_count() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    let events: Vec<TestEvent> = (0..60)
        .map(|i| TestEvent::new(format!("poison-{i}"), 1))
        .collect();
    let ids = outbox_core::emit_all(&db.pool().get().await.unwrap(), &events)
        .await
        .unwrap();
    let publisher = FlakyPublisher::new(|_| {
        Some(PublishOutcome::permanent(
            FailureKind::InvalidContent,
            "the queue refuses it",
        ))
    });
    let relay = Relay::builder(db.pool().clone(), Arc::new(publisher))
        .batch_size(100)
        .concurrency(1)
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let client = db.connect().await;
    let dead_letters = async || -> i64 {
        client
            .query_one(
                "SELECT count(*) FROM outbox_events WHERE dead_lettered_at IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    };
    let dead = eventually(Duration::from_secs(20), async || {
        dead_letters().await == ids.len() as i64
    })
    .await;
    running.stop().await;
    let text = logs.text();
    assert!(dead, "dead letters: {}", dead_letters().await);
    let one_by_one = text
        .lines()
        .filter(|l| l.contains(" ERROR ") && l.contains("event dead-lettered event_id"))
        .count();
    assert_eq!(one_by_one, 10, "{text}");
    assert!(
        text.contains("50 more events of this batch dead-lettered"),
        "{text}"
    );
}

/// An idle relay polls once per poll interval, whatever its number of workers: one idle worker
/// keeps the timer, the others wait for a wake-up. Each worker polled on its own, four claims an
/// interval where one does (black-box run: over a backlog blocked behind dead letters each read it
/// all, most of a database core). Something to publish still brings the others in.
#[tokio::test]
async fn an_idle_relay_polls_once_per_interval_whatever_its_workers() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .concurrency(4)
        .poll_interval(Duration::from_millis(250))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    // The first claims of every worker, then 3 s idle: 12 polls.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = logs.text().matches("claimed nothing").count();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let polls = logs.text().matches("claimed nothing").count() - before;
    let events: Vec<TestEvent> = (0..300)
        .map(|i| TestEvent::new(format!("a{i}"), 1))
        .collect();
    let ids = outbox_core::emit_all(&db.pool().get().await.unwrap(), &events)
        .await
        .unwrap();
    let published = eventually(Duration::from_secs(10), async || {
        publisher.ids().len() >= ids.len()
    })
    .await;
    running.stop().await;
    assert!(
        (6..=18).contains(&polls),
        "{polls} claims in 3 s at a 250 ms poll"
    );
    assert!(
        published,
        "published {} of {}",
        publisher.ids().len(),
        ids.len()
    );
}
