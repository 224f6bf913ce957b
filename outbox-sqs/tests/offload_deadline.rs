//! S3 offload on slow links (fauxqs behind a proxy that makes every answer late, or the client's
//! uploads slow): an upload that needs longer than the whole publish timeout gives it, or than its
//! call timeout while S3 itself answers, ends in a counted attempt, so that such an event is
//! dead-lettered in the end instead of being tried for ever; S3 as a whole too slow is an outage.

mod aws;
mod common;

use std::time::Duration;

use aws::{bucket_and_queue, upstream};
use common::event;
use outbox_core::{FailureKind, PublishOutcome, Publisher};
use outbox_sqs::SqsPublisher;
use outbox_tests::sqs::{TestQueue, sdk_config};
use outbox_tests::{BlackHoleProxy, DelayProxy};
use serde_json::json;

#[tokio::test]
async fn an_upload_longer_than_the_publish_timeout_counts_an_attempt() {
    let (bucket, queue) = bucket_and_queue().await;
    // Every answer 400 ms late: a multipart upload (create, two parts, complete) takes 1.6 s.
    let proxy = DelayProxy::start(upstream(), Duration::from_millis(400)).await;
    let publisher = offloading_through(proxy.addr(), &queue, &bucket).await;
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

/// A publisher with a 1 s call timeout, offloading every message over 1 KiB, through the proxy
/// at `proxy`.
async fn offloading_through(
    proxy: std::net::SocketAddr,
    queue: &TestQueue,
    bucket: &str,
) -> SqsPublisher {
    probing_through(
        proxy,
        queue,
        bucket,
        outbox_sqs::DEFAULT_BREAKER_PROBE_INTERVAL,
    )
    .await
}

/// [`offloading_through`], trying S3 again at most every `probe` once it is down. Its publishes
/// wait for their uploads (an hour's offload wait, the deadline bounding it): these tests look
/// at what an upload's end means for its event (`detached_upload.rs` covers uploads that go on
/// without their publish).
async fn probing_through(
    proxy: std::net::SocketAddr,
    queue: &TestQueue,
    bucket: &str,
    probe: Duration,
) -> SqsPublisher {
    SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(format!("http://{proxy}"))
        .max_attempts(1)
        .call_timeout(Duration::from_secs(1))
        .breaker_probe_interval(probe)
        .default_queue(queue.url())
        .offload_bucket(bucket)
        .offload_threshold(1024)
        .offload_wait(Duration::from_secs(3600))
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_upload_too_slow_for_the_call_timeout_while_s3_answers_counts_an_attempt() {
    let (bucket, queue) = bucket_and_queue().await;
    // 200 KiB/s up: a request of a few hundred bytes is quick, 600 KiB take 3 s, three times the
    // call timeout. Put back without an attempt (an outage), such an event was uploaded again on
    // every claim, for ever, and its aggregate waited behind it.
    let proxy = DelayProxy::slow_upload(upstream(), 200 * 1024).await;
    let publisher = offloading_through(proxy.addr(), &queue, &bucket).await;
    let big = event(
        "order.created",
        "order",
        "big",
        1,
        json!("x".repeat(600 * 1024)),
    );
    // The first time-out is not charged: S3 may have just come back from an outage.
    let outcomes = publisher.publish(std::slice::from_ref(&big)).await.unwrap();
    match &outcomes[0] {
        PublishOutcome::Unavailable(f) => {
            assert_eq!(f.kind(), FailureKind::Timeout, "{f:?}");
            assert!(f.message().contains("not counted the first time"), "{f:?}");
        }
        other => panic!("expected the first time-out put back (Unavailable), got {other:?}"),
    }
    // The second in a row is the link, and so is every one after it.
    for _ in 0..2 {
        let outcomes = publisher.publish(std::slice::from_ref(&big)).await.unwrap();
        match &outcomes[0] {
            PublishOutcome::Retry(f) => {
                assert_eq!(f.kind(), FailureKind::Timeout, "{f:?}");
                assert!(f.message().contains("OUTBOX_SQS_CALL_TIMEOUT_MS"), "{f:?}");
            }
            other => panic!("expected a counted attempt (Retry), got {other:?}"),
        }
    }
    assert!(
        queue
            .receive_all(1, Duration::from_millis(500))
            .await
            .is_empty(),
        "a message is never sent without its object"
    );
}

#[tokio::test]
async fn an_upload_caught_in_an_outage_that_ends_before_its_time_out_counts_no_attempt() {
    let (bucket, queue) = bucket_and_queue().await;
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = probing_through(proxy.addr(), &queue, &bucket, Duration::from_secs(1)).await;
    let big = event("order.created", "order", "big", 1, json!("x".repeat(4096)));
    // The upload starts in a partition (its time-out: 1 s and 1 s for the MiB begun) that heals
    // before the time-out: the `HeadBucket` right after is answered. Before, that was taken for a
    // link too slow for the payload and charged an attempt (black-box run: 3 of 3 events).
    proxy.black_hole();
    let publish = {
        let publisher = publisher.clone();
        let big = big.clone();
        tokio::spawn(async move { publisher.publish(std::slice::from_ref(&big)).await })
    };
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    proxy.heal();
    let outcomes = publish.await.unwrap().unwrap();
    match &outcomes[0] {
        // The path under test: the probe was answered (S3 back), and the time-out is not charged.
        PublishOutcome::Unavailable(f) => {
            assert_eq!(f.kind(), FailureKind::Timeout, "{f:?}");
            assert!(f.message().contains("not counted"), "{f:?}");
        }
        other => panic!("expected an outage (Unavailable, no attempt), got {other:?}"),
    }
    // S3 is back: once the probe upload has gone through (a second), a claim publishes it.
    assert!(published_within(&publisher, &big, Duration::from_secs(10)).await);
    assert_eq!(queue.receive_all(1, Duration::from_secs(5)).await.len(), 1);
}

#[tokio::test]
async fn an_upload_timing_out_while_s3_does_not_answer_either_is_an_outage() {
    let (bucket, queue) = bucket_and_queue().await;
    // Every answer 2.5 s late, past the upload's 2 s (1 s and 1 s for the MiB begun) and the
    // probe's 1 s: S3 is too slow as a whole, not the payload too large for the link.
    let late = DelayProxy::start(upstream(), Duration::from_millis(2_500)).await;
    let publisher = offloading_through(late.addr(), &queue, &bucket).await;
    let big = event("order.created", "order", "big", 1, json!("x".repeat(4096)));
    let outcomes = publisher.publish(std::slice::from_ref(&big)).await.unwrap();
    match &outcomes[0] {
        PublishOutcome::Unavailable(f) => assert_eq!(f.kind(), FailureKind::Timeout, "{f:?}"),
        other => panic!("expected an outage (Unavailable), got {other:?}"),
    }
}

/// S3 black-holed under the relay's deadline: the upload times out with its whole call time-out,
/// the `HeadBucket` after it is not answered either, and the event is put back uncounted. Before,
/// the unanswered probe used up the rest of the budget, and the time-out was then taken for an
/// upload longer than the publish timeout: each event was charged an attempt per claim and
/// dead-lettered within minutes of an S3 outage (black-box run: `--max-attempts 2`, 40 s).
#[tokio::test]
async fn an_upload_in_a_black_hole_under_a_deadline_is_an_outage() {
    let (bucket, queue) = bucket_and_queue().await;
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = offloading_through(proxy.addr(), &queue, &bucket).await;
    let big = event("order.created", "order", "big", 1, json!("x".repeat(4096)));
    proxy.black_hole();
    // The uploads may run until 1 s (the message's call) before the deadline: 2.5 s, room for
    // the upload's 2 s (1 s and 1 s for the MiB begun) and half a second of probe.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(3_500);
    let outcomes = publisher
        .publish_within(std::slice::from_ref(&big), deadline)
        .await
        .unwrap();
    match &outcomes[0] {
        PublishOutcome::Unavailable(f) => assert_eq!(f.kind(), FailureKind::Timeout, "{f:?}"),
        other => panic!("expected an outage (Unavailable, no attempt), got {other:?}"),
    }
}

/// S3 black-holed, and an upload that starts late in its publish (behind others, for the
/// in-flight permits), so that the deadline cuts its call short: no call of it was answered, so
/// nothing says the payload is too large for the publish timeout; an outage, not an attempt.
#[tokio::test]
async fn an_upload_cut_short_by_the_deadline_in_a_black_hole_is_an_outage() {
    let (bucket, queue) = bucket_and_queue().await;
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = offloading_through(proxy.addr(), &queue, &bucket).await;
    let big = event("order.created", "order", "big", 1, json!("x".repeat(4096)));
    proxy.black_hole();
    // The uploads may run until 1.5 s (an upload starts only with a call time-out left): less
    // than the upload's own 2 s. Twice: the `HeadBucket` run in the background after the first
    // finds S3 down, so the second is not taken for a link too slow for the payload either.
    for round in 0..2 {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(2_500);
        let outcomes = publisher
            .publish_within(std::slice::from_ref(&big), deadline)
            .await
            .unwrap();
        assert_put_back(&outcomes[0], round);
        // The background probe's 2 s.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
    }
}

/// A link too slow for the payload, whose upload the deadline cuts short before any answer (a
/// publish timeout that leaves less than the upload's call time): the first time is put back,
/// uncounted, while a `HeadBucket` in the background finds S3 answering; the second is a counted
/// attempt, so that the event ends as a dead letter instead of being uploaded again on every
/// claim (review: it was taken for S3 down every time).
#[tokio::test]
async fn an_upload_cut_short_by_the_deadline_on_a_slow_link_counts_the_second_time() {
    let (bucket, queue) = bucket_and_queue().await;
    // 200 KiB/s up: 600 KiB take 3 s, past the 1.5 s the deadline leaves.
    let proxy = DelayProxy::slow_upload(upstream(), 200 * 1024).await;
    let publisher = offloading_through(proxy.addr(), &queue, &bucket).await;
    let big = event(
        "order.created",
        "order",
        "big",
        1,
        json!("x".repeat(600 * 1024)),
    );
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(2_500);
        let mut o = publisher
            .publish_within(std::slice::from_ref(&big), deadline)
            .await
            .unwrap();
        outcomes.push(o.remove(0));
        tokio::time::sleep(Duration::from_millis(2_500)).await;
    }
    assert!(
        matches!(&outcomes[0], PublishOutcome::Unavailable(f) if f.kind() == FailureKind::Timeout),
        "{outcomes:?}"
    );
    match &outcomes[1] {
        PublishOutcome::Retry(f) => {
            assert_eq!(f.kind(), FailureKind::Timeout, "{f:?}");
            assert!(f.message().contains("publish timeout"), "{f:?}");
        }
        other => panic!("expected a counted attempt (Retry), got {other:?}"),
    }
}

/// S3 not answering (an upload, then a `HeadBucket`) is S3 down: the next publishes put their
/// offloaded events back at once, uncounted, instead of each waiting for an upload's time-out, so
/// that the events published alongside keep flowing (each batch with an offloaded event took the
/// upload's time-out and the probe's, about 19 s at the relay's defaults, during an S3 outage).
/// No dead-letter clock and no gauge: that is the breaker's, for a bucket that refuses. One
/// upload per probe interval finds S3 back.
#[tokio::test]
async fn s3_down_puts_offloaded_events_back_at_once_until_an_upload_goes_through() {
    let (bucket, queue) = bucket_and_queue().await;
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = probing_through(proxy.addr(), &queue, &bucket, Duration::from_secs(3)).await;
    let big = event("order.created", "order", "big", 1, json!("x".repeat(4096)));
    proxy.black_hole();
    let first = publisher.publish(std::slice::from_ref(&big)).await.unwrap();
    assert!(
        matches!(&first[0], PublishOutcome::Unavailable(f) if f.kind() == FailureKind::Timeout),
        "{first:?}"
    );
    assert_eq!(
        publisher.unavailable_bucket(),
        None,
        "the gauge is for refusals"
    );
    // Put back at once while S3 is down: no upload, no time-out to wait for.
    let started = std::time::Instant::now();
    let second = publisher.publish(std::slice::from_ref(&big)).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    match &second[0] {
        PublishOutcome::Unavailable(f) => {
            assert_eq!(f.kind(), FailureKind::Timeout, "{f:?}");
            assert!(f.message().contains("S3 is down"), "{f:?}");
        }
        other => panic!("put back, never dead-lettered for an outage: {other:?}"),
    }
    // Past a probe interval too: the probe is a task of its own, no publish waits for it (a
    // probe upload in a batch held the batch for the upload's time-out: black-box run).
    let until = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < until {
        let started = std::time::Instant::now();
        let outcomes = publisher.publish(std::slice::from_ref(&big)).await.unwrap();
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "a publish waited {:?}: {outcomes:?}",
            started.elapsed()
        );
        assert!(
            matches!(outcomes[0], PublishOutcome::Unavailable(_)),
            "{outcomes:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // S3 back: the probe upload, once per interval, goes through; then the event does.
    proxy.heal();
    assert!(published_within(&publisher, &big, Duration::from_secs(10)).await);
}

/// Asserts that `outcome` (of the `round`-th try) puts its event back uncounted, for a time-out.
fn assert_put_back(outcome: &PublishOutcome, round: usize) {
    match outcome {
        PublishOutcome::Unavailable(f) => {
            assert_eq!(f.kind(), FailureKind::Timeout, "round {round}: {f:?}")
        }
        other => panic!("round {round}: expected it put back uncounted, got {other:?}"),
    }
}

/// Whether `event` is published by one of the publishes tried, a few times a second, for `limit`.
async fn published_within(
    publisher: &SqsPublisher,
    event: &outbox_core::ClaimedEvent,
    limit: Duration,
) -> bool {
    outbox_tests::eventually(limit, async || {
        let outcomes = publisher
            .publish(std::slice::from_ref(event))
            .await
            .unwrap();
        matches!(outcomes[0], PublishOutcome::Published)
    })
    .await
}

/// A small payload whose upload times out while S3 answers a `HeadBucket` was stalled, not on a
/// link too slow for it: never a counted attempt, however often. Black-box run: 20 KB uploads
/// black-holed while `HeadBucket` answered were dead-lettered as too large for the link.
#[tokio::test]
async fn a_small_upload_timing_out_while_s3_answers_is_never_counted() {
    let (bucket, queue) = bucket_and_queue().await;
    // 1 KiB/s up: a `HeadBucket` (under 1 KiB) answers within a second, 4 KiB take 4 s, past the
    // upload's 2 s (1 s and 1 s for the MiB begun).
    let proxy = DelayProxy::slow_upload(upstream(), 1024).await;
    let publisher = probing_through(proxy.addr(), &queue, &bucket, Duration::from_secs(1)).await;
    let small = event(
        "order.created",
        "order",
        "small",
        1,
        json!("x".repeat(4096)),
    );
    for round in 0..3 {
        let outcomes = publisher
            .publish(std::slice::from_ref(&small))
            .await
            .unwrap();
        assert_put_back(&outcomes[0], round);
        tokio::time::sleep(Duration::from_millis(1_200)).await;
    }
}
