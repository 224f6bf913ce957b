//! The relay's housekeeping across a change of layout.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::Relay;
use outbox_core::partition::Granularity;
use outbox_tests::{RecordingPublisher, RunningRelay, TestDb, TestEvent, TestRole, eventually};

/// Relays started on the plain layout, which is then converted under them (`outbox migrate
/// --partitioned`, as the README allows), maintain the partitions: here they create the two more
/// partitions ahead that the setting asks for. Before, a relay that found the plain layout without
/// a retention stopped its housekeeping for good: nobody created partitions ahead, and within
/// `ahead` periods every new row went to the tail, drained later under an exclusive lock.
#[tokio::test]
async fn relays_started_before_the_conversion_maintain_the_partitions_after_it() {
    let db = TestDb::plain().await;
    let relay = Relay::builder(db.pool().clone(), Arc::new(RecordingPublisher::new()))
        .housekeeping_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    // The relay's first round finds the plain layout.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut client = db.connect().await;
    outbox_core::partition::migrate_partitioned(&mut client, Granularity::Hourly, None)
        .await
        .expect("the conversion applies");
    let before = db.partition_names().await;
    db.execute(&format!(
        "UPDATE outbox_partitioning SET ahead = {}",
        Granularity::Hourly.default_ahead() + 2
    ))
    .await;
    let converted_at: chrono::DateTime<chrono::Utc> =
        client.query_one("SELECT now()", &[]).await.unwrap().get(0);
    let grown = eventually(Duration::from_secs(10), async || {
        db.partition_names().await.len() == before.len() + 2
    })
    .await;
    running.stop().await;
    assert!(
        grown,
        "two more partitions ahead: {before:?} → {:?}",
        db.partition_names().await
    );
    // `stats` says when maintenance last ran, retention or not (black-box run: the relay's runs
    // without a retention left `maintained_at` at the last `partitions maintain --retention`,
    // or empty for good, useless to alert on a maintenance that stopped).
    let stats = outbox_core::partition::partition_stats(&client)
        .await
        .unwrap()
        .expect("partitioned");
    assert!(
        stats.maintained_at.is_some_and(|t| t > converted_at),
        "{:?} after {converted_at}",
        stats.maintained_at
    );
}

/// Whether `db` comes to have a partition not in `before` within 10 s.
async fn partition_made(db: &TestDb, before: &[String]) -> bool {
    eventually(Duration::from_secs(10), async || {
        db.partition_names()
            .await
            .iter()
            .any(|p| !before.contains(p))
    })
    .await
}

/// A pool of `db` whose connections log in as `role`.
fn pool_as(db: &TestDb, role: &str) -> deadpool_postgres::Pool {
    let mut config = db.config().clone();
    config.user(role);
    let manager = deadpool_postgres::Manager::from_config(
        config,
        tokio_postgres::NoTls,
        deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        },
    );
    deadpool_postgres::Pool::builder(manager)
        .max_size(4)
        .build()
        .unwrap()
}

/// A relay whose role owned `outbox_events` when it started maintains the partitions; when the
/// table changes owner under it, maintenance is refused and the relay deletes old rows instead
/// (it kept trying maintenance, refused every round, and retention never ran); given the table
/// back, it maintains the partitions again.
#[tokio::test]
async fn a_relay_refused_maintenance_deletes_rows_and_maintains_again_once_it_may() {
    let db = TestDb::partitioned(Granularity::Daily).await;
    // Both roles go with the test (the relay's was left on the server by every run).
    let relay_role = TestRole::create(&db, "outbox_hk", "LOGIN").await;
    let owners_role = TestRole::create(&db, "outbox_hk_owners", "").await;
    let (role, owners) = (relay_role.name(), owners_role.name());
    db.give_tables_to(role).await;
    let relay = Relay::builder(pool_as(&db, role), Arc::new(RecordingPublisher::new()))
        .housekeeping_interval(Duration::from_millis(200))
        .retention(Some(Duration::from_secs(3600)))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let before = db.partition_names().await;
    db.execute("UPDATE outbox_partitioning SET ahead = ahead + 1")
        .await;
    assert!(
        partition_made(&db, &before).await,
        "the owner's relay maintains"
    );

    // The table changes owner; the relay keeps its grants. Published two hours ago: past the
    // retention, in a partition that is not (the current day's).
    db.execute(&format!(
        "ALTER TABLE outbox_events OWNER TO {owners};
         GRANT SELECT, UPDATE, DELETE ON outbox_events TO {role}"
    ))
    .await;
    let client = db.connect().await;
    let ids = outbox_core::emit_all(&client, &[TestEvent::new("a", 1), TestEvent::new("b", 1)])
        .await
        .unwrap();
    db.execute(&format!(
        "UPDATE outbox_events SET processed_at = now() - interval '2 hours' WHERE id IN ('{}', '{}')",
        ids[0], ids[1]
    ))
    .await;
    let deleted = eventually(Duration::from_secs(10), async || {
        db.connect()
            .await
            .query_one("SELECT count(*) FROM outbox_events", &[])
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 0
    })
    .await;

    db.execute(&format!("ALTER TABLE outbox_events OWNER TO {role}"))
        .await;
    let before = db.partition_names().await;
    db.execute("UPDATE outbox_partitioning SET ahead = ahead + 1")
        .await;
    let maintains_again = partition_made(&db, &before).await;
    running.stop().await;
    assert!(deleted, "retention deleted the old rows while refused");
    assert!(
        maintains_again,
        "maintenance is back once the relay's role owns the table"
    );
}
