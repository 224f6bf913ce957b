//! Waiting for the outbox to drain, and reading what was processed.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use outbox_queries::queries::admin;
use uuid::Uuid;

/// Pending events (not processed, not dead).
pub async fn pending(pool: &deadpool_postgres::Pool) -> i64 {
    let client = pool.get().await.unwrap();
    admin::outbox_pending_count()
        .bind(&client)
        .one()
        .await
        .unwrap()
}

/// Waits until nothing is pending; panics with `context` after `timeout`.
pub async fn wait_drained(pool: &deadpool_postgres::Pool, timeout: Duration, context: &str) {
    wait_pending(pool, 0, timeout, context).await
}

/// Waits until exactly `target` events are pending; panics with `context` after `timeout`.
pub async fn wait_pending(
    pool: &deadpool_postgres::Pool,
    target: i64,
    timeout: Duration,
    context: &str,
) {
    let start = Instant::now();
    loop {
        let p = pending(pool).await;
        if p == target {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "{p} events still pending after {timeout:?}: {context}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Ids of processed events.
pub async fn processed_ids(pool: &deadpool_postgres::Pool, ids: &[Uuid]) -> HashSet<Uuid> {
    let client = pool.get().await.unwrap();
    let mut out = HashSet::new();
    for id in ids {
        let row = admin::get_outbox_event()
            .bind(&client, id)
            .one()
            .await
            .unwrap();
        if row.processed_at.is_some() {
            out.insert(*id);
        }
    }
    out
}
