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
        .bind(&t2, &1000, &100, &i64::MAX)
        .all()
        .await
        .unwrap();
    assert!(heads.iter().all(|e| !first.contains(&e.id)));
    let by_aggregate = relay::fetch_outbox_heads_by_aggregate()
        .bind(&t2, &Vec::<Uuid>::new(), &100, &i64::MAX)
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
    let marked = relay::mark_outbox_processed()
        .bind(&client, &[ids[0]].as_slice())
        .all()
        .await
        .unwrap();
    assert_eq!(marked, vec![ids[0]]);
    assert_eq!(pending_count(&db).await, 1);
    assert_eq!(claim_all(&db).await, vec![ids[1]]);
    // Marking twice changes nothing.
    let again = relay::mark_outbox_processed()
        .bind(&client, &[ids[0]].as_slice())
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
    relay::record_outbox_failures()
        .bind(
            &client,
            &[id].as_slice(),
            &["throttled"].as_slice(),
            &[0.6].as_slice(),
            &[false].as_slice(),
            &[true].as_slice(),
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

#[tokio::test]
async fn dead_letters_show_in_the_view_are_never_claimed_and_retry_resets_them() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("a", 1),
            TestEvent::new("a", 2),
            TestEvent::new("b", 1),
        ],
    )
    .await
    .unwrap();
    relay::record_outbox_failures()
        .bind(
            &client,
            &[ids[0]].as_slice(),
            &["rejected"].as_slice(),
            &[0.0].as_slice(),
            &[true].as_slice(),
            &[true].as_slice(),
        )
        .all()
        .await
        .unwrap();
    let dead = admin::list_dead_letters()
        .bind(
            &client,
            &None::<Vec<uuid::Uuid>>,
            &None::<&str>,
            &None::<&str>,
            &None::<&str>,
            &10,
        )
        .all()
        .await
        .unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id, ids[0]);
    assert_eq!(dead[0].last_error.as_deref(), Some("rejected"));
    assert_eq!(
        claim_all(&db).await,
        vec![ids[1], ids[2]],
        "the dead event is never claimed"
    );

    // Per-aggregate claim: the dead event blocks its aggregate only.
    let mut c = db.pool().get().await.unwrap();
    let tx = c.transaction().await.unwrap();
    let heads: Vec<Uuid> = relay::fetch_outbox_heads()
        .bind(&tx, &1000, &10, &i64::MAX)
        .all()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(heads, vec![ids[2]]);
    let by_aggregate: Vec<Uuid> = relay::fetch_outbox_heads_by_aggregate()
        .bind(&tx, &Vec::<Uuid>::new(), &10, &i64::MAX)
        .all()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(by_aggregate, vec![ids[2]], "the slow path agrees");
    tx.rollback().await.unwrap();

    // Filters select what to retry.
    let none = admin::retry_dead_letters()
        .bind(
            &client,
            &None::<Vec<Uuid>>,
            &Some("other.type"),
            &None::<&str>,
            &None::<&str>,
        )
        .all()
        .await
        .unwrap();
    assert!(none.is_empty());
    let retried = admin::retry_dead_letters()
        .bind(
            &client,
            &Some(vec![ids[0]]),
            &None::<&str>,
            &None::<&str>,
            &None::<&str>,
        )
        .all()
        .await
        .unwrap();
    assert_eq!(retried, vec![ids[0]]);
    let row = admin::get_outbox_event()
        .bind(&client, &ids[0])
        .one()
        .await
        .unwrap();
    assert_eq!(
        (row.attempts, row.dead_lettered_at, row.retry_after),
        (0, None, None)
    );
    assert!(claim_all(&db).await.contains(&ids[0]));
}

#[tokio::test]
async fn purge_deletes_only_matching_dead_letters() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("a", 1),
            TestEvent::new("b", 1),
            TestEvent::new("c", 1),
        ],
    )
    .await
    .unwrap();
    db.dead_letter(&[ids[0], ids[1]], "x").await;
    let purged = admin::purge_dead_letters()
        .bind(
            &client,
            &None::<Vec<Uuid>>,
            &None::<&str>,
            &None::<&str>,
            &Some("b"),
        )
        .all()
        .await
        .unwrap();
    assert_eq!(purged, vec![ids[1]]);
    assert!(
        admin::get_outbox_event()
            .bind(&client, &ids[0])
            .opt()
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        admin::get_outbox_event()
            .bind(&client, &ids[2])
            .opt()
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn cleanup_deletes_only_processed_rows_older_than_the_interval() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("a", 1),
            TestEvent::new("b", 1),
            TestEvent::new("c", 1),
            TestEvent::new("d", 1),
        ],
    )
    .await
    .unwrap();
    db.mark_processed(&[ids[0]]).await;
    db.dead_letter(&[ids[3]], "dead").await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    db.mark_processed(&[ids[1]]).await;
    let deleted = outbox_core::cleanup(&client, Duration::from_millis(1000))
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    let exists = |id| {
        let client = &client;
        async move {
            admin::get_outbox_event()
                .bind(client, &id)
                .opt()
                .await
                .unwrap()
                .is_some()
        }
    };
    assert!(!exists(ids[0]).await, "old processed row deleted");
    assert!(exists(ids[1]).await, "recent processed row kept");
    assert!(exists(ids[2]).await, "pending row kept");
    assert!(exists(ids[3]).await, "dead letter kept");
}

#[tokio::test]
async fn stats_report_the_state_of_the_table() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("a", 1),
            TestEvent::new("a", 2),
            TestEvent::new("b", 1),
            TestEvent::new("c", 1),
            TestEvent::new("d", 1),
        ],
    )
    .await
    .unwrap();
    db.mark_processed(&[ids[4]]).await;
    db.dead_letter(&[ids[0]], "dead").await;
    db.fail(&[ids[2]], "later", 60.0).await;
    let s = admin::outbox_stats().bind(&client).one().await.unwrap();
    assert_eq!(s.pending, 3, "a/2, b/1 (waiting), c/1");
    assert_eq!(s.due_now, 2);
    assert_eq!(s.waiting_retry, 1);
    assert_eq!(s.dead_letters, 1);
    assert_eq!(s.blocked_aggregates, 1);
    assert_eq!(s.published_last_hour, 1);
    assert!(s.oldest_pending_age_secs.unwrap() >= 0.0);
}
