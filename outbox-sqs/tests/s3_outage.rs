//! S3 outages under the publisher (fauxqs's S3 behind a proxy that black-holes or slows it; SQS
//! straight to the server): found seconds into an upload, not at its time-out; the events that
//! carry their payload go on; the relay starts while S3 is down.

mod aws;
mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aws::{bucket_and_queue, upstream};
use common::event;
use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome, Publisher};
use outbox_sqs::{SqsPublisher, SqsPublisherBuilder};
use outbox_sqs_fixture::SqsFixture;
use outbox_tests::sqs::{TestQueue, sdk_config_for};
use outbox_tests::{BlackHoleProxy, DelayProxy};
use serde_json::json;

/// A publisher with `call_timeout`, offloading every message over 1 KiB to `bucket` through the
/// proxy at `s3`, probing S3 once a second while it is down; its SQS calls go straight to the
/// server. Its publishes wait for their uploads (an hour's offload wait): these tests look at
/// what the watch over an upload finds (`detached_upload.rs` covers uploads that go on without
/// their publish).
async fn publisher(
    s3: SocketAddr,
    queue: &TestQueue,
    bucket: &str,
    call_timeout: Duration,
) -> SqsPublisher {
    aws::offloading(s3, queue, bucket, call_timeout)
        .await
        .breaker_probe_interval(Duration::from_secs(1))
        .offload_wait(Duration::from_secs(3600))
        .build()
        .await
        .unwrap()
}

/// An event of aggregate `big-{n}` whose 4 KiB payload is offloaded (the threshold is 1 KiB).
fn big(n: i64) -> ClaimedEvent {
    event(
        "order.created",
        "order",
        &format!("big-{n}"),
        n,
        json!("x".repeat(4096)),
    )
}

/// A publisher sending to the fixture's queue `queue` and offloading every message over 1 KiB to
/// a new bucket of the emulator's S3 through the proxy at `s3`, with a 10 s call time-out, its
/// publishes waiting for their uploads, and `configure`d further.
async fn fixture_publisher(
    fx: &SqsFixture,
    queue: &str,
    s3: SocketAddr,
    configure: impl FnOnce(SqsPublisherBuilder) -> SqsPublisherBuilder,
) -> SqsPublisher {
    let bucket = aws::bucket_name();
    aws::create_bucket(&aws::s3_client().await, &bucket).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk_config_for(&fx.endpoint_url()).await);
    let builder = SqsPublisher::builder()
        .sdk_config(sdk_config_for(&format!("http://{s3}")).await)
        .client(sqs)
        .max_attempts(1)
        .call_timeout(Duration::from_secs(10))
        .default_queue(queue)
        .offload_bucket(&bucket)
        .offload_threshold(1024)
        .offload_wait(Duration::from_secs(3600));
    configure(builder).build().await.unwrap()
}

/// An outage's onset costs seconds, not the upload's time-out: an upload unanswered after a
/// second is checked with a `HeadBucket`, and given up, S3 down, when that is not answered either.
/// The batch that met the outage waited for the upload's time-out (the call time-out, 10 s by
/// default, and 1 s per MiB) and a `HeadBucket` of up to 3 s, and per-aggregate order held the
/// heads of every aggregate it had claimed behind it (black-box run: p99 14 s in the first 20 s
/// of a black hole).
#[tokio::test]
async fn an_outage_is_found_seconds_into_an_upload_not_at_its_time_out() {
    let (bucket, queue) = bucket_and_queue().await;
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = publisher(proxy.addr(), &queue, &bucket, Duration::from_secs(10)).await;
    let big = event("order.created", "order", "big", 1, json!("x".repeat(4096)));
    let small = event("order.created", "order", "small", 2, json!("x"));
    proxy.black_hole();
    let started = Instant::now();
    let outcomes = publisher.publish(&[big.clone(), small]).await.unwrap();
    // Silent for 5 s, the upload included (a `HeadBucket`'s 2 s at most more); the upload's own
    // time-out is 11 s.
    assert!(
        started.elapsed() < Duration::from_millis(7_500),
        "the batch waited {:?}",
        started.elapsed()
    );
    match &outcomes[0] {
        PublishOutcome::Unavailable(f) => {
            assert_eq!(f.kind(), FailureKind::Timeout, "{f:?}");
            assert!(f.message().contains("HeadBucket"), "{f:?}");
        }
        other => panic!("expected it put back uncounted, got {other:?}"),
    }
    assert!(
        matches!(outcomes[1], PublishOutcome::Published),
        "{outcomes:?}"
    );
    let down_gauge = |v: u8| format!("outbox_s3_down{{bucket=\"{bucket}\"}} {v}");
    assert!(
        publisher.encode_metrics().contains(&down_gauge(1)),
        "{}",
        publisher.encode_metrics()
    );
    // S3 is down: put back at once.
    let started = Instant::now();
    let outcomes = publisher.publish(std::slice::from_ref(&big)).await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(500));
    assert!(
        matches!(&outcomes[0], PublishOutcome::Unavailable(f) if f.message().contains("S3 is down")),
        "{outcomes:?}"
    );
    // Back: the probe finds it, and the event goes.
    proxy.heal();
    let published = outbox_tests::eventually(Duration::from_secs(15), async || {
        let outcomes = publisher.publish(std::slice::from_ref(&big)).await.unwrap();
        matches!(outcomes[0], PublishOutcome::Published)
    })
    .await;
    assert!(published);
    assert!(publisher.encode_metrics().contains(&down_gauge(0)));
    assert_eq!(queue.receive_all(2, Duration::from_secs(5)).await.len(), 2);
}

