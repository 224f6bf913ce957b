//! Messages whose payload the publisher offloaded to S3 (the Extended Client pointer format): the
//! consumer reads the object and hands the handler the event. Before, it decoded the pointer as
//! the event: every offloaded event was bad input (deleted under the Delete policy: lost).

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::MessageAttributeValue;
use outbox_core::Relay;
use outbox_sqs::{EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, SqsPublisher, pointer_body};
use outbox_tests::sqs::{TestQueue, endpoint, sdk_config};
use outbox_tests::{RunningRelay, TestDb, eventually};
use uuid::Uuid;

use crate::support::*;

async fn bucket() -> String {
    let sdk = sdk_config().await;
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .endpoint_url(endpoint())
            .force_path_style(true)
            .build(),
    );
    let name = format!("outbox-test-{}", Uuid::new_v4().simple());
    s3.create_bucket()
        .bucket(&name)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "CreateBucket on {} (bash scripts/services.sh starts it): {e:?}",
                endpoint()
            )
        });
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offloaded_events_are_read_from_s3_and_applied() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let bucket = bucket().await;
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(endpoint())
        .default_queue(queue.url())
        .offload_bucket(&bucket)
        .offload_threshold(1) // every event
        .build()
        .await
        .unwrap();
    let relay = Relay::builder(db.pool().clone(), publisher)
        .listen(db.config().clone())
        .build()
        .unwrap();
    let relay = RunningRelay::start(&relay);
    let ids = emit_credits(&db, 2, 2).await;

    // And a pointer to an object that is not there: a failed delivery, not bad input.
    let attr = |t: &str, v: &str| {
        MessageAttributeValue::builder()
            .data_type(t)
            .string_value(v)
            .build()
            .unwrap()
    };
    queue
        .client()
        .send_message()
        .queue_url(queue.url())
        .message_body(pointer_body(&bucket, "outbox/missing"))
        .message_attributes(EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, attr("Number", "100"))
        .message_attributes("event_id", attr("String", &Uuid::new_v4().to_string()))
        .message_attributes("event_type", attr("String", "account.credited"))
        .send()
        .await
        .unwrap();

    let c = consumer(&db, &queue, "ledger").await.build().await.unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    let done = eventually(Duration::from_secs(30), async || {
        effect_counts(&db).await.1 == ids.len() as i64
            && running.consumer.metrics().failures("offload") >= 1
    })
    .await;
    let c = running.stop().await;
    relay.stop().await;
    let m = c.metrics();
    assert!(done, "{m:?}");
    assert_eq!(effect_counts(&db).await, (4, 4));
    assert_eq!(m.failures("undecodable"), 0, "{m:?}");
}
