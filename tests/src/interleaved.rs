//! Writers that interleave the way real services do: concurrent transactions over a few shared
//! aggregates, random pauses between emit and commit, some rolled back. The per-aggregate order
//! checks of the relay tests and the fault suite run against what they record.

use std::collections::HashMap;
use std::time::Duration;

use outbox_core::{emit, emit_all};
use rand::Rng;
use uuid::Uuid;

use crate::TestEvent;

/// What interleaved writers did.
#[derive(Debug, Default)]
pub struct InterleavedWrites {
    /// Ids of events whose transaction committed.
    pub committed: Vec<Uuid>,
    /// Ids of events whose transaction rolled back.
    pub rolled_back: Vec<Uuid>,
}

/// The shape of the interleaving.
#[derive(Debug, Clone, Copy)]
pub struct Interleaving {
    /// Concurrent writer tasks, each on its own connection.
    pub writers: usize,
    /// Aggregates shared by all writers, named `{prefix}-{k}`.
    pub aggregates: usize,
    /// Events to commit in all (rolled-back ones come on top).
    pub events: usize,
    /// Fraction of transactions rolled back after emitting.
    pub rollback_rate: f64,
    /// Longest random pause between a transaction's emit and its commit.
    pub max_pause: Duration,
}

/// Runs `shape.writers` writers until `shape.events` events are committed. Each transaction emits
/// one to three events — either one after another for one aggregate (`emit`), or for several
/// aggregates in one `emit_all` — pauses for a random time up to `max_pause` (so a transaction that
/// emitted first often commits last), then commits or rolls back.
pub async fn write_interleaved(
    pool: &deadpool_postgres::Pool,
    prefix: &str,
    shape: Interleaving,
) -> InterleavedWrites {
    let budget = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(shape.events));
    let mut tasks = Vec::new();
    for _ in 0..shape.writers {
        let (pool, prefix, budget) = (pool.clone(), prefix.to_string(), budget.clone());
        tasks.push(tokio::spawn(async move {
            let mut writes = InterleavedWrites::default();
            let mut client = pool.get().await.expect("a pooled connection");
            let mut n = 0u64;
            loop {
                let (mut events, pause, rollback) = {
                    let mut rng = rand::rng();
                    let count = rng.random_range(1..=3usize);
                    let single = rng.random_bool(0.5);
                    let first = rng.random_range(0..shape.aggregates);
                    let events: Vec<TestEvent> = (0..count)
                        .map(|_| {
                            let k = if single {
                                first
                            } else {
                                rng.random_range(0..shape.aggregates)
                            };
                            n += 1;
                            TestEvent::new(format!("{prefix}-{k}"), n)
                        })
                        .collect();
                    let pause = shape.max_pause.mul_f64(rng.random::<f64>());
                    (events, pause, rng.random_bool(shape.rollback_rate))
                };
                if !rollback {
                    // Take what is left of the budget, up to this transaction's events, so that
                    // exactly `shape.events` are committed in all.
                    let want = events.len();
                    let claimed = budget.fetch_update(
                        std::sync::atomic::Ordering::SeqCst,
                        std::sync::atomic::Ordering::SeqCst,
                        |left| (left > 0).then(|| left - left.min(want)),
                    );
                    match claimed {
                        Ok(left) => events.truncate(left.min(want)),
                        Err(_) => return writes,
                    }
                }
                let tx = client.transaction().await.expect("BEGIN");
                let ids = if events.iter().all(|e| e.order_id == events[0].order_id) {
                    let mut ids = Vec::new();
                    for e in &events {
                        ids.push(emit(&tx, e).await.expect("emit"));
                    }
                    ids
                } else {
                    emit_all(&tx, &events).await.expect("emit_all")
                };
                tokio::time::sleep(pause).await;
                if rollback {
                    tx.rollback().await.expect("ROLLBACK");
                    writes.rolled_back.extend(ids);
                } else {
                    tx.commit().await.expect("COMMIT");
                    writes.committed.extend(ids);
                }
            }
        }));
    }
    let mut all = InterleavedWrites::default();
    for t in tasks {
        let w = t.await.expect("a writer task panicked");
        all.committed.extend(w.committed);
        all.rolled_back.extend(w.rolled_back);
    }
    all
}

/// The aggregate and `seq` of every event in the table, by id: the order the outbox promises to
/// keep within each aggregate.
pub async fn seqs(pool: &deadpool_postgres::Pool) -> HashMap<Uuid, (String, i64)> {
    let client = pool.get().await.expect("a pooled connection");
    client
        .query("SELECT id, aggregate_id, seq FROM outbox_events", &[])
        .await
        .expect("reading outbox_events")
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect()
}

/// Per-aggregate order violations in `published` (event ids in the order they were published,
/// repeats allowed): how often an event's first publication came after a later (higher `seq`)
/// event of its aggregate.
pub fn order_violations(published: &[Uuid], seqs: &HashMap<Uuid, (String, i64)>) -> usize {
    let mut last: HashMap<&str, i64> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    let mut violations = 0;
    for id in published {
        if !seen.insert(*id) {
            continue;
        }
        let Some((aggregate, seq)) = seqs.get(id) else {
            continue;
        };
        if let Some(prev) = last.insert(aggregate.as_str(), *seq) {
            if prev > *seq {
                violations += 1;
            }
        }
    }
    violations
}