/// S3 turning silent right after an upload went through is found down as soon as nothing has
/// been heard from it for 5 s (a slow S3 is not taken for down: below), not a whole look later:
/// the batch at such an outage's onset waited 8 s (review).
#[tokio::test]
async fn an_outage_right_after_an_upload_is_found_once_s3_is_silent_for_5_s() {
    let (bucket, queue) = bucket_and_queue().await;
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = publisher(proxy.addr(), &queue, &bucket, Duration::from_secs(20)).await;
    let outcomes = publisher.publish(&[big(1)]).await.unwrap();
    assert!(
        matches!(outcomes[0], PublishOutcome::Published),
        "{outcomes:?}"
    );
    proxy.black_hole();
    let started = Instant::now();
    let outcomes = publisher.publish(&[big(2)]).await.unwrap();
    assert!(
        matches!(&outcomes[0], PublishOutcome::Unavailable(f) if f.kind() == FailureKind::Timeout),
        "{outcomes:?}"
    );
    // Silent for 5 s from the last upload's answer, and at most one probe (2 s) more.
    assert!(
        started.elapsed() < Duration::from_millis(6_500),
        "the batch waited {:?}",
        started.elapsed()
    );
}

/// The watch gives up an upload only when S3 does not answer: a payload that takes seconds on a
/// slow link, while S3 answers its `HeadBucket`s, goes through.
#[tokio::test]
async fn a_slow_upload_goes_on_while_s3_answers() {
    let (bucket, queue) = bucket_and_queue().await;
    // 200 KiB/s up: 700 KiB take 3.5 s, past the watch's first look (1 s) and its second (4 s
    // after the first); the upload's own time-out is 11 s.
    let proxy = DelayProxy::slow_upload(upstream(), 200 * 1024).await;
    let publisher = publisher(proxy.addr(), &queue, &bucket, Duration::from_secs(10)).await;
    let big = event(
        "order.created",
        "order",
        "big",
        1,
        json!("x".repeat(700 * 1024)),
    );
    let started = Instant::now();
    let outcomes = publisher.publish(std::slice::from_ref(&big)).await.unwrap();
    assert!(
        matches!(outcomes[0], PublishOutcome::Published),
        "{outcomes:?}"
    );
    assert!(
        started.elapsed() > Duration::from_secs(2),
        "the link is slow"
    );
    assert_eq!(queue.receive_all(1, Duration::from_secs(5)).await.len(), 1);
}

