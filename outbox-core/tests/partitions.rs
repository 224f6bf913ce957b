//! The partitioned layout: conversion of a plain table, partitions created ahead, the tail drained,
//! expired partitions dropped unless they hold a pending event or a dead letter, one maintainer at a
//! time, and all of it while relays and writers run.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::partition::{self, Granularity, MaintainOptions, MaintenanceReport};
use outbox_core::{Relay, emit};
use outbox_tests::interleaved::{Interleaving, order_violations, seqs, write_interleaved};
use outbox_tests::{RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually};
use uuid::Uuid;

/// Hourly partitions made ahead by default.
const AHEAD: u32 = 12;

async fn maintain(db: &TestDb, retention: Option<Duration>) -> MaintenanceReport {
    db.maintain(&MaintainOptions::new().retention(retention))
        .await
}

#[tokio::test]
async fn converting_a_plain_table_moves_unpublished_rows_and_keeps_published_ones_for_retention() {
    let db = TestDb::plain().await;
    let client = db.pool().get().await.unwrap();
    let mut ids = Vec::new();
    for n in 1..=6 {
        let event = TestEvent::new(format!("conv-{n}"), n);
        ids.push(emit(&client, &event).await.unwrap());
    }
    db.mark_processed(&ids[..3]).await;
    db.dead_letter(&ids[3..4], "poison").await;
    let reader_role = outbox_tests::TestRole::create(&db, "outbox_conv_reader", "").await;
    let reader = reader_role.name();
    db.execute(&format!(
        "GRANT SELECT ON outbox_events, outbox_dead_letters TO {reader};
         GRANT UPDATE (processed_at) ON outbox_events TO {reader};"
    ))
    .await;
    let before: Vec<(Uuid, i64)> = seqs(db.pool())
        .await
        .into_iter()
        .map(|(id, (_, s))| (id, s))
        .collect();

    let mut c = db.connect().await;
    let report = partition::migrate_partitioned(&mut c, Granularity::Daily, Some(2))
        .await
        .unwrap();
    assert!(
        report
            .applied
            .last()
            .unwrap()
            .contains("moved 3 unpublished events"),
        "{report:?}"
    );
    assert_eq!(
        partition::layout(&c).await.unwrap(),
        Some(Granularity::Daily)
    );
    // Again: nothing to do; another granularity: refused.
    partition::migrate_partitioned(&mut c, Granularity::Daily, None)
        .await
        .unwrap();
    assert!(
        partition::migrate_partitioned(&mut c, Granularity::Hourly, None)
            .await
            .is_err()
    );

    // The dead letter and the two pending events moved with their ids and seq; the published rows
    // stayed behind.
    let after = seqs(db.pool()).await;
    assert_eq!(after.len(), 3);
    for (id, seq) in before.iter().filter(|(id, _)| !ids[..3].contains(id)) {
        assert_eq!(after[id].1, *seq, "seq kept");
    }
    let dead = outbox_core::list_dead_letters(&client, &Default::default(), 10)
        .await
        .unwrap();
    assert_eq!(dead.len(), 1);
    let grants: bool = c
        .query_one("SELECT has_column_privilege($1, 'outbox_events', 'processed_at', 'UPDATE') AND has_table_privilege($1, 'outbox_dead_letters', 'SELECT')", &[&reader])
        .await
        .unwrap()
        .get(0);
    assert!(grants, "the plain table's grants carried over");
    // `seq` continues after the plain table's.
    let next = emit(&client, &TestEvent::new("conv", 7)).await.unwrap();
    assert!(seqs(db.pool()).await[&next].1 > before.iter().map(|b| b.1).max().unwrap());
    assert_eq!(
        db.partition_names().await,
        ["outbox_events_p_head", "", "", "", "outbox_events_p_tail"]
            .iter()
            .enumerate()
            .map(|(i, n)| if n.is_empty() {
                names_at(i)
            } else {
                n.to_string()
            })
            .collect::<Vec<_>>()
    );

    // The relay publishes the moved events, in order; the legacy table goes once past retention.
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .build()
        .unwrap();
    while relay.run_once().await.unwrap().published > 0 {}
    assert_eq!(publisher.ids(), vec![ids[4], ids[5], next]);
    // Published in the last hour: the rows left in the legacy table count too (they dropped out
    // of `outbox stats` for up to an hour after a conversion).
    let published = outbox_core::stats(&client)
        .await
        .unwrap()
        .published_last_hour;
    assert_eq!(published, 6, "3 before the conversion, 3 after");
    let stats = partition::partition_stats(&c).await.unwrap().unwrap();
    assert!(stats.legacy_table);
    let r = maintain(&db, Some(Duration::from_secs(3600))).await;
    assert!(
        !r.legacy_dropped,
        "published less than the retention ago: kept"
    );
    let logs = outbox_tests::LogCapture::default();
    let guard = logs.install();
    let r = maintain(&db, Some(Duration::ZERO)).await;
    drop(guard);
    assert!(r.legacy_dropped, "{r:?}");
    // Logged, as a partition's drop is (a relay dropped it without a word: black-box run).
    assert!(
        logs.text().contains(
            "dropped outbox_events_legacy (the rows from before the conversion to partitions"
        ),
        "{}",
        logs.text()
    );
    assert!(
        !partition::partition_stats(&c)
            .await
            .unwrap()
            .unwrap()
            .legacy_table
    );
}

