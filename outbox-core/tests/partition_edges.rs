//! The conversion to the partitioned layout and maintenance under settings of the caller's own:
//! grants to PUBLIC, a session's time zone and date style, a long transaction on the table.

use std::time::{Duration, Instant};

use outbox_core::ErrorKind;
use outbox_core::partition::{self, Granularity, MaintainOptions};
use outbox_tests::TestDb;
use outbox_tests::db::connect;

/// Every bounded partition's name (its start, UTC) against its lower bound, read in a session set
/// to UTC and ISO: the names of those that disagree.
async fn misnamed(db: &TestDb) -> Vec<String> {
    let client = db.connect().await;
    client
        .batch_execute("SET timezone = 'UTC'; SET datestyle = 'ISO, YMD'")
        .await
        .unwrap();
    let rows = client
        .query(
            "SELECT name, outbox_partition_name(lo, (SELECT granularity FROM outbox_partitioning))
               FROM outbox_partition_list()
              WHERE lo IS NOT NULL AND name NOT IN ('outbox_events_p_head', 'outbox_events_p_tail')",
            &[],
        )
        .await
        .unwrap();
    assert!(rows.len() > 10, "the partitions ahead are there");
    rows.iter()
        .filter(|r| r.get::<_, String>(0) != r.get::<_, String>(1))
        .map(|r| {
            format!(
                "{} starts at {}",
                r.get::<_, String>(0),
                r.get::<_, String>(1)
            )
        })
        .collect()
}

/// A session whose time zone prints as an abbreviation that parses back as another zone (IST:
/// India's +05:30 printed, Israel's +02 read) converts and maintains with the right bounds. The
/// partition functions turned bounds into text and back in the session's settings: shifted by
/// 3.5 hours, every partition's range disagreed with its name.
#[tokio::test]
async fn a_session_time_zone_and_date_style_do_not_shift_partition_bounds() {
    let db = TestDb::plain().await;
    let mut config = db.config().clone();
    config.options("-c TimeZone=Asia/Kolkata -c DateStyle=Postgres");
    let mut client = connect(&config).await;
    partition::migrate_partitioned(&mut client, Granularity::Hourly, None)
        .await
        .expect("the conversion applies");
    client
        .batch_execute("UPDATE outbox_partitioning SET ahead = 16")
        .await
        .unwrap();
    let report = partition::maintain(&client, &MaintainOptions::new())
        .await
        .expect("maintenance runs");
    assert!(!report.skipped);
    assert_eq!(misnamed(&db).await, Vec::<String>::new());
}

