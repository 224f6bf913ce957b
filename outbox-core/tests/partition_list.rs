//! Listing the partitions while maintenance drops one (`outbox partitions list` and `outbox stats`
//! run next to relays that maintain partitions).

use outbox_core::partition::{self, Granularity};
use outbox_tests::TestDb;

/// A partition detached and dropped after the listing transaction took its snapshot: the list
/// leaves it out instead of failing with "relation does not exist" (found by CI: the relay's
/// maintenance dropped an expired partition while a test listed them).
#[tokio::test]
async fn a_partition_dropped_meanwhile_is_left_out_of_the_list() {
    let db = TestDb::partitioned(Granularity::Daily).await;
    let names = db.partition_names().await;
    // The last partition made ahead (the one before the tail): empty, safe to drop.
    let victim = names[names.len() - 2].clone();
    assert!(victim.starts_with("outbox_events_p2"), "{names:?}");

    let mut lister = db.connect().await;
    let tx = lister
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .start()
        .await
        .unwrap();
    // Takes the transaction's snapshot.
    tx.execute("SELECT 1", &[]).await.unwrap();
    db.execute(&format!(
        "ALTER TABLE outbox_events DETACH PARTITION {victim}; DROP TABLE {victim};"
    ))
    .await;

    let listed = partition::list_partitions(&tx)
        .await
        .expect("listing survives a partition dropped meanwhile");
    let listed: Vec<String> = listed.into_iter().map(|p| p.name).collect();
    assert!(!listed.contains(&victim), "{listed:?}");
    assert_eq!(listed.len(), names.len() - 1, "{listed:?} vs {names:?}");
}