/// The names of the daily partitions of today and the next two days.
fn names_at(i: usize) -> String {
    let day = chrono::Utc::now().date_naive() + chrono::Days::new(i as u64 - 1);
    format!("outbox_events_p{}", day.format("%Y%m%d"))
}

#[tokio::test]
async fn maintenance_creates_partitions_ahead_and_drains_the_tail() {
    let db = TestDb::partitioned(Granularity::Hourly).await;
    assert_eq!(Granularity::Hourly.default_ahead(), AHEAD);
    let first = db.partition_names().await;
    assert_eq!(
        first.len(),
        AHEAD as usize + 1 + 2,
        "head, this hour and the ones ahead, tail: {first:?}"
    );
    assert_eq!(maintain(&db, None).await.created, 0, "nothing to do");

    db.execute(&format!(
        "UPDATE outbox_partitioning SET ahead = {}",
        AHEAD + 4
    ))
    .await;
    let r = maintain(&db, None).await;
    assert_eq!(r.created, 4, "{r:?}");
    assert_eq!(r.drained, 0);
    assert_eq!(db.partition_names().await.len(), first.len() + 4);

    // A row beyond every partition (maintenance "down" for days) lands in the tail: the insert never
    // fails. Maintenance moves it into a partition of its own, keeping its id and seq.
    let client = db.pool().get().await.unwrap();
    let row = client
        .query_one(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
             VALUES ('late', '1', 'late.event', '{}', now() + interval '5 days')
             RETURNING id, seq, tableoid::regclass::text",
            &[],
        )
        .await
        .unwrap();
    let (id, seq, table): (Uuid, i64, String) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(table, "outbox_events_p_tail");
    let stats = partition::partition_stats(&client).await.unwrap().unwrap();
    assert_eq!(stats.tail_events, 1);
    // A row dated past the partitions maintenance wants stays in the tail (V7: no partition per
    // period up to a row far ahead)...
    assert_eq!(maintain(&db, None).await.drained, 0);
    // ...and is drained once they reach it: the time of a maintenance outage, here stood in for by
    // more partitions ahead.
    db.execute(&format!(
        "UPDATE outbox_partitioning SET ahead = {}",
        5 * 24 + 2
    ))
    .await;
    let r = maintain(&db, None).await;
    assert_eq!(r.drained, 1, "{r:?}");
    assert!(r.created >= 5 * 24 - (AHEAD + 4), "{r:?}");
    let row = client
        .query_one(
            "SELECT seq, tableoid::regclass::text FROM outbox_events WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), seq);
    assert_ne!(row.get::<_, String>(1), "outbox_events_p_tail");
    assert_eq!(
        partition::partition_stats(&client)
            .await
            .unwrap()
            .unwrap()
            .tail_events,
        0
    );
    assert_eq!(db.pending().await, 1, "still pending, not lost");
}

#[tokio::test]
async fn a_pending_event_or_a_dead_letter_keeps_an_expired_partition() {
    let db = TestDb::partitioned(Granularity::Hourly).await;
    // The empty head ends where this hour starts: dropped.
    let r = maintain(&db, Some(Duration::ZERO)).await;
    assert_eq!(r.dropped, ["outbox_events_p_head"], "{r:?}");
    db.add_old_hours(2..=4, 100).await;
    let client = db.pool().get().await.unwrap();
    let ids: Vec<Uuid> = client
        .query(
            "UPDATE outbox_events SET processed_at = NULL
              WHERE seq IN (SELECT min(seq) FROM outbox_events GROUP BY date_trunc('hour', created_at)
                             ORDER BY 1 LIMIT 2)
             RETURNING id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids.len(), 2);
    db.dead_letter(&ids[..1], "poison").await;

    let r = maintain(&db, Some(Duration::from_secs(600))).await;
    assert_eq!(r.dropped.len(), 1, "the partition with nothing left: {r:?}");
    assert_eq!(r.kept.len(), 2, "{r:?}");
    assert!(r.kept.iter().all(|k| k.leftovers == 1));
    // Both kept for a pending event or a dead letter: a warning each run.
    assert!(r.kept.iter().all(|k| k.unpublished == 1), "{r:?}");
    let stats = partition::partition_stats(&client).await.unwrap().unwrap();
    assert_eq!((stats.kept_partitions, stats.kept_events), (2, 2));

    // Published (and the dead letter purged) longer ago than the retention: dropped.
    outbox_core::purge_dead_letter_ids(&client, &ids[..1])
        .await
        .unwrap();
    db.mark_processed(&ids[1..]).await;
    let r = maintain(&db, Some(Duration::from_secs(600))).await;
    assert_eq!(
        r.dropped.len(),
        1,
        "the purged dead letter's partition: {r:?}"
    );
    assert_eq!(
        r.kept.len(),
        1,
        "published just now: kept for the retention: {r:?}"
    );
    // Kept only for a row published within the retention: no warning (black-box run: one a
    // minute after every conversion with a backlog, until the retention passed).
    assert_eq!(r.kept[0].unpublished, 0, "{r:?}");
    let r = maintain(&db, Some(Duration::ZERO)).await;
    assert_eq!(r.dropped.len(), 1, "{r:?}");
    assert_eq!(
        partition::partition_stats(&client)
            .await
            .unwrap()
            .unwrap()
            .kept_partitions,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_maintainers_do_the_work_once() {
    let db = TestDb::partitioned(Granularity::Hourly).await;
    maintain(&db, Some(Duration::ZERO)).await; // the head
    db.add_old_hours(2..=4, 10).await;
    db.execute(&format!(
        "UPDATE outbox_partitioning SET ahead = {}",
        AHEAD + 5
    ))
    .await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let client = db.connect().await;
        tasks.push(tokio::spawn(async move {
            let options = MaintainOptions::new().retention(Some(Duration::from_secs(600)));
            partition::maintain(&client, &options).await
        }));
    }
    let mut created = 0;
    let mut dropped = Vec::new();
    for t in tasks {
        let r = t.await.unwrap().expect("no maintainer fails");
        created += r.created;
        dropped.extend(r.dropped);
    }
    assert_eq!(created, 5);
    dropped.sort();
    assert_eq!(dropped.len(), 3, "each partition dropped once: {dropped:?}");
    dropped.dedup();
    assert_eq!(dropped.len(), 3);
}

/// 4 relays and 4 writers run while maintenance creates partitions (detaching the tail concurrently)
/// and drops expired ones: nothing lost, nothing published twice, per-aggregate order kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn maintenance_under_load_loses_nothing_and_keeps_order() {
    let db = TestDb::partitioned(Granularity::Hourly).await;
    maintain(&db, Some(Duration::ZERO)).await; // the head
    db.add_old_hours(2..=7, 500).await;
    // A pending event in an old partition: it blocks that partition's drop until it is published.
    db.execute(
        "UPDATE outbox_events SET processed_at = NULL, aggregate_id = 'blocker'
               WHERE seq = (SELECT min(seq) FROM outbox_events)",
    )
    .await;
    let r = maintain(&db, Some(Duration::from_secs(600))).await;
    assert_eq!((r.dropped.len(), r.kept.len()), (5, 1), "{r:?}");
    let blocked = r.kept[0].name.clone();

    let publisher = Arc::new(RecordingPublisher::new());
    let relays: Vec<RunningRelay> = (0..4)
        .map(|_| {
            let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
                .listen(db.config().clone())
                .batch_size(50)
                .concurrency(2)
                .poll_interval(Duration::from_millis(100))
                .build()
                .unwrap();
            RunningRelay::start(&relay)
        })
        .collect();
    let stop = outbox_core::CancellationToken::new();
    let maintainer = tokio::spawn({
        let (stop, db_config) = (stop.clone(), db.config().clone());
        async move {
            let (client, connection) = db_config.connect(tokio_postgres::NoTls).await.unwrap();
            tokio::spawn(connection);
            let (mut created, mut dropped) = (0, 0);
            while !stop.is_cancelled() {
                client
                    .batch_execute("UPDATE outbox_partitioning SET ahead = ahead + 1")
                    .await
                    .unwrap();
                let options = MaintainOptions::new().retention(Some(Duration::from_secs(600)));
                let r = partition::maintain(&client, &options)
                    .await
                    .expect("maintenance under load");
                created += r.created;
                dropped += r.dropped.len();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (created, dropped)
        }
    });
    let shape = Interleaving {
        writers: 4,
        aggregates: 10,
        events: 4_000,
        rollback_rate: 0.1,
        max_pause: Duration::from_millis(3),
    };
    let writes = write_interleaved(db.pool(), "agg", shape).await;
    assert!(
        eventually(Duration::from_secs(120), async || db.pending().await == 0).await,
        "the relays did not drain the outbox"
    );
    stop.cancel();
    let (created, dropped) = maintainer.await.unwrap();
    for r in relays {
        r.stop().await;
    }
    let published = publisher.ids();
    let distinct: HashSet<_> = published.iter().copied().collect();
    let committed: HashSet<_> = writes.committed.iter().copied().collect();
    let lost = committed.difference(&distinct).count();
    let violations = order_violations(&published, &seqs(db.pool()).await);
    // The blocker is published now: its partition goes once that is past the retention.
    let r = maintain(&db, Some(Duration::ZERO)).await;
    assert!(r.dropped.contains(&blocked), "{r:?}");
    eprintln!(
        "partitions under load: events={} published={} lost={lost} duplicates={} \
         order_violations={violations} partitions_created={created} dropped={dropped}",
        committed.len(),
        published.len(),
        published.len() - distinct.len()
    );
    assert!(created >= 3, "partitions were created under load");
    assert_eq!(
        dropped, 0,
        "the blocked partition is kept while its event is recent"
    );
    assert_eq!(
        (lost, published.len() - distinct.len(), violations),
        (0, 0, 0)
    );
    assert_eq!(
        distinct.len(),
        committed.len() + 1,
        "the writes and the blocker"
    );
    assert!(writes.rolled_back.iter().all(|id| !distinct.contains(id)));
}

/// The relay runs maintenance (with its retention) on the partitioned layout: partitions created
/// ahead, expired ones dropped.
#[tokio::test]
async fn the_relay_maintains_partitions() {
    let db = TestDb::partitioned(Granularity::Hourly).await;
    maintain(&db, Some(Duration::ZERO)).await; // the head
    db.add_old_hours(2..=3, 10).await;
    db.execute(&format!(
        "UPDATE outbox_partitioning SET ahead = {}",
        AHEAD + 2
    ))
    .await;
    let before = db.partition_names().await;
    let old_hours = before[..2].to_vec();
    let relay = Relay::builder(db.pool().clone(), Arc::new(RecordingPublisher::new()))
        .retention(Some(Duration::from_secs(600)))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let done = eventually(Duration::from_secs(10), async || {
        let now = db.partition_names().await;
        // Two created ahead, the two old hours dropped.
        now.len() == before.len() && !now.iter().any(|n| old_hours.contains(n))
    })
    .await;
    running.stop().await;
    let names = db.partition_names().await;
    assert!(
        done,
        "two created ahead, two old dropped: {before:?} → {names:?}"
    );
    let client = db.connect().await;
    let old: i64 = client
        .query_one(
            "SELECT count(*) FROM outbox_events WHERE event_type = 'old.event'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(old, 0);
}

/// Converting while a relay and writers run: writers and the relay wait for the conversion's lock
/// and carry on against the partitioned table; nothing is lost or published twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn converting_under_a_running_relay_and_writers_loses_nothing() {
    let db = TestDb::plain().await;
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .listen(db.config().clone())
        .poll_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let pool = db.pool().clone();
            tokio::spawn(async move {
                let client = pool.get().await.unwrap();
                let mut ids = Vec::new();
                for n in 0..600 {
                    let event = TestEvent::new(format!("conv-{w}-{}", n % 5), n);
                    ids.push(emit(&client, &event).await.unwrap());
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                ids
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut c = db.connect().await;
    partition::migrate_partitioned(&mut c, Granularity::Daily, None)
        .await
        .unwrap();
    let mut written = Vec::new();
    for w in writers {
        written.extend(w.await.unwrap());
    }
    assert!(
        eventually(Duration::from_secs(30), async || db.pending().await == 0).await,
        "the relay drained the partitioned table"
    );
    running.stop().await;
    let legacy_pending: i64 = c
        .query_one(
            "SELECT count(*) FROM outbox_events_legacy WHERE processed_at IS NULL",
            &[],
        )
        .await
        .map_or(0, |r| r.get(0));
    assert_eq!(legacy_pending, 0, "no event stranded in the plain table");
    let published = publisher.ids();
    let distinct: HashSet<_> = published.iter().copied().collect();
    assert_eq!(published.len(), distinct.len(), "published once");
    assert!(
        written.iter().all(|id| distinct.contains(id)),
        "nothing lost"
    );
    // Order across the conversion: the published rows left in the plain table count too.
    let mut all = seqs(db.pool()).await;
    if let Ok(rows) = c
        .query(
            "SELECT id, aggregate_id, seq FROM outbox_events_legacy",
            &[],
        )
        .await
    {
        all.extend(rows.iter().map(|r| (r.get(0), (r.get(1), r.get(2)))));
    }
    assert_eq!(
        all.len(),
        written.len(),
        "every event in one table or the other"
    );
    assert_eq!(order_violations(&published, &all), 0, "per-aggregate order");
}

/// A tail drain that waits too long for its lock (a transaction reading the table: pg_dump, a
/// report) fails saying so, and that the next run tries again: it said only "canceling statement
/// due to lock timeout" (found by a black-box run). Nothing is moved meanwhile.
#[tokio::test]
async fn a_tail_drain_timed_out_on_its_lock_says_so_and_moves_nothing() {
    let db = TestDb::partitioned(Granularity::Hourly).await;
    maintain(&db, None).await;
    db.execute(&format!(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
         VALUES ('late', '1', 'late.event', '{{}}', now() + interval '2 days');
         UPDATE outbox_partitioning SET ahead = {}",
        3 * 24
    ))
    .await;
    let mut reader = db.connect().await;
    let tx = reader.transaction().await.unwrap();
    tx.query_one("SELECT count(*) FROM outbox_events", &[])
        .await
        .unwrap();
    let client = db.connect().await;
    let options = MaintainOptions::new().drain_lock_timeout(Duration::from_millis(200));
    let e = partition::maintain(&client, &options)
        .await
        .expect_err("the reader holds the tail");
    let text = e.to_string();
    assert!(text.contains("draining the tail partition"), "{text}");
    assert!(text.contains("next run tries again"), "{text}");
    tx.rollback().await.unwrap();
    let stats = partition::partition_stats(&client).await.unwrap().unwrap();
    assert_eq!(stats.tail_events, 1, "nothing moved");
    assert_eq!(
        maintain(&db, None).await.drained,
        1,
        "the next run drains it"
    );
}

/// Claims lock every partition and its indexes: with a thousand partitions ahead (accepted), a
/// few relay workers filled the server's lock table and their claims failed with "out of shared
/// memory" (found by a black-box run). Maintenance says so while the count is too high.
#[tokio::test]
async fn too_many_partitions_for_the_lock_table_are_warned_about() {
    let db = TestDb::partitioned(Granularity::Hourly).await;
    let r = maintain(&db, None).await;
    assert_eq!(r.lock_warning, None, "the default fits: {r:?}");
    db.execute("UPDATE outbox_partitioning SET ahead = 200")
        .await;
    let r = maintain(&db, None).await;
    let warning = r.lock_warning.expect("200 hourly partitions ahead");
    assert!(warning.contains("max_locks_per_transaction"), "{warning}");
    assert!(warning.contains("out of shared memory"), "{warning}");
}
