//! The schema and every generated query, against a real PostgreSQL.

use std::time::Duration;

use outbox_core::{emit, emit_all};
use outbox_queries::queries::{admin, relay};
use outbox_tests::{TestDb, TestEvent};
use uuid::Uuid;

async fn pending_count(db: &TestDb) -> i64 {
    let client = db.pool().get().await.unwrap();
    admin::outbox_pending_count()
        .bind(&client)
        .one()
        .await
        .unwrap()
}

async fn claim_all(db: &TestDb) -> Vec<Uuid> {
    let mut client = db.pool().get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let ids = relay::fetch_outbox_batch()
        .bind(&tx, &1000, &i64::MAX)
        .all()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    tx.rollback().await.unwrap();
    ids
}

#[tokio::test]
async fn migrations_apply_to_an_empty_database_and_a_second_run_changes_nothing() {
    let db = TestDb::empty().await;
    let mut client = db.connect().await;
    let first = outbox_core::migrate(&mut client).await.unwrap();
    assert_eq!(first.applied, migration_names());
    let second = outbox_core::migrate(&mut client).await.unwrap();
    assert!(second.applied.is_empty(), "{second:?}");
    // The schema is usable.
    assert_eq!(
        admin::outbox_pending_count()
            .bind(&client)
            .one()
            .await
            .unwrap(),
        0
    );
}

/// The migrations hold a few characters beyond ASCII (in comments): a LATIN1 database refused them
/// ("has no equivalent in encoding LATIN1") and `outbox migrate` failed on V4. They apply now, and
/// the caller's connection gets its client encoding back.
#[tokio::test]
async fn migrations_apply_to_a_latin1_database_and_a_multi_byte_one_is_refused_by_name() {
    let db = TestDb::empty_in("LATIN1").await;
    let mut client = db.connect().await;
    let first = outbox_core::migrate(&mut client).await.unwrap();
    assert_eq!(first.applied, migration_names());
    let encoding: String = client
        .query_one("SHOW client_encoding", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(encoding, "UTF8", "reset after the migrations");
    let id = emit(&client, &TestEvent::new("caf\u{e9}", 1))
        .await
        .unwrap();
    assert_eq!(db.event(id).await.aggregate_id, "caf\u{e9}");

    let db = TestDb::empty_in("EUC_JP").await;
    let mut client = db.connect().await;
    let refused = outbox_core::migrate(&mut client).await.unwrap_err();
    assert_eq!(refused.kind(), outbox_core::ErrorKind::Migration);
    assert!(refused.to_string().contains("EUC_JP"), "{refused}");
}

#[tokio::test]
async fn concurrent_migrations_are_serialised() {
    let db = TestDb::empty().await;
    let mut a = db.connect().await;
    let mut b = db.connect().await;
    let (ra, rb) = tokio::join!(outbox_core::migrate(&mut a), outbox_core::migrate(&mut b));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(
        ra.applied.len() + rb.applied.len(),
        migration_names().len(),
        "each applied once: {ra:?} {rb:?}"
    );
}

/// The names of the files in `migrations/`, in version order (`V1__outbox_events`, …).
fn migration_names() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations");
    let mut names: Vec<(u32, String)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".sql")?.to_owned();
            let version = stem.strip_prefix('V')?.split("__").next()?.parse().ok()?;
            Some((version, stem))
        })
        .collect();
    names.sort();
    names.into_iter().map(|(_, n)| n).collect()
}

#[tokio::test]
async fn committed_event_is_stored_and_rolled_back_one_is_not() {
    let db = TestDb::new().await;
    let mut client = db.pool().get().await.unwrap();

    let tx = client.transaction().await.unwrap();
    let rolled_back = emit(&tx, &TestEvent::new("o-1", 1)).await.unwrap();
    tx.rollback().await.unwrap();

    let tx = client.transaction().await.unwrap();
    let committed = emit(&tx, &TestEvent::new("o-2", 1)).await.unwrap();
    tx.commit().await.unwrap();

    let row = admin::get_outbox_event()
        .bind(&client, &committed)
        .opt()
        .await
        .unwrap();
    let row = row.expect("the committed event is in the outbox");
    assert_eq!(row.aggregate_type, "order");
    assert_eq!(row.aggregate_id, "o-2");
    assert_eq!(row.event_type, "order.test");
    assert_eq!(
        row.payload,
        serde_json::json!({"order_id": "o-2", "n": 1, "note": ""})
    );
    assert_eq!(row.metadata, serde_json::json!({}));
    assert_eq!(row.attempts, 0);
    assert!(row.processed_at.is_none() && row.dead_lettered_at.is_none());
    let gone = admin::get_outbox_event()
        .bind(&client, &rolled_back)
        .opt()
        .await
        .unwrap();
    assert!(gone.is_none(), "a rolled-back event leaves no row");
    assert_eq!(claim_all(&db).await, vec![committed]);
}

