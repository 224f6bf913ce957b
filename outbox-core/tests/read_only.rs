//! A database that turns read-only under the relay (a failover: a demoted primary or a replica
//! behind the address) and back: the relay publishes again once it is writable, without a
//! restart.

use std::sync::Arc;

use outbox_core::{Relay, emit};
use outbox_tests::{RecordingPublisher, TestDb, TestEvent};

/// Black-box run: after a database was read-only for a minute, the relays kept the connections
/// they had made meanwhile, read-only for good, and published nothing (SQLSTATE 25006 on every
/// batch) until their sessions were killed by hand.
#[tokio::test]
async fn connections_made_while_the_database_was_read_only_are_not_kept() {
    let db = TestDb::new().await;
    let admin = db.connect().await;
    let set_read_only = async |on: bool| {
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
    };
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
