//! The ordered claim's slow path (the first unpublished event of every aggregate) stays linear in
//! the number of aggregates whatever the planner believes about the table. Found by benchmark 10:
//! with statistics taken while nothing was pending (the usual state of a relay that keeps up), the
//! planner joined the aggregates' first events to the pending rows as a nested loop that compared
//! every pending row with every first event — a claim took a minute with 20 000 aggregates.

use outbox_queries::queries::relay;
use outbox_tests::TestDb;

/// Pending events, one per aggregate (each its own head).
const AGGREGATES: i64 = 2_000;

/// The sum of a plan tree's `key` over all nodes.
fn sum(plan: &serde_json::Value, key: &str) -> f64 {
    let own = plan.get(key).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let children = plan
        .get("Plans")
        .and_then(|p| p.as_array())
        .map_or(0.0, |ps| ps.iter().map(|p| sum(p, key)).sum());
    own + children
}

#[tokio::test]
async fn the_slow_path_probes_each_first_event_once_even_with_stale_statistics() {
    let db = TestDb::new().await;
    let client = db.connect().await;
    // Statistics from a moment with published history and nothing pending.
    client
        .batch_execute(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
             SELECT 'order', (g % 1000)::text, 'order.placed', '{}', now() FROM generate_series(1, 20000) g;
             ANALYZE outbox_events;",
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
             SELECT 'order', 'new-' || g, 'order.placed', '{}' FROM generate_series(1, $1::bigint) g",
            &[&AGGREGATES],
        )
        .await
        .unwrap();

    // The statement exactly as the relay prepares it, then run under EXPLAIN ANALYZE.
    // (Kept alive: dropping it closes the statement.)
    let _prepared = relay::fetch_outbox_heads_by_aggregate()
        .prepare(&client)
        .await
        .unwrap();
    let text: String = client
        .query_one(
            "SELECT statement FROM pg_prepared_statements
              WHERE statement LIKE '%RECURSIVE firsts%'
                AND statement NOT LIKE '%pg_prepared_statements%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    client
        .batch_execute(&format!("PREPARE slow_path AS {text}"))
        .await
        .unwrap();
    let explained: serde_json::Value = client
        .query_one(
            "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE slow_path(-9223372036854775808, '{}', 100, 10000000)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let plan = &explained[0]["Plan"];
    let claimed = plan["Actual Rows"].as_f64().unwrap_or(0.0);
    assert_eq!(claimed, 100.0, "a full batch of heads: {plan:#}");
    let compared = sum(plan, "Rows Removed by Join Filter");
    assert!(
        compared < AGGREGATES as f64,
        "{compared} rows compared and thrown away by a join filter (quadratic): {plan:#}"
    );
}
