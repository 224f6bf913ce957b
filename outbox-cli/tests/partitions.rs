//! `outbox migrate --partitioned`, `outbox partitions maintain | list` and the partition lines of
//! `outbox stats`, end to end against real PostgreSQL.

mod support;

use std::process::{Command, Output};

use outbox_core::emit_all;
use outbox_tests::{TestDb, TestEvent};
use support::commands::{outbox, succeeds};

fn fails(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("outbox runs");
    assert!(!out.status.success(), "{cmd:?} succeeded");
    out
}

#[tokio::test]
async fn migrate_partitioned_converts_and_maintain_retires_what_it_may() {
    let db = TestDb::plain().await;
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(&client, &[TestEvent::new("a", 1), TestEvent::new("b", 1)])
        .await
        .unwrap();
    db.mark_processed(&ids[..1]).await;

    let out = succeeds(outbox(&db.url()).args(["migrate", "--partitioned=hourly", "--ahead", "3"]));
    assert!(
        out.contains("partitioned hourly (3 partitions ahead); moved 1 unpublished events"),
        "{out}"
    );
    // Run again: nothing applied; the conversion's words are not called a migration (it printed
    // "applied already partitioned hourly").
    assert_eq!(
        succeeds(outbox(&db.url()).args(["migrate", "--partitioned=hourly"])).trim(),
        "schema is up to date\noutbox_events: already partitioned hourly"
    );
    let list: serde_json::Value = serde_json::from_str(&succeeds(outbox(&db.url()).args([
        "partitions",
        "list",
        "--json",
    ])))
    .unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        1 + 4 + 1,
        "head, this hour and 3 ahead, tail: {names:?}"
    );
    assert_eq!(
        (names[0], names[5]),
        ("outbox_events_p_head", "outbox_events_p_tail")
    );
    // The partition the unpublished event moved to was never analysed: its estimate is the
    // statistics' count of the rows written to it, never 0 (black-box runs: "0" for 21 875 rows,
    // then "unknown" for thousands); the empty ones are 0 for sure. (The count is there once the
    // converting session's statistics are flushed.)
    let estimates = || -> Vec<serde_json::Value> {
        let list: serde_json::Value = serde_json::from_str(&succeeds(outbox(&db.url()).args([
            "partitions",
            "list",
            "--json",
        ])))
        .unwrap();
        let list = list.as_array().unwrap().iter();
        list.map(|p| p["estimated_rows"].clone()).collect()
    };
    let mut last = Vec::new();
    let counted = outbox_tests::eventually(std::time::Duration::from_secs(10), async || {
        last = estimates();
        last.iter().filter(|e| **e == 1).count() == 1
    })
    .await;
    assert!(counted, "{last:?}");
    assert_eq!(last.iter().filter(|e| **e == 0).count(), 5, "{last:?}");
    let text = succeeds(outbox(&db.url()).args(["partitions", "list"]));
    assert!(!text.contains("unknown"), "{text}");
    assert!(
        text.contains("from (UTC)"),
        "bounds are UTC, and say so: {text}"
    );

    // `cleanup` leaves the conversion's table of published rows to maintenance, and says so.
    let out = succeeds(outbox(&db.url()).args(["cleanup", "--older-than", "0s"]));
    assert!(
        out.contains("outbox_events_legacy, the published rows of the table converted"),
        "{out}"
    );

    // Maintenance without a retention says why the conversion's table stays.
    let out = succeeds(outbox(&db.url()).args(["partitions", "maintain"]));
    assert!(
        out.contains("outbox_events_legacy (the published rows from before the conversion to partitions) stays: --retention drops it"),
        "{out}"
    );

    // An expired partition holding a pending event is kept, and said so.
    let c = db.connect().await;
    c.batch_execute(
        "UPDATE outbox_events SET created_at = date_trunc('hour', now(), 'UTC') - interval '2 hours';
         INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
         VALUES ('old', '1', 'old.event', '{}', date_trunc('hour', now(), 'UTC') - interval '2 hours', now() - interval '1 hour')",
    )
    .await
    .unwrap();
    // (A retention of 0s: the head ends where this hour starts, whatever the minute.)
    let out = succeeds(outbox(&db.url()).args(["partitions", "maintain", "--retention", "0s"]));
    let kept = "kept outbox_events_p_head past the retention: 1 row to keep (pending, dead-lettered, or published within the retention)";
    assert!(out.contains(kept), "{out}");
    assert!(
        out.contains("dropped outbox_events_legacy"),
        "published before: {out}"
    );
    let stats: serde_json::Value =
        serde_json::from_str(&succeeds(outbox(&db.url()).args(["stats", "--json"]))).unwrap();
    assert_eq!(stats["pending"], 1, "{stats}");
    assert_eq!(stats["partitions"]["kept_partitions"], 1, "{stats}");
    assert_eq!(stats["partitions"]["kept_events"], 1, "{stats}");
    assert_eq!(stats["partitions"]["legacy_table"], false, "{stats}");
    let text = succeeds(outbox(&db.url()).arg("stats"));
    assert!(text.contains("kept past retention             1"), "{text}");

    // Published: dropped.
    c.batch_execute("UPDATE outbox_events SET processed_at = now() - interval '1 hour'")
        .await
        .unwrap();
    let out = succeeds(outbox(&db.url()).args(["partitions", "maintain", "--retention", "0s"]));
    assert!(out.contains("dropped outbox_events_p_head"), "{out}");
    let stats: serde_json::Value =
        serde_json::from_str(&succeeds(outbox(&db.url()).args(["stats", "--json"]))).unwrap();
    assert_eq!(stats["partitions"]["kept_partitions"], 0, "{stats}");

    // `--ahead` on a table partitioned before is the new setting (it was ignored in silence);
    // the same figure again changes nothing.
    assert_eq!(
        succeeds(outbox(&db.url()).args(["migrate", "--partitioned=hourly", "--ahead", "5"]))
            .trim(),
        "schema is up to date\noutbox_events: already partitioned hourly; partitions ahead: 3 → 5 \
         (the next maintenance makes them)"
    );
    assert_eq!(
        succeeds(outbox(&db.url()).args(["migrate", "--partitioned=hourly", "--ahead", "5"]))
            .trim(),
        "schema is up to date\noutbox_events: already partitioned hourly"
    );
    let out = succeeds(outbox(&db.url()).args(["partitions", "maintain"]));
    assert!(out.contains("created 2 partitions ahead"), "{out}");

    // A maintenance stopped between the tail's detach and the new tail's is shown (stats said
    // nothing, and `partitions list` only stopped listing the tail), until maintenance mends it.
    let stats = || {
        serde_json::from_str::<serde_json::Value>(&succeeds(
            outbox(&db.url()).args(["stats", "--json"]),
        ))
        .unwrap()
    };
    assert_eq!(stats()["partitions"]["tail_attached"], true);
    db.execute("ALTER TABLE outbox_events DETACH PARTITION outbox_events_p_tail")
        .await;
    assert_eq!(stats()["partitions"]["tail_attached"], false);
    let text = succeeds(outbox(&db.url()).arg("stats"));
    assert!(
        text.contains(
            "tail partition           DETACHED  (rows past the partitions made ahead fail"
        ),
        "{text}"
    );
    succeeds(outbox(&db.url()).args(["partitions", "maintain"]));
    assert_eq!(stats()["partitions"]["tail_attached"], true);
}

