//! The relay's acknowledgements on the partitioned layout touch only the partitions that hold the
//! acknowledged rows (issue 19): `mark_outbox_processed` and `record_outbox_failures` take the rows'
//! creation times, so PostgreSQL prunes the other partitions — with the generic plan of the
//! prepared statement, which the relay's cached statements settle on (no planning per batch).

use chrono::{DateTime, Utc};
use outbox_core::emit_all;
use outbox_core::partition::{self, Granularity};
use outbox_queries::queries::relay;
use outbox_tests::{TestDb, TestEvent};
use uuid::Uuid;

/// Partitions made ahead: with the head, the current one and the tail, 33 partitions.
const AHEAD: u32 = 30;

/// A daily partitioned database with [`AHEAD`] partitions ahead and `n` events emitted now (all in
/// today's partition), with their creation times.
async fn partitioned_with_events(n: usize) -> (TestDb, Vec<(Uuid, DateTime<Utc>)>) {
    let db = TestDb::empty().await;
    let mut client = db.connect().await;
    partition::migrate_partitioned(&mut client, Granularity::Daily, Some(AHEAD))
        .await
        .expect("the partitioned layout applies");
    let partitions = db.partition_names().await;
    assert!(partitions.len() > AHEAD as usize, "{partitions:?}");
    let events: Vec<TestEvent> = (0..n).map(|i| TestEvent::new(format!("a{i}"), 1)).collect();
    let ids = emit_all(&client, &events).await.expect("emit");
    let mut rows = Vec::with_capacity(n);
    for id in ids {
        rows.push((id, db.event(id).await.created_at));
    }
    (db, rows)
}

/// The partitions of `outbox_events` this transaction has scanned so far (sequential or index).
async fn partitions_scanned(tx: &tokio_postgres::Transaction<'_>) -> Vec<String> {
    tx.query(
        "SELECT relname::text FROM pg_stat_xact_user_tables
          WHERE relname LIKE 'outbox_events_p%' AND seq_scan + coalesce(idx_scan, 0) > 0
          ORDER BY relname",
        &[],
    )
    .await
    .expect("read the transaction's table statistics")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// How often the prepared statement whose text starts with `prefix` was run with its generic plan
/// and with a custom plan, in this session.
async fn plans(tx: &tokio_postgres::Transaction<'_>, prefix: &str) -> (i64, i64) {
    let row = tx
        .query_one(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements
              WHERE starts_with(statement, $1)",
            &[&prefix],
        )
        .await
        .expect("the statement is prepared in this session");
    (row.get(0), row.get(1))
}

fn bounds(rows: &[(Uuid, DateTime<Utc>)]) -> (DateTime<Utc>, DateTime<Utc>) {
    let times = rows.iter().map(|r| r.1);
    (
        times.clone().min().expect("rows"),
        times.max().expect("rows"),
    )
}

/// Acknowledgements per test: more than the 5 custom plans PostgreSQL tries before it may settle
/// on the generic plan.
const ROUNDS: usize = 8;

#[tokio::test]
async fn marking_published_events_touches_only_their_partition_with_the_generic_plan() {
    let (db, rows) = partitioned_with_events(ROUNDS * 10).await;
    let mut client = db.connect().await;
    let tx = client.transaction().await.expect("begin");
    // Prepared once, run once per batch, as the relay's cached statement is.
    let stmt = relay::mark_outbox_processed()
        .prepare(&tx)
        .await
        .expect("prepare");
    for batch in rows.chunks(10) {
        let ids: Vec<Uuid> = batch.iter().map(|r| r.0).collect();
        let (oldest, newest) = bounds(batch);
        let marked = stmt
            .bind(&tx, &ids, &oldest, &newest)
            .all()
            .await
            .expect("mark");
        assert_eq!(marked.len(), ids.len());
    }
    let scanned = partitions_scanned(&tx).await;
    assert_eq!(
        scanned.len(),
        1,
        "only today's partition may be scanned, not the other {AHEAD}+: {scanned:?}"
    );
    let (generic, custom) = plans(&tx, "UPDATE outbox_events SET processed_at").await;
    assert!(
        generic >= 1,
        "the statement must settle on its generic plan, not be planned at every acknowledgement \
         (generic {generic}, custom {custom})"
    );
    tx.commit().await.expect("commit");
    assert_eq!(db.pending().await, 0);
}

#[tokio::test]
async fn recording_failures_and_dead_letters_touches_only_their_partition_with_the_generic_plan() {
    let (db, rows) = partitioned_with_events(ROUNDS * 4).await;
    let mut client = db.connect().await;
    let tx = client.transaction().await.expect("begin");
    let stmt = relay::record_outbox_failures()
        .prepare(&tx)
        .await
        .expect("prepare");
    for batch in rows.chunks(4) {
        let ids: Vec<Uuid> = batch.iter().map(|r| r.0).collect();
        let created_ats: Vec<DateTime<Utc>> = batch.iter().map(|r| r.1).collect();
        let (oldest, newest) = bounds(batch);
        let n = batch.len();
        // Half retried, half dead-lettered.
        let dead: Vec<bool> = (0..n).map(|i| i % 2 == 0).collect();
        let recorded = stmt
            .bind(
                &tx,
                &ids,
                &created_ats,
                &vec!["broker said no"; n],
                &vec![60.0; n],
                &dead,
                &vec![true; n],
                &oldest,
                &newest,
            )
            .all()
            .await
            .expect("record failures");
        assert_eq!(recorded.len(), n);
    }
    let scanned = partitions_scanned(&tx).await;
    assert_eq!(
        scanned.len(),
        1,
        "only today's partition may be scanned, not the other {AHEAD}+: {scanned:?}"
    );
    let (generic, custom) = plans(&tx, "UPDATE outbox_events e SET attempts").await;
    assert!(
        generic >= 1,
        "the statement must settle on its generic plan (generic {generic}, custom {custom})"
    );
    tx.commit().await.expect("commit");
    for (i, (id, _)) in rows.iter().enumerate() {
        let e = db.event(*id).await;
        assert_eq!(e.attempts, 1);
        assert_eq!(e.dead_lettered_at.is_some(), i % 4 % 2 == 0, "{id}");
    }
}
