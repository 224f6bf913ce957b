//! S3 answering slowly is slow, not down (fauxqs's S3 behind a proxy that makes every answer
//! late; SQS straight to the server): its uploads go through, whether S3 was heard from lately
//! or not, however many calls an upload takes.

mod aws;
mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aws::{bucket_and_queue, upstream};
use common::event;
use outbox_core::{ClaimedEvent, PublishOutcome, Publisher};
use outbox_sqs::SqsPublisher;
use outbox_tests::sqs::TestQueue;
use outbox_tests::{BlackHoleProxy, DelayProxy};
use serde_json::json;

/// A publisher with `call_timeout`, offloading every message over 1 KiB to `bucket` through the
/// proxy at `s3`; its publishes wait for their uploads.
async fn publisher(
    s3: SocketAddr,
    queue: &TestQueue,
    bucket: &str,
    call_timeout: Duration,
) -> SqsPublisher {
    aws::offloading(s3, queue, bucket, call_timeout)
        .await
        .offload_wait(Duration::from_secs(3600))
        .build()
        .await
        .unwrap()
}

/// An event of aggregate `big-{n}` whose payload of `bytes` is offloaded.
fn big(n: i64, bytes: usize) -> ClaimedEvent {
    event(
        "order.created",
        "order",
        &format!("big-{n}"),
        n,
        json!("x".repeat(bytes)),
    )
}

/// S3 answering every request in 3.5 s is slow, not down, at the first upload after an idle
/// spell too: nothing heard for 5 s, the upload was given up 3 s in, S3 taken for down, and the
/// events put back for the probe to find it (black-box run). The upload itself must have run 5 s.
#[tokio::test]
async fn a_slow_s3_is_not_taken_for_down_after_an_idle_spell() {
    let (bucket, queue) = bucket_and_queue().await;
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = publisher(proxy.addr(), &queue, &bucket, Duration::from_secs(10)).await;
    proxy.delay_requests(Duration::from_millis(3_500));
    let outcomes = publisher.publish(&[big(1, 4096)]).await.unwrap();
    assert!(
        matches!(outcomes[0], PublishOutcome::Published),
        "{outcomes:?}"
    );
    assert!(
        !publisher
            .encode_metrics()
            .contains(&format!("outbox_s3_down{{bucket=\"{bucket}\"}} 1")),
        "taken for down"
    );
}

/// S3 answering every request slowly, `HeadBucket` too, is slow, not down: an upload it answers
/// after 3.5 s goes through. The watch gave up each upload 3 s in (its `HeadBucket` unanswered
/// within 2 s), took S3 for down, and nothing was offloaded while S3 answered so: S3 had no
/// "answered within 5 s" rule, the queues and topics had (review).
#[tokio::test]
async fn a_slow_s3_is_not_taken_for_down() {
    let (bucket, queue) = bucket_and_queue().await;
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = publisher(proxy.addr(), &queue, &bucket, Duration::from_secs(10)).await;
    let outcomes = publisher.publish(&[big(0, 4096)]).await.unwrap();
    assert!(
        matches!(outcomes[0], PublishOutcome::Published),
        "{outcomes:?}"
    );
    proxy.delay_requests(Duration::from_millis(3500));
    for n in 1..=2 {
        let started = Instant::now();
        let outcomes = publisher.publish(&[big(n, 4096)]).await.unwrap();
        assert!(
            matches!(outcomes[0], PublishOutcome::Published),
            "upload {n}, after {:?}: {outcomes:?}",
            started.elapsed()
        );
        assert!(started.elapsed() >= Duration::from_secs(3), "S3 is slow");
    }
    assert_eq!(queue.receive_all(3, Duration::from_secs(5)).await.len(), 3);
}

/// A multipart upload (a payload over 8 MiB: four calls) to S3 answering in 3.5 s after an idle
/// spell goes through: each answered call is heard (only probes and whole uploads were, and the
/// watch took S3 for down 5.5 s in, its creation answered at 3.5 s; review).
#[tokio::test]
async fn a_slow_multipart_upload_after_an_idle_spell_goes_through() {
    let (bucket, queue) = bucket_and_queue().await;
    // Every answer 3.5 s late (the black-hole proxy's delay holds each chunk of a body).
    let proxy = DelayProxy::start(upstream(), Duration::from_millis(3_500)).await;
    let publisher = publisher(proxy.addr(), &queue, &bucket, Duration::from_secs(10)).await;
    let outcomes = publisher.publish(&[big(1, 9 * 1024 * 1024)]).await.unwrap();
    assert!(
        matches!(outcomes[0], PublishOutcome::Published),
        "{outcomes:?}"
    );
}

/// The start-up check waits for S3 answering in 3.5 s: given 3 s, it started every relay with
/// S3 taken for down, its offloaded events put back until the probe found it 8.5 s later
/// (black-box run).
#[tokio::test]
async fn the_start_up_check_waits_for_a_slow_s3() {
    let (bucket, queue) = bucket_and_queue().await;
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = publisher(proxy.addr(), &queue, &bucket, Duration::from_secs(10)).await;
    proxy.delay_requests(Duration::from_millis(3_500));
    publisher.check().await.unwrap();
    let metrics = publisher.encode_metrics();
    assert!(
        metrics.contains(&format!("outbox_s3_down{{bucket=\"{bucket}\"}} 0")),
        "{metrics}"
    );
}
