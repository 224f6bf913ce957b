//! S3 offload and the relay's publish deadline (fauxqs behind a proxy that makes every answer
//! late): an upload that needs longer than the whole publish timeout gives it ends in a counted
//! attempt, so that such an event is dead-lettered in the end instead of being tried for ever.

mod aws;
mod common;

use std::time::Duration;

use aws::{bucket_name, create_bucket, s3_client};
use common::event;
use outbox_core::{FailureKind, PublishOutcome, Publisher};
use outbox_sqs::SqsPublisher;
use outbox_tests::DelayProxy;
use outbox_tests::sqs::{TestQueue, endpoint, sdk_config};
use serde_json::json;

#[tokio::test]
async fn an_upload_longer_than_the_publish_timeout_counts_an_attempt() {
    let s3 = s3_client().await;
    let bucket = bucket_name();
    create_bucket(&s3, &bucket).await;
    let queue = TestQueue::standard().await;
    let upstream = endpoint()
        .trim_start_matches("http://")
        .parse()
        .expect("the SQS endpoint is http://host:port");
    // Every answer 400 ms late: a multipart upload (create, two parts, complete) takes 1.6 s.
    let proxy = DelayProxy::start(upstream, Duration::from_millis(400)).await;
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(format!("http://{}", proxy.addr()))
        .max_attempts(1)
        .call_timeout(Duration::from_secs(1))
        .default_queue(queue.url())
        .offload_bucket(&bucket)
        .build()
        .await
        .unwrap();
    // One call for the uploads, one for the message: the relay refuses a publish timeout below.
    assert_eq!(publisher.min_publish_timeout(1), Duration::from_secs(2));
    let big = event(
        "order.created",
        "order",
        "big",
        1,
        json!("x".repeat(9 * 1024 * 1024)),
    );
    // Each call is answered within its time-out, but the whole upload does not fit before the
    // deadline less the message's own call.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(2_200);
    let outcomes = publisher
        .publish_within(std::slice::from_ref(&big), deadline)
        .await
        .unwrap();
    match &outcomes[0] {
        PublishOutcome::Retry(f) => {
            assert_eq!(f.kind(), FailureKind::Timeout, "{f:?}");
            assert!(f.message().contains("publish timeout"), "{f:?}");
        }
        other => panic!("expected a counted attempt (Retry), got {other:?}"),
    }
}
