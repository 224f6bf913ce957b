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
use outbox_core::partition::{Granularity, MaintainOptions, MaintenanceReport};
use outbox_core::{Relay, emit};
use outbox_tests::{RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually};

/// The later half of the split hour.
const SPLIT: &str = "outbox_events_p_split";

async fn maintain(db: &TestDb, settle_timeout: Duration) -> MaintenanceReport {
    let options = MaintainOptions::new()
        .retention(Some(Duration::ZERO))
        .settle_timeout(settle_timeout);
    db.maintain(&options).await
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

/// Sleeps until `began` + 1.2 s: past the 1 s margin the horizon keeps for transactions about to
/// start, so that only an open transaction can hold the split's earlier half back.
async fn past_margin(began: DateTime<Utc>) {
    let until = began + chrono::Duration::milliseconds(1200);
    if let Ok(left) = (until - Utc::now()).to_std() {
        tokio::time::sleep(left).await;
    }
}

/// How many transactions of `db` maintenance counts as open (its own session excluded).
async fn open_transactions(db: &TestDb) -> i32 {
    db.connect()
        .await
        .query_one("SELECT cardinality(outbox_open_transactions())", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_writer_that_began_before_a_partitions_end_can_still_emit_into_it() {
    let db = partitioned_db().await;
    let mut writer = db.connect().await;
    let tx = writer.transaction().await.unwrap();
    let began: DateTime<Utc> = tx.query_one("SELECT now()", &[]).await.unwrap().get(0);
    let early = split_hour_after(&db, began).await;
    past_margin(began).await;
    assert_eq!(open_transactions(&db).await, 1, "the writer");

    // Expired, empty, but the writer may still write into it: left for a later run.
    let r = maintain(&db, Duration::from_millis(300)).await;
    assert!(r.dropped.is_empty(), "{r:?}");
    assert_eq!(r.waiting, std::slice::from_ref(&early), "{r:?}");

    // Before the fix the partition was gone and this failed: no partition of relation
    // "outbox_events" found for row.
    emit(&tx, &TestEvent::new("o-1", 1))
        .await
        .expect("the writer can still emit");
    tx.commit().await.unwrap();
    let r = maintain(&db, Duration::from_secs(5)).await;
    assert!(r.waiting.is_empty(), "the writer is done: {r:?}");
    assert_eq!(r.kept.len(), 1, "its pending event keeps it: {r:?}");
    assert_eq!(r.kept[0].name, early);
}

#[tokio::test]
async fn an_uncommitted_event_in_an_expired_partition_is_never_hidden_from_the_relay() {
    let db = partitioned_db().await;
    let mut writer = db.connect().await;
    let tx = writer.transaction().await.unwrap();
    let began: DateTime<Utc> = tx.query_one("SELECT now()", &[]).await.unwrap().get(0);
    let early = split_hour_after(&db, began).await;
    let first = emit(&tx, &TestEvent::new("o-1", 1)).await.unwrap();
    past_margin(began).await;

    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    // Before the fix maintenance detached the partition: DETACH CONCURRENTLY waited for the writer,
    // and once it committed its event was out of the relay's sight until attached back, while the
    // aggregate's next event could go first.
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        maintain(&db, Duration::from_millis(300)),
    )
    .await
    .expect("maintenance does not wait on the writer (it is not detaching its partition)");
    assert_eq!((r.waiting, r.dropped), (vec![early.clone()], vec![]));
    tx.commit().await.unwrap();
    let second = emit(&db.connect().await, &TestEvent::new("o-1", 2))
        .await
        .unwrap();
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
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let config = db.config().clone();
    let writer = tokio::spawn(async move {
        let mut client = outbox_tests::db::connect(&config).await;
        let tx = client.transaction().await.unwrap();
        let began: DateTime<Utc> = tx.query_one("SELECT now()", &[]).await.unwrap().get(0);
        began_tx.send(began).unwrap();
        go_rx.await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        tx.rollback().await.unwrap();
        Instant::now()
    });
    let began = began_rx.await.unwrap();
    let early = split_hour_after(&db, began).await;
    past_margin(began).await;
    go_tx.send(()).unwrap();
    let r = maintain(&db, Duration::from_secs(10)).await;
    let returned = Instant::now();
    let ended = writer.await.unwrap();
    assert_eq!(r.dropped, [early], "dropped once the writer ended: {r:?}");
    assert!(r.waiting.is_empty(), "{r:?}");
    assert!(ended <= returned, "it waited for the writer");
}

#[tokio::test]
async fn a_transaction_in_another_database_does_not_hold_retirement_back() {
    let db = partitioned_db().await;
    // A settle time-out too large for the clock is no limit, not a panic.
    assert!(maintain(&db, Duration::MAX).await.waiting.is_empty());
    let other = TestDb::empty().await;
    let mut elsewhere = other.connect().await;
    let tx = elsewhere.transaction().await.unwrap();
    let began: DateTime<Utc> = tx.query_one("SELECT now()", &[]).await.unwrap().get(0);
    let early = split_hour_after(&db, began).await;
    past_margin(began).await;
    assert_eq!(open_transactions(&db).await, 0);
    let r = maintain(&db, Duration::from_millis(300)).await;
    assert_eq!(r.dropped, [early], "{r:?}");
    tx.rollback().await.unwrap();
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
    assert_eq!(
        report.applied,
        [
            "V6__partition_retirement_waits",
            "V7__partition_functions_settings",
            "V8__orphaned_head",
            "V9__partition_owner",
            "V10__published_since",
            "V11__notify_guard"
        ]
    );
    // The trigger the V5-era conversion made gets V11's condition.
    let trigger: String = client
        .query_one(
            "SELECT pg_get_triggerdef(oid) FROM pg_trigger \
              WHERE tgrelid = 'outbox_events'::regclass AND tgname = 'outbox_events_notify'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        trigger.contains("WHEN ((NOT pg_try_advisory_xact_lock_shared(1869968504, 1)))"),
        "{trigger}"
    );
    let r = maintain(&db, Duration::from_secs(5)).await;
    assert_eq!(r.dropped, ["outbox_events_p_head"], "{r:?}");
    let kept: i64 = client
        .query_one("SELECT count(*) FROM outbox_events WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1);
}

/// A run that stopped after detaching a partition and before dropping it left a table no list
/// showed any more (kept for good); the next run finishes it, or attaches it back when it holds a
/// pending event.
#[tokio::test]
async fn a_partition_left_detached_by_an_interrupted_run_is_retired_or_attached_back() {
    let db = partitioned_db().await;
    db.add_old_hours(2..=3, 10).await;
    let names = db.partition_names().await;
    let (pending, published) = (names[0].clone(), names[1].clone());
    db.execute(&format!(
        "UPDATE {pending} SET processed_at = NULL WHERE seq = (SELECT min(seq) FROM {pending});
         ALTER TABLE outbox_events DETACH PARTITION {pending};
         ALTER TABLE outbox_events DETACH PARTITION {published};"
    ))
    .await;
    assert!(!db.partition_names().await.contains(&published));

    let r = maintain(&db, Duration::from_secs(5)).await;
    assert_eq!(r.dropped, std::slice::from_ref(&published), "{r:?}");
    assert_eq!(r.kept.len(), 1, "{r:?}");
    assert_eq!(r.kept[0].name, pending);
    assert!(
        db.partition_names().await.contains(&pending),
        "attached back"
    );
    let gone: bool = db
        .connect()
        .await
        .query_one("SELECT to_regclass($1) IS NULL", &[&published])
        .await
        .unwrap()
        .get(0);
    assert!(gone);
}

/// The head (every row before the first dated partition: a converted backlog) left detached by
/// an interrupted run was never recognised (orphans were found by a dated name): it stayed, and
/// its disk, for good. Found by a black-box run. It is dropped, or attached back while it holds a
/// pending event.
#[tokio::test]
async fn a_head_left_detached_by_an_interrupted_run_is_retired_or_attached_back() {
    for pending in [true, false] {
        let db = TestDb::partitioned(Granularity::Hourly).await;
        let head = "outbox_events_p_head";
        db.execute(&format!(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
             VALUES ('old', '1', 'old.event', '{{}}', '2001-01-01', {});
             ALTER TABLE outbox_events DETACH PARTITION {head};",
            if pending { "NULL" } else { "'2001-01-02'" }
        ))
        .await;
        assert!(!db.partition_names().await.iter().any(|n| n == head));

        let r = maintain(&db, Duration::from_secs(5)).await;
        let exists: bool = db
            .connect()
            .await
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&head])
            .await
            .unwrap()
            .get(0);
        if pending {
            assert_eq!(r.kept.len(), 1, "{r:?}");
            assert_eq!(r.kept[0].name, head);
            assert!(
                db.partition_names().await.iter().any(|n| n == head),
                "attached back"
            );
            assert_eq!(db.pending().await, 1);
        } else {
            assert_eq!(r.dropped, [head], "{r:?}");
            assert!(!exists, "dropped");
        }
    }
}

/// Shutdown does not wait for a housekeeping round: here one that waits (up to its 2 s settle
/// time-out) for a transaction that is still open. It used to finish the round first.
#[tokio::test]
async fn a_relay_stops_without_waiting_for_its_housekeeping_round() {
    let db = partitioned_db().await;
    let mut open = db.connect().await;
    let tx = open.transaction().await.unwrap();
    let began: DateTime<Utc> = tx.query_one("SELECT now()", &[]).await.unwrap().get(0);
    split_hour_after(&db, began).await;
    past_margin(began).await;
    let relay = Relay::builder(db.pool().clone(), Arc::new(RecordingPublisher::new()))
        .retention(Some(Duration::ZERO))
        .build()
        .unwrap();
    let token = outbox_core::CancellationToken::new();
    let running = tokio::spawn({
        let token = token.clone();
        async move { relay.run(token).await }
    });
    tokio::time::sleep(Duration::from_millis(400)).await; // the round is waiting for `tx`
    let cancelled = Instant::now();
    token.cancel();
    running.await.unwrap().unwrap();
    let took = cancelled.elapsed();
    assert!(took < Duration::from_millis(1000), "stopped in {took:?}");
    tx.rollback().await.unwrap();
}

/// A retirement interrupted in the middle of `DETACH … CONCURRENTLY` leaves its partition "detach
/// pending", and while one is, PostgreSQL refuses to detach the tail concurrently ("already
/// pending detach"). Maintenance made its partitions ahead first and failed there on every run,
/// never reaching the retirement that would finish the pending detach. It retires first now.
#[tokio::test]
async fn an_interrupted_retirement_does_not_stop_partitions_being_made_ahead() {
    let db = partitioned_db().await;
    db.add_old_hours(2..=2, 10).await;
    let old = db.partition_names().await[0].clone();
    // The detach's second phase waits for a transaction that holds the table; cut short there.
    let holder = db.connect().await;
    holder
        .batch_execute("BEGIN; SELECT count(*) FROM outbox_events;")
        .await
        .unwrap();
    let detacher = db.connect().await;
    detacher
        .batch_execute("SET statement_timeout = '300ms'")
        .await
        .unwrap();
    let interrupted = detacher
        .batch_execute(&format!(
            "ALTER TABLE outbox_events DETACH PARTITION {old} CONCURRENTLY"
        ))
        .await;
    assert!(
        interrupted
            .as_ref()
            .is_err_and(|e| e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED)),
        "the detach is cut short: {interrupted:?}"
    );
    holder.batch_execute("COMMIT").await.unwrap();
    let pending: bool = db
        .connect()
        .await
        .query_one(
            "SELECT i.inhdetachpending FROM pg_inherits i
               WHERE i.inhrelid = to_regclass($1)",
            &[&old],
        )
        .await
        .unwrap()
        .get(0);
    assert!(pending, "{old} is left detach pending");
    let before = db.partition_names().await.len();
    db.execute(&format!(
        "UPDATE outbox_partitioning SET ahead = {}",
        Granularity::Hourly.default_ahead() + 2
    ))
    .await;

    let r = maintain(&db, Duration::from_secs(5)).await;
    assert_eq!(r.dropped, vec![old], "{r:?}");
    assert_eq!(r.created, 2, "{r:?}");
    assert_eq!(db.partition_names().await.len(), before - 1 + 2);
}
