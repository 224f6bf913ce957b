//! Many relays and interleaving writers: nothing twice, order kept.

use super::*;

/// 4. Four relays at once plus concurrent writers: nothing published twice, order kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_relays_and_writers_publish_once_in_order() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let db = fault_db().await;
    let role = RelayRole::create(&db).await;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("four");
    let spec = RelaySpec::new(role.url(&db), fx.endpoint_url(), url)
        .arg("--batch-size")
        .arg("50");
    let mut relays: Vec<RelayProcess> = (0..4).map(|_| spec.spawn()).collect();
    let mut writers = Vec::new();
    for w in 0..4 {
        let pool = db.pool().clone();
        writers.push(tokio::spawn(async move {
            write_events(&pool, &format!("w{w}"), EVENTS / 4, 50, 25, true, |_| {
                String::new()
            })
            .await
        }));
    }
    let mut writes = Writes::default();
    for w in writers {
        writes.extend(w.await.unwrap());
    }
    wait_drained(db.pool(), Duration::from_secs(90), "four relays").await;
    stop_all(&mut relays);
    let f = check(&writes.committed, &writes, &fixture_deliveries(&fx));
    report(
        "4-four-relays-and-writers",
        &f,
        started.elapsed(),
        "relays=4 writers=4",
    );
    assert_eq!(
        (
            f.lost,
            f.duplicates,
            f.order_violations,
            f.rolled_back_delivered
        ),
        (0, 0, 0, 0)
    );
    drop(role);
}

/// 9. Writers that interleave on shared aggregates without any business lock of their own: 8
///    writers × 10 aggregates, random pauses between emit and commit (the writer of an earlier event
///    often commits last), 10 % rolled back, four relay processes. Order is judged by `seq`, which
///    the aggregate lock taken by `emit` makes the commit order within each aggregate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_writers_without_business_locks_keep_per_aggregate_order() {
    interleaved_writers("9-interleaved-writers", "interleaved", &[], EVENTS as usize).await;
}

/// 9b. The same into a FIFO queue with `--batch-aggregates`: each relay hands a whole claimed batch
///     to one publish, and an aggregate's events share `SendMessageBatch` calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_writers_keep_order_with_aggregates_batched_into_fifo_calls() {
    interleaved_writers(
        "9b-interleaved-writers-batched",
        "interleaved.fifo",
        &["--batch-aggregates"],
        EVENTS as usize / 2,
    )
    .await;
}

async fn interleaved_writers(name: &str, queue: &str, args: &[&str], events: usize) {
    use outbox_tests::interleaved::{Interleaving, seqs, write_interleaved};
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let db = fault_db().await;
    let role = RelayRole::create(&db).await;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue(queue);
    let mut spec = RelaySpec::new(role.url(&db), fx.endpoint_url(), url)
        .arg("--batch-size")
        .arg("50");
    for arg in args {
        spec = spec.arg(arg);
    }
    let mut relays: Vec<RelayProcess> = (0..4).map(|_| spec.spawn()).collect();
    let shape = Interleaving {
        writers: 8,
        aggregates: 10,
        events,
        rollback_rate: 0.1,
        max_pause: std::time::Duration::from_millis(3),
    };
    let interleaved = write_interleaved(db.pool(), "mix", shape).await;
    let written_in = started.elapsed();
    wait_drained(db.pool(), Duration::from_secs(90), "interleaved writers").await;
    stop_all(&mut relays);
    // The expected order within an aggregate is `seq` order.
    let seqs = seqs(db.pool()).await;
    let written = |id: &uuid::Uuid| {
        let (aggregate, seq) = seqs[id].clone();
        Written {
            id: *id,
            aggregate,
            n: seq as u64,
        }
    };
    let writes = Writes {
        committed: interleaved.committed.iter().map(written).collect(),
        rolled_back: interleaved.rolled_back.clone(),
    };
    let deliveries: Vec<Delivery> = fx
        .messages()
        .iter()
        .map(|m| {
            let id = &m.attributes["event_id"];
            let (aggregate, seq) = uuid::Uuid::from_str(id)
                .ok()
                .and_then(|u| seqs.get(&u).cloned())
                .unwrap_or_default();
            Delivery {
                event_id: id.clone(),
                aggregate,
                n: seq as u64,
            }
        })
        .collect();
    let f = check(&writes.committed, &writes, &deliveries);
    report(
        name,
        &f,
        started.elapsed(),
        &format!(
            "relays=4 writers=8 aggregates=10 rolled_back={} written_in={:.1}s",
            writes.rolled_back.len(),
            written_in.as_secs_f64()
        ),
    );
    assert_eq!(
        (
            f.lost,
            f.duplicates,
            f.order_violations,
            f.rolled_back_delivered,
            f.unexpected
        ),
        (0, 0, 0, 0, 0)
    );
    drop(role);
}
