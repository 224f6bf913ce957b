//! The operator queries against a real PostgreSQL: dead letters (view, retry, purge), cleanup and
//! stats. (The NOTIFY trigger: `wakeups.rs`.)

use std::time::Duration;

use outbox_core::emit_all;
use outbox_queries::queries::{admin, relay};
use outbox_tests::{TestDb, TestEvent};
use uuid::Uuid;

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
    let created_at = db.event(ids[0]).await.created_at;
    relay::record_outbox_failures()
        .bind(
            &client,
            &[ids[0]].as_slice(),
            &[created_at].as_slice(),
            &["rejected"].as_slice(),
            &[0.0].as_slice(),
            &[true].as_slice(),
            &[true].as_slice(),
            &created_at,
            &created_at,
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
        .bind(&tx, &1000, &Vec::<i64>::new(), &10, &1, &0, &i64::MAX)
        .all()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(heads, vec![ids[2]]);
    let by_aggregate: Vec<Uuid> = relay::fetch_outbox_heads_by_aggregate()
        .bind(&tx, &i64::MIN, &Vec::<Uuid>::new(), &10, &i64::MAX)
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

/// On the partitioned layout the primary key is (id, created_at): an id can name two rows. Cleanup
/// deletes the old published one only (it used to match by id and delete the pending one too).
#[tokio::test]
async fn cleanup_on_the_partitioned_layout_never_deletes_a_pending_row_sharing_an_id() {
    let db = TestDb::partitioned(outbox_core::partition::Granularity::Daily).await;
    let client = db.pool().get().await.unwrap();
    let id = Uuid::now_v7();
    client
        .execute(
            "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload,
                                        created_at, processed_at, dead_lettered_at)
             VALUES ($1, 'a', 'old', 'e', '{}', now() - interval '9 days', now() - interval '9 days', NULL),
                    ($1, 'a', 'pending', 'e', '{}', now(), NULL, NULL),
                    ($1, 'a', 'dead', 'e', '{}', now() - interval '1 minute', NULL, now())",
            &[&id],
        )
        .await
        .unwrap();
    let deleted = outbox_core::cleanup(&client, Duration::from_secs(7 * 86_400))
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    let left: Vec<String> = client
        .query(
            "SELECT aggregate_id FROM outbox_events WHERE id = $1 ORDER BY 1",
            &[&id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(left, ["dead", "pending"]);
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
            TestEvent::new("b", 2),
        ],
    )
    .await
    .unwrap();
    db.mark_processed(&[ids[4]]).await;
    db.dead_letter(&[ids[0]], "dead").await;
    db.fail(&[ids[2]], "later", 60.0).await;
    let s = admin::outbox_stats().bind(&client).one().await.unwrap();
    assert_eq!(s.pending, 4, "a/2, b/1 (waiting), c/1, b/2");
    // a/2 is behind a/1, dead; b/2 behind b/1, waiting for its retry: held back, not due (they
    // read "due now 2", then "due now 2" with only a/2 held back).
    assert_eq!((s.due_now, s.held_back), (1, 2));
    assert_eq!(s.waiting_retry, 1);
    assert_eq!(s.dead_letters, 1);
    assert_eq!(s.blocked_aggregates, 1);
    assert_eq!(s.published_last_hour, 1);
    assert!(s.oldest_pending_age_secs.unwrap() >= 0.0);
}
