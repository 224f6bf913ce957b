//! `group_batches` on a FIFO queue (the SQS test fixture): the relay keeps per-aggregate order and
//! hands over whole batches, several events of one aggregate per `SendMessageBatch`; a failure holds
//! back the group's later batches, which the relay releases without counting an attempt.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outbox_core::{Publisher, Relay, emit_all};
use outbox_sqs::SqsPublisher;
use outbox_sqs_fixture::{EntryFault, SqsFixture};
use outbox_tests::sqs::sdk_config_for;
use outbox_tests::{RunningRelay, TestDb, TestEvent, eventually};

const AGGREGATES: usize = 5;
const PER_AGGREGATE: u64 = 30;

async fn publisher(fx: &SqsFixture, queue: &str, group_batches: bool) -> SqsPublisher {
    SqsPublisher::builder()
        .sdk_config(sdk_config_for(&fx.endpoint_url()).await)
        .max_attempts(1)
        .default_queue(queue)
        .group_batches(group_batches)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn group_batches_applies_to_fifo_queues_only_and_is_off_by_default() {
    let fx = SqsFixture::start().await;
    let fifo = fx.create_queue("events.fifo");
    let standard = fx.create_queue("events");
    assert!(publisher(&fx, &fifo, true).await.keeps_aggregate_order());
    assert!(!publisher(&fx, &fifo, false).await.keeps_aggregate_order());
    assert!(
        !publisher(&fx, &standard, true)
            .await
            .keeps_aggregate_order()
    );
    let default = SqsPublisher::builder()
        .sdk_config(sdk_config_for(&fx.endpoint_url()).await)
        .default_queue(&fifo)
        .build()
        .await
        .unwrap();
    assert!(!default.keeps_aggregate_order());
}

#[tokio::test]
async fn whole_batches_keep_each_aggregates_order_when_a_group_fails_at_a_batch_boundary() {
    let db = TestDb::new().await;
    let fx = SqsFixture::start().await;
    let queue = fx.create_queue("events.fifo");
    // Event 10 of aggregate a-0 fails once: the last entry of its group's first batch of 10, so
    // the group's next batch (events 11–20, same claim) must not go out before it.
    let failed_once = Arc::new(AtomicBool::new(false));
    fx.fail_entries_where(
        {
            let failed_once = failed_once.clone();
            move |m| {
                m.attributes.get("aggregate_id").is_some_and(|a| a == "a-0")
                    && m.body.contains("\"n\": 10,")
                    && !failed_once.swap(true, Ordering::SeqCst)
            }
        },
        EntryFault::server_error(),
    );
    // Interleaved across aggregates, as concurrent writers would commit them.
    let events: Vec<TestEvent> = (1..=PER_AGGREGATE)
        .flat_map(|n| (0..AGGREGATES).map(move |a| TestEvent::new(format!("a-{a}"), n)))
        .collect();
    let client = db.pool().get().await.unwrap();
    emit_all(&client, &events).await.unwrap();

    let relay = Relay::builder(db.pool().clone(), publisher(&fx, &queue, true).await)
        .batch_size(100)
        .concurrency(2)
        .backoff(Duration::from_millis(50), Duration::from_millis(200))
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let total = AGGREGATES * PER_AGGREGATE as usize;
    assert!(
        eventually(Duration::from_secs(20), async || fx.messages().len()
            >= total)
        .await,
        "every event published: {} of {total}",
        fx.messages().len()
    );
    running.stop().await;
    assert!(failed_once.load(Ordering::SeqCst), "the fault fired");

    let mut order: HashMap<String, Vec<u64>> = HashMap::new();
    for m in fx.messages() {
        let body: serde_json::Value = serde_json::from_str(&m.body).unwrap();
        order
            .entry(body["order_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(body["n"].as_u64().unwrap());
    }
    let expected: Vec<u64> = (1..=PER_AGGREGATE).collect();
    for (aggregate, ns) in &order {
        assert_eq!(ns, &expected, "aggregate {aggregate}");
    }
    assert_eq!(order.len(), AGGREGATES);
    // Several events of one group per call: in waves, each call holds one event per aggregate, so
    // a-0 alone would need at least PER_AGGREGATE calls.
    let calls = fx.calls_to("SendMessageBatch");
    assert!(
        calls < PER_AGGREGATE,
        "{calls} SendMessageBatch calls for {total} events over {AGGREGATES} groups"
    );
    // Only the failed event counted an attempt; what was held back was released without one.
    let attempts: i64 = db
        .connect()
        .await
        .query_one("SELECT count(*) FROM outbox_events WHERE attempts > 0", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(attempts, 1);
}
