//! What the writers wrote, what arrived, and the check of one against the other.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use outbox_core::emit_all;
use outbox_tests::TestEvent;
use uuid::Uuid;

/// An event written by a scenario: its id, aggregate and position within the aggregate.
#[derive(Debug, Clone)]
pub struct Written {
    pub id: Uuid,
    pub aggregate: String,
    pub n: u64,
}

/// What the writers did: committed events, and ids of events in rolled-back transactions.
#[derive(Debug, Default)]
pub struct Writes {
    pub committed: Vec<Written>,
    pub rolled_back: Vec<Uuid>,
}

impl Writes {
    pub fn extend(&mut self, other: Writes) {
        self.committed.extend(other.committed);
        self.rolled_back.extend(other.rolled_back);
    }
}

/// Writes `count` events over `aggregates` aggregates named `{prefix}-{k}`, in transactions of
/// `per_tx` events; every 10th transaction (when `rollbacks`) writes its events and rolls back.
/// Within an aggregate, `n` increases with commit order.
pub async fn write_events(
    db_pool: &deadpool_postgres::Pool,
    prefix: &str,
    count: u64,
    aggregates: u64,
    per_tx: u64,
    rollbacks: bool,
    note: impl Fn(u64) -> String,
) -> Writes {
    let mut writes = Writes::default();
    let mut client = db_pool.get().await.unwrap();
    let mut n = 0;
    let mut tx_no = 0;
    while n < count {
        tx_no += 1;
        let rollback = rollbacks && tx_no % 10 == 0;
        let events: Vec<TestEvent> = (0..per_tx)
            .map(|i| {
                let k = n + i;
                TestEvent::new(format!("{prefix}-{}", k % aggregates), k).note(note(k))
            })
            .collect();
        let tx = client.transaction().await.unwrap();
        let ids = emit_all(&tx, &events).await.unwrap();
        if rollback {
            tx.rollback().await.unwrap();
            writes.rolled_back.extend(ids);
            continue;
        }
        tx.commit().await.unwrap();
        for (id, e) in ids.into_iter().zip(events) {
            writes.committed.push(Written {
                id,
                aggregate: e.order_id,
                n: e.n,
            });
        }
        n += per_tx;
    }
    writes
}

/// A delivered message, as the history check needs it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub event_id: String,
    pub aggregate: String,
    pub n: u64,
}

impl Delivery {
    /// From a message body (a `TestEvent`) and its `event_id` attribute.
    pub fn from_message(event_id: &str, body: &str) -> Delivery {
        let v: serde_json::Value =
            serde_json::from_str(body).expect("the body is the payload JSON");
        Delivery {
            event_id: event_id.to_string(),
            aggregate: v["order_id"].as_str().unwrap().to_string(),
            n: v["n"].as_u64().unwrap(),
        }
    }
}

/// The figures a scenario prints and asserts on.
#[derive(Debug, Default)]
pub struct Figures {
    pub events: usize,
    pub delivered: usize,
    pub lost: usize,
    pub duplicates: usize,
    pub order_violations: usize,
    pub rolled_back_delivered: usize,
    pub unexpected: usize,
}

/// Checks deliveries (in delivery order) against what was written. `expected` is the subset of
/// committed events that must arrive (all of them, unless a scenario blocks some on purpose).
pub fn check(expected: &[Written], writes: &Writes, deliveries: &[Delivery]) -> Figures {
    let expected_ids: HashSet<String> = expected.iter().map(|w| w.id.to_string()).collect();
    let committed: HashSet<String> = writes.committed.iter().map(|w| w.id.to_string()).collect();
    let rolled_back: HashSet<String> = writes.rolled_back.iter().map(|i| i.to_string()).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut last_n: HashMap<&str, u64> = HashMap::new();
    let mut f = Figures {
        events: expected.len(),
        ..Figures::default()
    };
    for d in deliveries {
        if rolled_back.contains(&d.event_id) {
            f.rolled_back_delivered += 1;
            continue;
        }
        if !committed.contains(&d.event_id) {
            f.unexpected += 1;
            continue;
        }
        if !seen.insert(d.event_id.as_str()) {
            f.duplicates += 1;
            continue;
        }
        // Order is judged on first deliveries: a re-sent earlier event is a duplicate, not a
        // violation.
        if let Some(prev) = last_n.insert(d.aggregate.as_str(), d.n) {
            if prev > d.n {
                f.order_violations += 1;
            }
        }
    }
    f.delivered = expected_ids
        .iter()
        .filter(|id| seen.contains(id.as_str()))
        .count();
    f.lost = f.events - f.delivered;
    f
}

/// Prints the scenario's one line of figures — straight to the process's stderr, past the test
/// harness's output capture, so the CI log shows the evidence of passing scenarios too.
pub fn report(scenario: &str, f: &Figures, duration: Duration, extra: &str) {
    use std::io::Write;
    let line = format!(
        "fault-suite {scenario}: events={} delivered={} lost={} duplicates={} order_violations={} \
         rolled_back_delivered={} duration={:.1}s {extra}\n",
        f.events,
        f.delivered,
        f.lost,
        f.duplicates,
        f.order_violations,
        f.rolled_back_delivered,
        duration.as_secs_f64()
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}