#[tokio::test]
async fn partition_commands_refuse_what_they_cannot_do() {
    let db = TestDb::plain().await;
    let out = fails(outbox(&db.url()).args(["migrate", "--partitioned=weekly"]));
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let out = fails(outbox(&db.url()).args(["migrate", "--ahead", "3"]));
    assert_eq!(out.status.code(), Some(2), "--ahead needs --partitioned");
    let out = fails(outbox(&db.url()).args(["partitions", "maintain"]));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not partitioned: run `outbox migrate --partitioned` first")
            && !err.contains("invalid configuration"),
        "{err}"
    );
    let out = fails(outbox(&db.url()).args(["partitions", "list"]));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not partitioned: run `outbox migrate --partitioned` first"),
        "{err}"
    );
    let stats: serde_json::Value =
        serde_json::from_str(&succeeds(outbox(&db.url()).args(["stats", "--json"]))).unwrap();
    assert!(
        stats.get("partitions").is_none(),
        "no partition figures on the plain layout: {stats}"
    );
    // Another granularity than the table's: refused in the product's words, without the
    // server's `ERROR:` in the line (black-box run).
    succeeds(outbox(&db.url()).args(["migrate", "--partitioned=daily"]));
    let out = fails(outbox(&db.url()).args(["migrate", "--partitioned=hourly"]));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "could not partition outbox_events: outbox_events is already partitioned daily; \
             changing to hourly is not supported"
        ) && !err.contains("ERROR"),
        "{err}"
    );
}

/// `partitions maintain` run by a role that does not own the table is refused, even when there is
/// nothing to create yet (it reported success, so a cron job under the wrong role looked healthy
/// until the day it had to create a partition; found by a black-box run). A member of the owning
/// role may.
#[tokio::test]
async fn maintain_by_a_role_that_cannot_do_the_ddl_is_refused_even_with_nothing_to_do() {
    let db = TestDb::partitioned(outbox_core::partition::Granularity::Daily).await;
    succeeds(outbox(&db.url()).args(["partitions", "maintain"]));
    let role = support::RelayRole::create(&db).await;
    db.execute(&format!(
        "GRANT SELECT ON outbox_partitioning TO {}",
        role.name()
    ))
    .await;
    let out = fails(outbox(&role.url(&db)).args(["partitions", "maintain"]));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "role {} may not maintain partitions: their DDL needs the owner of outbox_events, postgres",
            role.name()
        )),
        "{err}"
    );
    let owners = outbox_tests::TestRole::create(&db, "outbox_owners", "").await;
    db.execute(&format!(
        "ALTER TABLE outbox_events OWNER TO {}; GRANT {} TO {}",
        owners.name(),
        owners.name(),
        role.name()
    ))
    .await;
    // The partitions stay the superuser's: the member cannot retire them; refused, naming them,
    // until a superuser's run gives them to the table's owner.
    let out = fails(outbox(&role.url(&db)).args(["partitions", "maintain"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("outbox_events_p_tail (owned by postgres)"),
        "{err}"
    );
    succeeds(outbox(&db.url()).args(["partitions", "maintain"]));
    let out = succeeds(outbox(&role.url(&db)).args(["partitions", "maintain"]));
    assert!(out.contains("created 0 partitions ahead"), "{out}");
}