/// The events of a publish that need no upload are sent while its uploads run: a slow S3
/// (answering in 3-4 s) held the small events of healthy queues behind them, 15 s at the median
/// through per-aggregate order (black-box run). Uploads have in-flight slots of their own: with
/// the calls' slots all held by slow uploads, the others waited all the same (review).
#[tokio::test]
async fn a_slow_upload_does_not_hold_the_events_that_need_none() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("q");
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = fixture_publisher(&fx, &q, proxy.addr(), |b| b.max_in_flight(1)).await;
    proxy.delay_requests(Duration::from_millis(2_500));
    let big = event("order.created", "order", "big", 1, json!("x".repeat(4096)));
    let small = event("order.created", "order", "small", 2, json!("x"));
    let both = [big, small];
    let started = Instant::now();
    let publish = publisher.publish(&both);
    tokio::pin!(publish);
    let mut small_sent_after = None;
    let outcomes = loop {
        tokio::select! {
            outcomes = &mut publish => break outcomes.unwrap(),
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                if small_sent_after.is_none() && fx.messages().iter().any(|m| m.body == "\"x\"") {
                    small_sent_after = Some(started.elapsed());
                }
            }
        }
    };
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, PublishOutcome::Published)),
        "{outcomes:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(2_500),
        "S3 is slow"
    );
    let small_sent_after =
        small_sent_after.expect("the small event was sent before the publish ended");
    assert!(
        small_sent_after < Duration::from_secs(1),
        "the small event waited {small_sent_after:?}"
    );

    // Another publish's upload under way (another worker's batch): the only call slot is not
    // its to hold.
    let uploading = [event(
        "order.created",
        "order",
        "big-2",
        3,
        json!("x".repeat(4096)),
    )];
    let small = [event("order.created", "order", "small-2", 4, json!("y"))];
    let (first, second) = tokio::join!(publisher.publish(&uploading), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        let outcomes = publisher.publish(&small).await;
        (outcomes, started.elapsed())
    });
    assert!(
        first
            .unwrap()
            .iter()
            .all(|o| matches!(o, PublishOutcome::Published)),
        "the upload"
    );
    let (outcomes, took) = second;
    assert!(
        outcomes
            .unwrap()
            .iter()
            .all(|o| matches!(o, PublishOutcome::Published)),
        "the small event"
    );
    assert!(
        took < Duration::from_secs(1),
        "the small event waited {took:?} for another publish's upload"
    );
}

/// On a FIFO queue, an event behind an offloaded one of its message group waits for it, however
/// slow the upload: sent in order, not ahead of it while the upload runs. Another group's goes at
/// once.
#[tokio::test]
async fn a_slow_upload_holds_its_own_groups_later_events_in_order() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("q.fifo");
    let proxy = BlackHoleProxy::start(upstream()).await;
    let publisher = fixture_publisher(&fx, &q, proxy.addr(), |b| b.batch_aggregates(true)).await;
    proxy.delay_requests(Duration::from_millis(1_500));
    let events = [
        event("order.created", "order", "g", 1, json!("x".repeat(4096))),
        event("order.created", "order", "g", 2, json!("after")),
        event("order.created", "order", "other", 3, json!("other")),
    ];
    let started = Instant::now();
    let outcomes = publisher.publish(&events).await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, PublishOutcome::Published)),
        "{outcomes:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1_500),
        "S3 is slow"
    );
    let bodies: Vec<String> = fx.messages().into_iter().map(|m| m.body).collect();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    assert_eq!(
        bodies[0], "\"other\"",
        "the other group goes first: {bodies:?}"
    );
    assert!(
        bodies[1].contains("s3BucketName"),
        "the pointer: {bodies:?}"
    );
    assert_eq!(bodies[2], "\"after\"", "{bodies:?}");
}

/// S3 down when the relay starts: the start-up check passes with a warning and S3 counts as down,
/// so that the events that carry their payload are relayed; the offloaded ones wait, uncounted,
/// until an upload goes through (a missing bucket still fails the check: `offload.rs`), and the
/// check gives S3 3 s, not the call time-out. Before, the relay could not start, or restart,
/// during an S3 outage, and relayed nothing (black-box runs).
#[tokio::test]
async fn the_start_up_check_passes_while_s3_is_down() {
    let (bucket, queue) = bucket_and_queue().await;
    let proxy = BlackHoleProxy::start(upstream()).await;
    proxy.black_hole();
    let publisher = publisher(proxy.addr(), &queue, &bucket, Duration::from_secs(10)).await;
    let started = Instant::now();
    publisher
        .check()
        .await
        .expect("S3 down does not fail the start-up check");
    // Not the call time-out: each start during an S3 outage relayed nothing for 10 s first
    // (black-box run). S3 is given what the in-flight watch gives an upload (5 s of silence).
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "the check waited {:?}",
        started.elapsed()
    );
    let big = event("order.created", "order", "big", 1, json!("x".repeat(4096)));
    let small = event("order.created", "order", "small", 2, json!("x"));
    let started = Instant::now();
    let outcomes = publisher.publish(&[big, small]).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    match &outcomes[0] {
        PublishOutcome::Unavailable(f) => assert!(f.message().contains("S3 is down"), "{f:?}"),
        other => panic!("expected it put back uncounted, got {other:?}"),
    }
    assert!(
        matches!(outcomes[1], PublishOutcome::Published),
        "{outcomes:?}"
    );
}
