//! Retiring an expired partition waits for the transactions that began before its end: an event's
//! `created_at` is its transaction's start, so such a transaction can still write into it.
//!
//! A partition boundary is put between a writer's start and now by splitting the current hour's
//! partition at that moment (`outbox_partition_add` with bounds of the test's choosing); with a
//! retention of zero the earlier half is then expired while the writer is still open — what an
//! hour-long retention looks like to a writer that began just before the hour turned.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use outbox_core::partition::{self, Granularity, MaintainOptions, MaintenanceReport};
use outbox_core::{Relay, emit};
use outbox_tests::{RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually};

/// The later half of the split hour.
const SPLIT: &str = "outbox_events_p_split";

async fn maintain(db: &TestDb, settle_timeout: Duration) -> MaintenanceReport {
    let client = db.connect().await;
    let options = MaintainOptions::new()
        .retention(Some(Duration::ZERO))
        .settle_timeout(settle_timeout);
    partition::maintain(&client, &options)
        .await
        .expect("maintenance succeeds")
}

/// A partitioned database whose head is gone, not too close to the end of an hour (the split
/// must fall inside the current hour).
async fn partitioned_db() -> TestDb {
    let db = TestDb::partitioned(Granularity::Hourly).await;
    maintain(&db, Duration::from_secs(5)).await; // the empty head
    let left = 3600 - Utc::now().timestamp().rem_euclid(3600);
    if left < 15 {
        tokio::time::sleep(Duration::from_secs(left.unsigned_abs() + 1)).await;
        maintain(&db, Duration::from_secs(5)).await;
    }
    db
}

/// Splits the partition of `at`'s hour at `at` + 50 ms and returns the earlier half's name.
async fn split_hour_after(db: &TestDb, at: DateTime<Utc>) -> String {
    let at = at.to_rfc3339();
    db.execute(&format!(
        "DO $$
         DECLARE
             lo timestamptz := date_trunc('hour', '{at}'::timestamptz, 'UTC');
             mid timestamptz := '{at}'::timestamptz + interval '50 ms';
             cur text := outbox_partition_name(lo, 'hourly');
         BEGIN
             EXECUTE format('ALTER TABLE outbox_events DETACH PARTITION %I', cur);
             EXECUTE format('DROP TABLE %I', cur);
             PERFORM outbox_partition_add(cur, lo, mid);
             PERFORM outbox_partition_add('{SPLIT}', mid, lo + interval '1 hour');
         END $$"
    ))
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await; // the earlier half is now in the past
    let names = db.partition_names().await;
    let i = names.iter().position(|n| n == SPLIT).expect("split");
    names[i - 1].clone()
}

#[tokio::test]
async fn an_open_transaction_that_began_before_a_partitions_end_keeps_it_and_its_order() {
    let db = partitioned_db().await;
    let mut writer = db.connect().await;
    let tx = writer.transaction().await.unwrap();
    let began: DateTime<Utc> = tx.query_one("SELECT now()", &[]).await.unwrap().get(0);
    let early = split_hour_after(&db, began).await;

    // Expired, empty, but the writer may still write into it: left for a later run.
    let r = maintain(&db, Duration::from_millis(300)).await;
    assert!(r.dropped.is_empty(), "{r:?}");
    assert_eq!(r.waiting, [early.clone()], "{r:?}");
    assert!(db.partition_names().await.contains(&early));

    // The writer's event lands in it (before the fix the partition was gone and the insert failed:
    // no partition of relation "outbox_events" found for row).
    let first = emit(&tx, &TestEvent::new("o-1", 1))
        .await
        .expect("the writer can still emit");
    let r = maintain(&db, Duration::from_millis(300)).await;
    assert_eq!(
        (r.dropped.len(), r.waiting.len()),
        (0, 1),
        "still open: {r:?}"
    );
    tx.commit().await.unwrap();
    let client = db.connect().await;
    let second = emit(&client, &TestEvent::new("o-1", 2)).await.unwrap();
    let r = maintain(&db, Duration::from_secs(5)).await;
    assert!(r.waiting.is_empty(), "the writer is done: {r:?}");
    assert_eq!(r.kept.len(), 1, "its pending event keeps it: {r:?}");
    assert_eq!(r.kept[0].name, early);

    // Maintenance beside an ordered relay: the later event never goes first.
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let published = eventually(Duration::from_secs(10), async || {
        maintain(&db, Duration::from_secs(1)).await;
        publisher.ids().len() >= 2
    })
    .await;
    running.stop().await;
    assert!(published, "both published: {:?}", publisher.ids());
    assert_eq!(
        publisher.ids(),
        [first, second],
        "in their aggregate's order"
    );
    let gone = eventually(Duration::from_secs(10), async || {
        maintain(&db, Duration::from_secs(1)).await;
        !db.partition_names().await.contains(&early)
    })
    .await;
    assert!(gone, "published: retired at last");
}

#[tokio::test]
async fn retirement_waits_up_to_the_settle_timeout_for_such_a_transaction() {
    let db = partitioned_db().await;
    let (began_tx, began_rx) = tokio::sync::oneshot::channel();
    let config = db.config().clone();
    let writer = tokio::spawn(async move {
        let mut client = outbox_tests::db::connect(&config).await;
        let tx = client.transaction().await.unwrap();
        let began: DateTime<Utc> = tx.query_one("SELECT now()", &[]).await.unwrap().get(0);
        began_tx.send(began).unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        tx.rollback().await.unwrap();
    });
    let early = split_hour_after(&db, began_rx.await.unwrap()).await;
    let started = Instant::now();
    let r = maintain(&db, Duration::from_secs(10)).await;
    let waited = started.elapsed();
    writer.await.unwrap();
    assert_eq!(r.dropped, [early], "dropped once the writer ended: {r:?}");
    assert!(r.waiting.is_empty(), "{r:?}");
    assert!(
        waited >= Duration::from_millis(300),
        "it waited for the writer: {waited:?}"
    );
}

#[tokio::test]
async fn v6_upgrades_a_partitioned_database_in_place() {
    let db = TestDb::empty().await;
    let mut client = db.connect().await;
    outbox_core::migrate_up_to(&mut client, 5).await.unwrap();
    client
        .batch_execute("SELECT outbox_partitions_convert('hourly', 12)")
        .await
        .unwrap();
    let id = emit(&client, &TestEvent::new("o-1", 1)).await.unwrap();
    let report = outbox_core::migrate(&mut client).await.unwrap();
    assert_eq!(report.applied, ["V6__partition_retirement_waits"]);
    let r = maintain(&db, Duration::from_secs(5)).await;
    assert_eq!(r.dropped, ["outbox_events_p_head"], "{r:?}");
    let kept: i64 = client
        .query_one("SELECT count(*) FROM outbox_events WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1);
}
