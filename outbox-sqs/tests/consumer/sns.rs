//! Queues subscribed to an SNS topic: the consumer reads them with raw message delivery on or off.
//! Off, SNS wraps each message in a JSON notification and sends no SQS attributes: every event
//! was bad input ("missing event id") and went to the dead-letter queue (black-box run).

use std::sync::Arc;
use std::time::Duration;

use outbox_core::Relay;
use outbox_sqs::SqsPublisher;
use outbox_sqs::consumer::Outcome;
use outbox_tests::sqs::{TestQueue, endpoint, sdk_config};
use outbox_tests::{RunningRelay, TestDb, eventually};

use crate::aws::{TestTopic, bucket_name, create_bucket, s3_client};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_through_a_topic_without_raw_delivery_are_handled() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let topic = TestTopic::standard().await;
    let (raw, enveloped) = (TestQueue::standard().await, TestQueue::standard().await);
    topic.subscribe(&raw, true).await;
    topic.subscribe(&enveloped, false).await;
    let bucket = bucket_name();
    create_bucket(&s3_client().await, &bucket).await;
    // Messages over 1 KiB offloaded to S3: the long account's events.
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(endpoint())
        .default_queue(&topic.arn)
        .offload_bucket(&bucket)
        .offload_threshold(1024)
        .build()
        .await
        .unwrap();
    let relay = Relay::builder(db.pool().clone(), publisher)
        .listen(db.config().clone())
        .build()
        .unwrap();
    let relay = RunningRelay::start(&relay);
    let long = "long-".repeat(300);
    let mut client = db.pool().get().await.unwrap();
    for account in ["acc-1", "acc-2", &long] {
        for n in 1..=2 {
            let tx = client.transaction().await.unwrap();
            outbox_core::emit(&tx, &AccountEvent::credited(account, n))
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
    }
    drop(client);
    assert!(eventually(Duration::from_secs(20), async || db.pending().await == 0).await);
    relay.stop().await;
    let objects = s3_client()
        .await
        .list_objects_v2()
        .bucket(&bucket)
        .send()
        .await
        .unwrap()
        .key_count();
    assert_eq!(
        objects,
        Some(2),
        "the long account's two events were offloaded"
    );

    for (queue, name) in [(&enveloped, "enveloped"), (&raw, "raw")] {
        let seen = Seen::default();
        let recorder = Arc::new(Recorder::default());
        let c = consumer(&db, queue, name)
            .await
            .s3_client(crate::aws::s3_client().await)
            .observe(seen.observer())
            .build()
            .await
            .unwrap();
        let running = Running::start(c, recorder.clone());
        let done = eventually(Duration::from_secs(20), async || {
            running.consumer.metrics().handled() == 6
        })
        .await;
        let c = running.stop().await;
        assert!(done, "{name}: every event handled: {:?}", c.metrics());
        assert!(
            seen.0
                .lock()
                .unwrap()
                .iter()
                .all(|d| d.outcome == Outcome::Handled),
            "{name}"
        );
        let mut got: Vec<(String, String)> = recorder
            .envelopes
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e.aggregate_type.clone(), e.aggregate_id.clone()))
            .collect();
        got.sort();
        got.dedup();
        let mut want: Vec<(String, String)> = ["acc-1", "acc-2", long.as_str()]
            .iter()
            .map(|a| ("account".to_owned(), (*a).to_owned()))
            .collect();
        want.sort();
        assert_eq!(got, want, "{name}");
    }
    // Both consumers applied all six: twelve rows, six events.
    assert_eq!(effect_counts(&db).await, (12, 6));
}
