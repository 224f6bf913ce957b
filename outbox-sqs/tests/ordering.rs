//! Per-aggregate order on a FIFO queue when writers of one aggregate interleave: the writer of the
//! earlier event commits last, with one and with four relays publishing.

use std::collections::HashMap;
use std::time::Duration;

use outbox_core::{Relay, emit};
use outbox_sqs::SqsPublisher;
use outbox_tests::sqs::TestQueue;
use outbox_tests::{RunningRelay, TestDb, TestEvent};

const AGGREGATES: usize = 5;

async fn lower_seq_commits_last(relays: usize) {
    let db = TestDb::new().await;
    let queue = TestQueue::fifo().await;
    let publisher = SqsPublisher::builder()
        .sdk_config(outbox_tests::sqs::sdk_config().await)
        .default_queue(queue.url())
        .build()
        .await
        .unwrap();
    let running: Vec<RunningRelay> = (0..relays)
        .map(|_| {
            let relay = Relay::builder(db.pool().clone(), publisher.clone())
                .listen(db.config().clone())
                .poll_interval(Duration::from_millis(100))
                .build()
                .unwrap();
            RunningRelay::start(&relay)
        })
        .collect();

    for k in 0..AGGREGATES {
        let aggregate = format!("race-{k}");
        // T1 writes event 1 and stays open.
        let mut c1 = db.pool().get().await.unwrap();
        let t1 = c1.transaction().await.unwrap();
        emit(&t1, &TestEvent::new(&aggregate, 1)).await.unwrap();
        // T2 writes event 2 of the same aggregate and commits as soon as it can.
        let t2 = tokio::spawn({
            let (pool, aggregate) = (db.pool().clone(), aggregate.clone());
            async move {
                let mut c2 = pool.get().await.unwrap();
                let t2 = c2.transaction().await.unwrap();
                emit(&t2, &TestEvent::new(&aggregate, 2)).await.unwrap();
                t2.commit().await.unwrap();
            }
        });
        // Long enough for the relays to publish event 2 if it were committed.
        tokio::time::sleep(Duration::from_millis(400)).await;
        t1.commit().await.unwrap();
        t2.await.unwrap();
    }

    let received = queue
        .receive_all(2 * AGGREGATES, Duration::from_secs(30))
        .await;
    for r in running {
        r.stop().await;
    }
    let mut order: HashMap<String, Vec<u64>> = HashMap::new();
    for m in &received {
        let body: serde_json::Value = serde_json::from_str(&m.body).unwrap();
        order
            .entry(body["order_id"].as_str().unwrap().to_string())
            .or_default()
            .push(body["n"].as_u64().unwrap());
    }
    let violations = order.values().filter(|ns| ns.as_slice() != [1, 2]).count();
    eprintln!(
        "ordering fifo relays={relays}: aggregates={AGGREGATES} received={} order_violations={violations} {order:?}",
        received.len()
    );
    assert_eq!(received.len(), 2 * AGGREGATES);
    assert_eq!(violations, 0, "{order:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_writers_keep_order_on_a_fifo_queue_with_one_relay() {
    lower_seq_commits_last(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_writers_keep_order_on_a_fifo_queue_with_four_relays() {
    lower_seq_commits_last(4).await;
}
