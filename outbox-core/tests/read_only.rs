//! A database that turns read-only under the relay (a failover: a demoted primary or a replica
//! behind the address) and back: the relay publishes again once it is writable, without a
//! restart.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_core::{Relay, emit};
use outbox_tests::{RecordingPublisher, TestDb, TestEvent};

/// Sets the test database read-only for new sessions (`on`) or writable again.
async fn set_read_only(admin: &tokio_postgres::Client, on: bool) {
    let setting = if on {
        "SET default_transaction_read_only = on"
    } else {
        "RESET default_transaction_read_only"
    };
    admin
        .batch_execute(&format!(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I {setting}', current_database()); END $$"
        ))
        .await
        .unwrap();
}

/// A relay whose worker has backed off through a read-only database publishes within seconds of
/// it being writable again: a watch asks the database every second while workers back off.
/// Before, nothing woke them (the LISTEN connection never dropped), and they resumed when their
/// back-off ended: 16-17 s after a minute read-only (black-box run), 10 s or more here.
#[tokio::test]
async fn workers_backing_off_resume_within_seconds_of_the_database_being_writable() {
    let logs = outbox_tests::LogCapture::default();
    let _logs = logs.install();
    let db = TestDb::new().await;
    let admin = db.connect().await;
    // Opened while writable: it stays so.
    let mut writer = db.connect().await;
    set_read_only(&admin, true).await;
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool_via(db.server_addr(), 2), Arc::clone(&publisher))
        .concurrency(1)
        .poll_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { relay.run(shutdown).await }
    });
    // The eighth failure in a row: the worker sleeps 12.8 s (±20 %) before the ninth claim.
    let backed_off = outbox_tests::eventually(Duration::from_secs(30), async || {
        logs.text().matches("relay batch failed").count() >= 8
    })
    .await;
    assert!(backed_off, "{}", logs.text());
    set_read_only(&admin, false).await;
    let writable = Instant::now();
    let tx = writer.transaction().await.unwrap();
    let id = emit(&tx, &TestEvent::new("o-1", 1)).await.unwrap();
    tx.commit().await.unwrap();
    let published = outbox_tests::eventually(Duration::from_secs(20), async || {
        publisher.ids().contains(&id)
    })
    .await;
    let took = writable.elapsed();
    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert!(published, "never published");
    assert!(
        took < Duration::from_secs(4),
        "published {took:?} after the database was writable"
    );
}

/// Black-box run: after a database was read-only for a minute, the relays kept the connections
/// they had made meanwhile, read-only for good, and published nothing (SQLSTATE 25006 on every
/// batch) until their sessions were killed by hand.
#[tokio::test]
async fn connections_made_while_the_database_was_read_only_are_not_kept() {
    let db = TestDb::new().await;
    let admin = db.connect().await;
    let set_read_only = async |on: bool| set_read_only(&admin, on).await;
    let mut writer = db.connect().await;
    let tx = writer.transaction().await.unwrap();
    let id = emit(&tx, &TestEvent::new("o-1", 1)).await.unwrap();
    tx.commit().await.unwrap();

    // The relay's pool makes its connections while the database is read-only.
    set_read_only(true).await;
    let pool = db.pool_via(db.server_addr(), 4);
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(pool, Arc::clone(&publisher))
        .build()
        .unwrap();
    let failed = relay
        .run_once()
        .await
        .expect_err("read-only: the claim fails");
    assert!(
        failed.to_string().contains("connects anew"),
        "the connection is discarded: {failed}"
    );

    // Writable again: the next batch connects anew and publishes.
    set_read_only(false).await;
    let mut published = false;
    for _ in 0..3 {
        if relay.run_once().await.is_ok_and(|r| r.published == 1) {
            published = true;
            break;
        }
    }
    assert!(published, "the relay kept its read-only connection");
    assert_eq!(publisher.ids(), vec![id]);
}