#[tokio::test]
async fn batch_insert_returns_ids_in_order_with_increasing_seq() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..50)
        .map(|n| TestEvent::new(format!("o-{}", n % 7), n))
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();
    assert_eq!(ids.len(), 50);
    let mut last_seq = 0;
    for (id, event) in ids.iter().zip(&events) {
        let row = admin::get_outbox_event()
            .bind(&client, id)
            .one()
            .await
            .unwrap();
        assert_eq!(
            row.payload["n"], event.n,
            "ids come back in the order of the input"
        );
        assert!(row.seq > last_seq);
        last_seq = row.seq;
    }
    assert!(
        emit_all::<_, TestEvent, _>(&client, [])
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn concurrent_claims_with_skip_locked_get_disjoint_rows() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..10)
        .map(|n| TestEvent::new(format!("o-{n}"), n))
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();

    let mut c1 = db.pool().get().await.unwrap();
    let mut c2 = db.pool().get().await.unwrap();
    let t1 = c1.transaction().await.unwrap();
    let t2 = c2.transaction().await.unwrap();
    let first: Vec<Uuid> = relay::fetch_outbox_batch()
        .bind(&t1, &6, &i64::MAX)
        .all()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let second: Vec<Uuid> = relay::fetch_outbox_batch()
        .bind(&t2, &100, &i64::MAX)
        .all()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(first, ids[..6].to_vec(), "oldest first, by seq");
    assert_eq!(
        second,
        ids[6..].to_vec(),
        "the other claim skips the locked rows"
    );
    // Heads (per-aggregate claim) skip locked rows too.
    let heads = relay::fetch_outbox_heads()
        .bind(&t2, &1000, &Vec::<i64>::new(), &100, &1, &0, &i64::MAX)
        .all()
        .await
        .unwrap();
    assert!(heads.iter().all(|e| !first.contains(&e.id)));
    let by_aggregate = relay::fetch_outbox_heads_by_aggregate()
        .bind(&t2, &i64::MIN, &Vec::<Uuid>::new(), &100, &i64::MAX)
        .all()
        .await
        .unwrap();
    assert!(by_aggregate.iter().all(|e| !first.contains(&e.id)));
}

#[tokio::test]
async fn marked_processed_is_never_claimed_again_and_pending_drops() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(&client, &[TestEvent::new("a", 1), TestEvent::new("b", 1)])
        .await
        .unwrap();
    assert_eq!(pending_count(&db).await, 2);
    let created_at = db.event(ids[0]).await.created_at;
    // The creation-time bounds are part of the match: a range that misses the row marks nothing.
    let missed = relay::mark_outbox_processed()
        .bind(
            &client,
            &[ids[0]].as_slice(),
            &(created_at + chrono::Duration::microseconds(1)),
            &(created_at + chrono::Duration::seconds(1)),
        )
        .all()
        .await
        .unwrap();
    assert!(missed.is_empty());
    let marked = relay::mark_outbox_processed()
        .bind(&client, &[ids[0]].as_slice(), &created_at, &created_at)
        .all()
        .await
        .unwrap();
    assert_eq!(marked, vec![ids[0]]);
    assert_eq!(pending_count(&db).await, 1);
    assert_eq!(claim_all(&db).await, vec![ids[1]]);
    // Marking twice changes nothing.
    let again = relay::mark_outbox_processed()
        .bind(&client, &[ids[0]].as_slice(), &created_at, &created_at)
        .all()
        .await
        .unwrap();
    assert!(again.is_empty());
}

#[tokio::test]
async fn recorded_failure_waits_for_retry_after_then_is_claimable() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let id = emit(&client, &TestEvent::new("a", 1)).await.unwrap();
    let created_at = db.event(id).await.created_at;
    relay::record_outbox_failures()
        .bind(
            &client,
            &[id].as_slice(),
            &[created_at].as_slice(),
            &["throttled"].as_slice(),
            &[0.6].as_slice(),
            &[false].as_slice(),
            &[true].as_slice(),
            &created_at,
            &created_at,
        )
        .all()
        .await
        .unwrap();
    let row = admin::get_outbox_event()
        .bind(&client, &id)
        .one()
        .await
        .unwrap();
    assert_eq!(row.attempts, 1);
    assert_eq!(row.last_error.as_deref(), Some("throttled"));
    assert!(row.waiting_for_retry);
    let wait = row.retry_after.unwrap() - row.created_at;
    assert!(
        wait.num_milliseconds() >= 500,
        "retry_after is now() + the delay: {wait:?}"
    );
    assert!(
        claim_all(&db).await.is_empty(),
        "not claimable before retry_after"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        claim_all(&db).await,
        vec![id],
        "claimable after retry_after"
    );
}

