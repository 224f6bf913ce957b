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

/// Prepares, as `name`, the text of the statement the client prepared that contains `marker`: the
/// relay's statement exactly as cornucopia generated it, for `EXPLAIN ANALYZE EXECUTE name(…)`.
async fn prepare_as(client: &tokio_postgres::Client, name: &str, marker: &str) {
    let text: String = client
        .query_one(
            "SELECT statement FROM pg_prepared_statements
              WHERE strpos(statement, $1) > 0
                AND statement NOT LIKE '%pg_prepared_statements%'",
            &[&marker],
        )
        .await
        .unwrap()
        .get(0);
    client
        .batch_execute(&format!("PREPARE {name} AS {text}"))
        .await
        .unwrap();
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
    prepare_as(&client, "slow_path", "RECURSIVE firsts").await;
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

/// The followers of a batch's heads are read through each aggregate's own index range: a head with
/// few followers costs a few rows, not a walk through the whole backlog behind it. With statistics
/// that show few aggregates, the planner prefers walking the pending index from the head's `seq`
/// when the statement lets it (measured: 50 000 rows read and thrown away for one quiet head behind
/// 100 000 pending events of 10 hot aggregates).
#[tokio::test]
async fn followers_are_read_per_aggregate_even_when_statistics_show_few_aggregates() {
    let db = TestDb::new().await;
    let client = db.connect().await;
    client
        .batch_execute(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
             VALUES ('order', 'quiet', 'order.placed', '{}');
             INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
             SELECT 'order', (g % 10)::text, 'order.placed', '{}' FROM generate_series(1, 50000) g;
             ANALYZE outbox_events;",
        )
        .await
        .unwrap();
    let heads: Vec<i64> = client
        .query(
            "SELECT min(seq) FROM outbox_events WHERE aggregate_id IN ('0', 'quiet')
              GROUP BY aggregate_id ORDER BY aggregate_id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();

    let _prepared = relay::fetch_outbox_followers()
        .prepare(&client)
        .await
        .unwrap();
    prepare_as(&client, "followers", "AS rank").await;
    // The custom plan and the generic one the relay's prepared statement settles on.
    for mode in ["force_custom_plan", "force_generic_plan"] {
        client
            .batch_execute(&format!("SET plan_cache_mode = {mode}"))
            .await
            .unwrap();
        let explained: serde_json::Value = client
            .query_one(
                &format!(
                    "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE followers(
                        '{{order,order}}', '{{0,quiet}}', '{{{},{}}}', 98, 10000000)",
                    heads[0], heads[1]
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let plan = &explained[0]["Plan"];
        assert_eq!(
            plan["Actual Rows"].as_f64(),
            Some(98.0),
            "{mode}: 98 followers of the hot head: {plan:#}"
        );
        let thrown = sum(plan, "Rows Removed by Filter") + sum(plan, "Rows Removed by Join Filter");
        assert!(
            thrown < 1_000.0,
            "{mode}: {thrown} rows read and thrown away: {plan:#}"
        );
    }
}