/// A grant to PUBLIC (on the dead-letter view, say) is carried over by the conversion. It made
/// the conversion fail: `role "PUBLIC" does not exist`.
#[tokio::test]
async fn a_grant_to_public_survives_the_conversion() {
    let db = TestDb::plain().await;
    let mut client = db.connect().await;
    client
        .batch_execute("GRANT SELECT ON outbox_dead_letters TO PUBLIC")
        .await
        .unwrap();
    partition::migrate_partitioned(&mut client, Granularity::Daily, None)
        .await
        .expect("the conversion applies");
    let public: bool = client
        .query_one(
            "SELECT has_table_privilege('public', 'outbox_dead_letters', 'SELECT')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(public);
}

/// A transaction that holds the table (here one idle in a transaction that read it) makes the
/// conversion give up after 5 s with nothing changed, instead of queueing every writer behind its
/// exclusive lock for as long as that transaction lasts; it applies once the table is free.
#[tokio::test]
async fn the_conversion_waits_at_most_5_s_for_its_lock() {
    let db = TestDb::plain().await;
    let holder = db.connect().await;
    holder
        .batch_execute("BEGIN; SELECT count(*) FROM outbox_events;")
        .await
        .unwrap();
    let mut client = db.connect().await;
    let started = Instant::now();
    let refused = tokio::time::timeout(
        Duration::from_secs(30),
        partition::migrate_partitioned(&mut client, Granularity::Daily, None),
    )
    .await
    .expect("the conversion does not wait for the transaction to end")
    .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(refused.kind(), ErrorKind::Migration);
    assert!(refused.to_string().contains("run it again"), "{refused}");
    assert_eq!(
        partition::layout(&client).await.unwrap(),
        None,
        "still plain"
    );

    holder.batch_execute("COMMIT").await.unwrap();
    partition::migrate_partitioned(&mut client, Granularity::Daily, None)
        .await
        .expect("the conversion applies once the table is free");
}

/// A row dated far past the partitions made ahead (written by hand, or by a clock far ahead)
/// stays in the tail. The drain made one partition per period up to it — 720 hourly partitions
/// for a month ahead, under the exclusive lock, until the lock table ran out — and counted it as
/// rows to drain on every later run.
#[tokio::test]
async fn a_row_dated_far_ahead_stays_in_the_tail_without_a_partition_per_period() {
    let db = TestDb::partitioned(Granularity::Hourly).await;
    db.execute(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
         VALUES ('order', 'o-1', 'order.test', '{}', now() + interval '30 days')",
    )
    .await;
    let before = db.partition_names().await.len();
    let first = db.maintain(&MaintainOptions::new()).await;
    let second = db.maintain(&MaintainOptions::new()).await;
    let after = db.partition_names().await.len();
    assert!(
        after <= before + 2,
        "{before} partitions, then {after}: {first:?}"
    );
    assert_eq!(second.drained, 0, "not drained again: {second:?}");
    // The next period (one more partition ahead stands in for it): carved concurrently, the row
    // kept in the tail, not drained under the exclusive lock.
    db.execute(&format!(
        "UPDATE outbox_partitioning SET ahead = {}",
        Granularity::Hourly.default_ahead() + 1
    ))
    .await;
    let next = db.maintain(&MaintainOptions::new()).await;
    assert_eq!((next.created, next.drained), (1, 0), "{next:?}");
    let after = db.partition_names().await.len();
    let kept: i64 = db
        .connect()
        .await
        .query_one("SELECT count(*) FROM outbox_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1, "the row is kept");
    let stats = outbox_core::stats(&db.connect().await).await.unwrap();
    assert_eq!(
        stats.oldest_pending_age_secs,
        Some(0.0),
        "a row dated ahead is not of a negative age"
    );
    assert_eq!(after, db.partition_names().await.len());
}

/// Retirement that fails on every run (here a view of the operator's on the table the conversion
/// left behind keeps its drop from succeeding) does not stop partitions being made ahead: writers
/// need them, retirement can wait. The error is still returned.
#[tokio::test]
async fn a_failing_retirement_does_not_stop_partitions_being_made_ahead() {
    let db = TestDb::plain().await;
    db.execute(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
         VALUES ('order', 'o-1', 'order.test', '{}', now() - interval '1 hour');
         CREATE VIEW report_published AS SELECT id FROM outbox_events WHERE processed_at IS NOT NULL;",
    )
    .await;
    let mut client = db.connect().await;
    partition::migrate_partitioned(&mut client, Granularity::Hourly, None)
        .await
        .expect("the conversion applies");
    db.execute(&format!(
        "UPDATE outbox_partitioning SET ahead = {}",
        Granularity::Hourly.default_ahead() + 1
    ))
    .await;
    let periods = async || {
        let names = db.partition_names().await;
        names.iter().filter(|n| !n.ends_with("_head")).count()
    };
    let before = periods().await;
    let options = MaintainOptions::new().retention(Some(Duration::ZERO));
    let failed = partition::maintain(&client, &options).await;
    let failed = failed.expect_err("the legacy table's drop fails");
    assert!(
        outbox_core::error_chain(&failed).contains("outbox_events_legacy"),
        "{failed}"
    );
    assert_eq!(
        periods().await,
        before + 1,
        "the partition ahead is made all the same"
    );
}

/// A transaction that holds the table (a long report, pg_dump) no longer makes maintenance detach
/// the tail concurrently: the detach waited for it, with the tail "detach pending" all along —
/// taking no row dated at or after its start — and the run stuck. Maintenance now leaves the tail
/// for a later run, and carves it once the transaction has ended.
#[tokio::test]
async fn a_long_transaction_on_the_table_leaves_the_tail_attached() {
    let db = TestDb::partitioned(Granularity::Hourly).await;
    let holder = db.connect().await;
    holder
        .batch_execute("BEGIN; SELECT count(*) FROM outbox_events;")
        .await
        .unwrap();
    db.execute(&format!(
        "UPDATE outbox_partitioning SET ahead = {}",
        Granularity::Hourly.default_ahead() + 1
    ))
    .await;
    let client = db.connect().await;
    let options = MaintainOptions::new().settle_timeout(Duration::from_millis(300));
    let left = tokio::time::timeout(
        Duration::from_secs(10),
        partition::maintain(&client, &options),
    )
    .await
    .expect("maintenance does not wait for the transaction")
    .expect("maintenance runs");
    assert_eq!(left.created, 0, "{left:?}");
    let pending: i64 = client
        .query_one(
            "SELECT count(*) FROM outbox_partition_list() WHERE detach_pending",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(pending, 0, "no partition is left detach pending");

    holder.batch_execute("COMMIT").await.unwrap();
    let carved = partition::maintain(&client, &options).await.unwrap();
    assert_eq!(carved.created, 1, "{carved:?}");
}

/// A row written before V6 with a created_at the relay cannot read (`'infinity'`, here on both
/// layouts) failed every claim as the oldest pending row: the relay published nothing. V7
/// dead-letters it with the reason, dates it within the readable range and validates V6's check.
#[tokio::test]
async fn an_unreadable_created_at_from_before_v6_is_dead_lettered_and_the_relay_runs() {
    for partitioned in [false, true] {
        let db = TestDb::empty().await;
        let mut client = db.connect().await;
        outbox_core::migrate_up_to(&mut client, 5).await.unwrap();
        if partitioned {
            client
                .batch_execute("SELECT outbox_partitions_convert('hourly', 12)")
                .await
                .unwrap();
        }
        client
            .batch_execute(
                "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
                 VALUES ('order', 'o-1', 'order.test', '{}', 'infinity'),
                        ('order', 'o-2', 'order.test', '{}', now())",
            )
            .await
            .unwrap();
        outbox_core::migrate(&mut client).await.unwrap();
        let publisher = std::sync::Arc::new(outbox_tests::RecordingPublisher::new());
        let relay = outbox_core::Relay::builder(db.pool().clone(), publisher.clone())
            .build()
            .unwrap();
        let report = relay.run_once().await.expect("the claim reads every row");
        assert_eq!(report.published, 1, "partitioned: {partitioned}");
        let row = client
            .query_one(
                "SELECT last_error, dead_lettered_at IS NOT NULL FROM outbox_events
                  WHERE aggregate_id = 'o-1'",
                &[],
            )
            .await
            .unwrap();
        let (error, dead): (String, bool) = (row.get(0), row.get(1));
        assert!(dead, "partitioned: {partitioned}");
        assert!(error.contains("created_at infinity"), "{error}");
        let validated: bool = client
            .query_one(
                "SELECT bool_and(convalidated) FROM pg_constraint
                  WHERE conname = 'outbox_events_created_at_in_range'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert!(validated, "partitioned: {partitioned}");
    }
}

/// A drain counts the rows it moved into partitions, not those it put back into the tail (dated
/// past the partitions made ahead): a black-box run's drain that moved one row of two said "moved 2".
#[tokio::test]
async fn a_drain_counts_only_the_rows_it_moved_out_of_the_tail() {
    let db = TestDb::partitioned(Granularity::Daily).await;
    // Both in the tail: one that more partitions ahead will hold, one far past them.
    db.execute(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
         VALUES ('order', 'o-1', 'order.test', '{}', now() + interval '20 days'),
                ('order', 'o-2', 'order.test', '{}', '9999-12-31 23:00+00')",
    )
    .await;
    db.execute("UPDATE outbox_partitioning SET ahead = 25")
        .await;
    let report = db.maintain(&MaintainOptions::new()).await;
    assert_eq!(report.drained, 1, "{report:?}");
    let tail: i64 = db
        .connect()
        .await
        .query_one("SELECT count(*) FROM outbox_events_p_tail", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(tail, 1, "the row far ahead stays in the tail");
}