/// The heads claim leaves out the heads the relay's own in-flight batches hold (`held`, without
/// touching their rows), and a claim's `slot` decides where among the window's heads it starts.
#[tokio::test]
async fn the_heads_claim_leaves_out_held_heads_and_starts_at_its_slot() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    // 8 aggregates, one event each: 8 heads, seqs in emit order.
    let events: Vec<TestEvent> = (0..8)
        .map(|n| TestEvent::new(format!("o-{n}"), n))
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();
    let seqs: Vec<i64> = {
        let mut seqs = Vec::new();
        for id in &ids {
            seqs.push(db.event(*id).await.seq);
        }
        seqs
    };
    let heads = |held: Vec<i64>, batch: i64, workers: i64, slot: i64| {
        let pool = db.pool().clone();
        async move {
            let mut c = pool.get().await.unwrap();
            let tx = c.transaction().await.unwrap();
            relay::fetch_outbox_heads()
                .bind(&tx, &1000, &held, &batch, &workers, &slot, &i64::MAX)
                .all()
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.id)
                .collect::<Vec<Uuid>>()
        }
    };
    // Nothing held, one worker: every head, oldest first.
    assert_eq!(heads(Vec::new(), 100, 1, 0).await, ids);
    // Held heads are left out although nothing locks them here.
    let left: Vec<Uuid> = ids
        .iter()
        .copied()
        .filter(|id| *id != ids[1] && *id != ids[4])
        .collect();
    assert_eq!(heads(vec![seqs[1], seqs[4]], 100, 1, 0).await, left);
    // 4 workers sharing a window of 8 heads (the window holds fewer events than 4 full batches of
    // 2): a batch of 2 from slot 0 takes the two oldest, from slot 2 the fifth and sixth.
    assert_eq!(heads(Vec::new(), 2, 4, 0).await, ids[..2].to_vec());
    assert_eq!(heads(Vec::new(), 2, 4, 2).await, ids[4..6].to_vec());
    // Slot 3 starts at the seventh head and wraps around past the last one.
    let mut wrapped = heads(Vec::new(), 3, 4, 3).await;
    wrapped.sort_by_key(|id| ids.iter().position(|i| i == id));
    assert_eq!(wrapped, vec![ids[0], ids[6], ids[7]]);
}

/// A `created_at` the relay cannot read (`infinity`, or a year past what a chrono timestamp holds)
/// is refused at write: as the oldest pending row it failed every claim and stalled the relay.
#[tokio::test]
async fn a_created_at_the_relay_cannot_read_is_refused_on_both_layouts() {
    for db in [
        TestDb::plain().await,
        TestDb::partitioned(outbox_core::partition::Granularity::Daily).await,
    ] {
        let client = db.connect().await;
        for at in ["infinity", "-infinity", "290000-01-01 00:00:00+00"] {
            let e = client
                .execute(
                    "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
                     VALUES ('order', 'o-1', 'order.created', '{}', $1::text::timestamptz)",
                    &[&at],
                )
                .await
                .expect_err(at);
            assert_eq!(
                e.code(),
                Some(&tokio_postgres::error::SqlState::CHECK_VIOLATION),
                "{at}: {e:?}"
            );
        }
        emit(&client, &TestEvent::new("o-1", 1)).await.unwrap();
        assert_eq!(claim_all(&db).await.len(), 1);
    }
}

/// Migrations from V7 on are ASCII: a database in a one-byte encoding takes the schema's SQL with
/// the client encoding at SQL_ASCII, which stores bytes unchecked — a character beyond ASCII in a
/// function's body would be stored as whatever those bytes mean in that encoding.
#[test]
fn migrations_from_v7_on_are_ascii() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let version: u32 = name
            .strip_prefix('V')
            .and_then(|n| n.split("__").next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("a migration's name: {name}"));
        if version >= 7 {
            let sql = std::fs::read_to_string(&path).unwrap();
            assert!(sql.is_ascii(), "{name} holds characters beyond ASCII");
            checked += 1;
        }
    }
    assert!(checked >= 1);
}
