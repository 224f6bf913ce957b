//! Backlogs of pending events and pool warm-up.

use outbox_tests::TestDb;

use super::*;

/// Inserts `events` pending events (the shape `emit` writes for an `order.placed` event), spread at
/// random (fixed seed) over `aggregates` aggregates, in one statement.
pub async fn add_pending(
    client: &tokio_postgres::Client,
    events: usize,
    aggregates: usize,
) -> Result<()> {
    client.batch_execute("SELECT setseed(0.42)").await?;
    client
        .execute(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
             SELECT 'order', floor(random() * $2::bigint)::bigint::text, 'order.placed',
                    jsonb_build_object('order_id', g, 'customer', 'customer-' || (g % 997),
                                       'total_cents', 1000 + g % 9000)
               FROM generate_series(1, $1::bigint) AS g",
            &[&(events as i64), &(aggregates as i64)],
        )
        .await?;
    Ok(())
}

/// Empties `outbox_events`, fills it with a fresh backlog (see [`add_pending`]) and runs
/// `VACUUM ANALYZE`, so every run starts from the same table.
pub async fn backlog(
    client: &tokio_postgres::Client,
    events: usize,
    aggregates: usize,
) -> Result<()> {
    client
        .batch_execute("TRUNCATE outbox_events RESTART IDENTITY")
        .await?;
    add_pending(client, events, aggregates).await?;
    client.batch_execute("VACUUM ANALYZE outbox_events").await?;
    Ok(())
}

/// How many rows of `outbox_events` are not processed (pending, waiting for a retry or dead).
pub async fn remaining(client: &tokio_postgres::Client) -> Result<u64> {
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM outbox_events WHERE processed_at IS NULL",
            &[],
        )
        .await?
        .get(0);
    Ok(n as u64)
}

/// How many rows of `outbox_events` are marked processed.
pub async fn processed(client: &tokio_postgres::Client) -> Result<u64> {
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM outbox_events WHERE processed_at IS NOT NULL",
            &[],
        )
        .await?
        .get(0);
    Ok(n as u64)
}

/// Opens `n` connections of the pool at once, so that no run pays for connecting.
pub async fn warm_pool(db: &TestDb, n: usize) -> Result<()> {
    let clients = futures::future::try_join_all((0..n).map(|_| db.pool().get())).await?;
    drop(clients);
    Ok(())
}
