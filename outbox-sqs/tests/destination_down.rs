//! One destination that does not answer (an SNS topic behind a proxy that black-holes it; the
//! SQS queue straight to the server): found seconds into a call, not at its time-out; its events
//! are put back uncounted while the other destination's go on; found back by a probe of its own.

mod aws;
mod common;

use std::time::{Duration, Instant};

use aws::{TestTopic, upstream};
use common::event;
use outbox_core::{FailureKind, PublishOutcome, Publisher};
use outbox_sqs::SqsPublisher;
use outbox_sqs_fixture::SqsFixture;
use outbox_tests::BlackHoleProxy;
use outbox_tests::sqs::{TestQueue, endpoint, sdk_config_for};
use serde_json::json;

/// A call wait longer than any call here: publishes wait for their calls.
const WAIT_FOR_CALLS: Duration = Duration::from_secs(3600);

/// A black-holed topic held every publish with one of its events for the call's time-out (10 s
/// by default), and through per-aggregate order the other destinations' aggregates with it; its
/// events were charged an attempt per claim (black-box run: a healthy queue's events 39 s late
/// while a topic was black-holed for 40 s). Found down 5 s into the first call, it holds no
/// later publish; the first call runs on to its time-out (a call given up may still be carried
/// out).
#[tokio::test]
async fn a_destination_that_does_not_answer_holds_up_only_its_own_events() {
    let Setup {
        queue,
        subscriber,
        proxy,
        publisher,
        _topic,
    } = Setup::new(Duration::from_secs(10)).await;
    let audit = |seq| event("audit.logged", "audit", "a", seq, json!({"n": seq}));
    let order = |seq| event("order.placed", "order", "o", seq, json!({"n": seq}));

    proxy.black_hole();
    let started = Instant::now();
    let first = tokio::spawn({
        let publisher = publisher.clone();
        async move { publisher.publish(&[audit(1), order(2)]).await }
    });
    // Silent for 5 s, the call included (a probe's 2 s at most more): down, long before the
    // call's own time-out (10 s).
    tokio::time::sleep(Duration::from_millis(7_500)).await;

    // Down: put back at once, without a call, while the queue's events go on.
    let asked = Instant::now();
    let outcomes = publisher.publish(&[audit(3), order(4)]).await.unwrap();
    assert!(asked.elapsed() < Duration::from_millis(500));
    match &outcomes[0] {
        PublishOutcome::Unavailable(f) => {
            assert!(f.message().contains("does not answer"), "{f:?}")
        }
        other => panic!("expected it put back uncounted, got {other:?}"),
    }
    assert_eq!(outcomes[1], PublishOutcome::Published, "{outcomes:?}");
    // A publish with only its events puts them back too, while the queue answers: failing as a
    // whole, released at once, they came back at the head of every claim and starved the queue's
    // events (review). (With every destination down, the publish fails as a whole: an outage.)
    let outcomes = publisher.publish(&[audit(5)]).await.unwrap();
    assert!(
        matches!(&outcomes[0], PublishOutcome::Unavailable(f) if f.message().contains("does not answer")),
        "{outcomes:?}"
    );
    // The call found silent is not given up (it was sent: the topic may still take it): it runs
    // on to its time-out, and its events are put back uncounted then.
    let outcomes = first.await.unwrap().unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    match &outcomes[0] {
        PublishOutcome::Unavailable(f) => assert_eq!(f.kind(), FailureKind::Timeout, "{f:?}"),
        other => panic!("expected it put back uncounted, got {other:?}"),
    }
    assert_eq!(outcomes[1], PublishOutcome::Published, "{outcomes:?}");

    // Back: its probe finds it, and its events go.
    proxy.heal();
    let published = outbox_tests::eventually(Duration::from_secs(15), async || {
        let outcomes = publisher.publish(&[audit(6)]).await;
        matches!(outcomes.as_deref(), Ok([PublishOutcome::Published]))
    })
    .await;
    assert!(published);
    assert_eq!(queue.receive_all(2, Duration::from_secs(5)).await.len(), 2);
    assert_eq!(
        subscriber
            .receive_all(1, Duration::from_secs(5))
            .await
            .len(),
        1
    );
}

/// A queue, and a topic subscribed by another queue behind a proxy, and a publisher routing
/// `audit.*` to the topic and the rest to the queue.
struct Setup {
    queue: TestQueue,
    subscriber: TestQueue,
    proxy: BlackHoleProxy,
    publisher: SqsPublisher,
    _topic: TestTopic,
}

impl Setup {
    async fn new(call_timeout: Duration) -> Setup {
        let setup = Setup::unchecked(call_timeout).await;
        setup.publisher.check().await.unwrap();
        setup
    }

    /// Without the start-up check.
    async fn unchecked(call_timeout: Duration) -> Setup {
        let queue = TestQueue::standard().await;
        let topic = TestTopic::standard().await;
        let subscriber = TestQueue::standard().await;
        topic.subscribe(&subscriber, true).await;
        let proxy = BlackHoleProxy::start(upstream()).await;
        // SQS straight to the server; SNS (the configuration's endpoint) through the proxy.
        let sqs = aws_sdk_sqs::Client::new(&sdk_config_for(&endpoint()).await);
        let publisher = SqsPublisher::builder()
            .sdk_config(sdk_config_for(&format!("http://{}", proxy.addr())).await)
            .client(sqs)
            .max_attempts(1)
            .call_timeout(call_timeout)
            // Publishes wait for their calls: these tests read the watch's findings from them
            // (calls going on without their publish: `slow_destination.rs`).
            .call_wait(WAIT_FOR_CALLS)
            .breaker_probe_interval(Duration::from_secs(1))
            .route("audit.*", &topic.arn)
            .default_queue(queue.url())
            .build()
            .await
            .unwrap();
        Setup {
            queue,
            subscriber,
            proxy,
            publisher,
            _topic: topic,
        }
    }
}

/// A topic answering every request in 3.5 s is slow, not down, at the first call after an idle
/// spell too: nothing heard for 5 s, the call was given up 3 s in (black-box run, S3's uploads).
#[tokio::test]
async fn a_slow_destination_is_not_taken_for_down_after_an_idle_spell() {
    // Nothing heard from it yet: no start-up check.
    let setup = Setup::unchecked(Duration::from_secs(10)).await;
    let (proxy, publisher) = (&setup.proxy, &setup.publisher);
    proxy.delay_requests(Duration::from_millis(3_500));
    let outcomes = publisher
        .publish(&[event("audit.logged", "audit", "a", 1, json!({}))])
        .await
        .unwrap();
    assert_eq!(outcomes[0], PublishOutcome::Published, "{outcomes:?}");
}

/// A call time-out under 3 s: the watch looks at a third of it, and its probe ends with it (at
/// 1 s and 2 s, the time-out cut the probe short: the destination was never found down, and its
/// events were charged an attempt per claim, as before the watch; review).
#[tokio::test]
async fn a_short_call_timeout_still_finds_a_silent_destination_down() {
    // Bound whole: a queue or topic dropped is deleted.
    let setup = Setup::new(Duration::from_millis(1_500)).await;
    let (proxy, publisher) = (&setup.proxy, &setup.publisher);
    proxy.black_hole();
    let audit = event("audit.logged", "audit", "a", 1, json!({}));
    let outcomes = publisher.publish(std::slice::from_ref(&audit)).await;
    // Alone in its publish: every call failed, an outage; put back, never counted.
    assert!(outcomes.is_err(), "{outcomes:?}");
    let outcomes = publisher
        .publish(&[audit, event("order.placed", "order", "o", 2, json!({}))])
        .await
        .unwrap();
    match &outcomes[0] {
        PublishOutcome::Unavailable(f) => {
            assert!(f.message().contains("does not answer"), "{f:?}")
        }
        other => panic!("expected it put back uncounted, got {other:?}"),
    }
    assert_eq!(outcomes[1], PublishOutcome::Published, "{outcomes:?}");
}

/// SNS silent at start-up while SQS answers: the relay starts with the topic down (logged at
/// `error`, as likely a wrong endpoint), so that the queue's events are relayed. Failing the start
/// instead stalled every destination: a topic answering in 2-12 s, the only one of SNS, failed
/// half the relay's restarts and all delivery with them (black-box run).
#[tokio::test]
async fn a_silent_service_starts_down_while_another_answers() {
    let setup = Setup::unchecked(Duration::from_secs(10)).await;
    setup.proxy.black_hole();
    let started = Instant::now();
    setup.publisher.check().await.unwrap();
    let took = started.elapsed();
    // Given 5 s, not the call time-out (10 s): a start waited that long, relaying nothing.
    assert!(
        took < Duration::from_millis(7_000),
        "the check waited {took:?}"
    );
    let outcomes = setup
        .publisher
        .publish(&[
            event("audit.logged", "audit", "a", 1, json!({})),
            event("order.placed", "order", "o", 2, json!({})),
        ])
        .await
        .unwrap();
    assert!(
        matches!(&outcomes[0], PublishOutcome::Unavailable(f) if f.message().contains("does not answer")),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[1], PublishOutcome::Published, "{outcomes:?}");
}

/// Nothing answering the start-up check fails it: a wrong endpoint, or no network. The error
/// names every destination (black-box run: it named only the first, as if the others were fine).
#[tokio::test]
async fn nothing_answering_fails_the_start_up_check() {
    let fx = SqsFixture::start().await;
    let a = fx.create_queue("a");
    let b = fx.create_queue("b");
    let publisher = a_and_b(&fx, &a, &b).await;
    fx.silence_queue("a");
    fx.silence_queue("b");
    let err = publisher.check().await.expect_err("nothing answers");
    assert_eq!(err.kind(), outbox_sqs::ErrorKind::Timeout, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("`{a}`")) && text.contains(&format!("`{b}`")),
        "{text}"
    );
}

/// Every destination refusing connections: the error names each (it named the first only:
/// black-box run).
#[tokio::test]
async fn nothing_reachable_names_every_destination() {
    let fx = SqsFixture::start().await;
    let a = fx.create_queue("a");
    let b = fx.create_queue("b");
    let publisher = a_and_b(&fx, &a, &b).await;
    fx.refuse_connections().await;
    let err = publisher.check().await.expect_err("nothing is reachable");
    assert_eq!(err.kind(), outbox_sqs::ErrorKind::Unavailable, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("`{a}`")) && text.contains(&format!("`{b}`")),
        "{text}"
    );
}

/// A refusal (here a queue that does not exist) is the start-up check's error even when the
/// destinations before it are silent: it is a setting to fix, and may explain the silence.
#[tokio::test]
async fn a_missing_queue_is_the_error_even_after_a_silent_one() {
    let fx = SqsFixture::start().await;
    let missing = fx.queue_url("missing");
    let b = fx.create_queue("b");
    // The routed queue (`b`, silent) is checked first, the default (missing) second.
    let publisher = a_and_b(&fx, &missing, &b).await;
    fx.silence_queue("b");
    let err = publisher
        .check()
        .await
        .expect_err("the default queue does not exist");
    assert_eq!(err.kind(), outbox_sqs::ErrorKind::QueueNotFound, "{err}");
}

/// Destinations that all answer slowly (in 6 s, within the call time-out) pass the start-up
/// check: the check gives up on the unanswered after 5 s only once another has answered (given
/// 5 s whatever answered, such a relay failed most starts: review).
#[tokio::test]
async fn destinations_that_all_answer_slowly_pass_the_start_up_check() {
    let fx = SqsFixture::start().await;
    let a = fx.create_queue("a");
    let b = fx.create_queue("b");
    fx.slow_queue("a", Duration::from_secs(6));
    fx.slow_queue("b", Duration::from_secs(6));
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config_for(&fx.endpoint_url()).await)
        .max_attempts(1)
        .call_timeout(Duration::from_secs(10))
        .default_queue(a.as_str())
        .route("b.*", b.as_str())
        .build()
        .await
        .unwrap();
    publisher.check().await.unwrap();
}

/// A publisher of the fixture's queues `a` (the default) and `b` (`b.*`), with a 1.5 s call
/// time-out and a probe a second.
async fn a_and_b(fx: &SqsFixture, a: &str, b: &str) -> SqsPublisher {
    SqsPublisher::builder()
        .sdk_config(sdk_config_for(&fx.endpoint_url()).await)
        .max_attempts(1)
        .call_timeout(Duration::from_millis(1_500))
        .breaker_probe_interval(Duration::from_secs(1))
        .route("b.*", b)
        .default_queue(a)
        .build()
        .await
        .unwrap()
}

/// A queue silent at start-up while another queue answers: the relay starts with it down, its
/// events waiting uncounted (black-box run: one black-holed queue failed every relay's restart,
/// and all delivery with it).
#[tokio::test]
async fn a_queue_silent_at_start_up_starts_down_while_another_answers() {
    let fx = SqsFixture::start().await;
    let a = fx.create_queue("a");
    let b = fx.create_queue("b");
    fx.silence_queue("b");
    let publisher = a_and_b(&fx, &a, &b).await;
    publisher
        .check()
        .await
        .expect("queue a answers: the relay starts");
    let to_b = event("b.thing", "x", "1", 1, json!({}));
    let started = Instant::now();
    let outcomes = publisher
        .publish(&[to_b.clone(), event("a.thing", "y", "1", 2, json!({}))])
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_millis(500));
    match &outcomes[0] {
        PublishOutcome::Unavailable(f) => {
            assert!(f.message().contains("does not answer"), "{f:?}")
        }
        other => panic!("expected it put back uncounted, got {other:?}"),
    }
    assert_eq!(outcomes[1], PublishOutcome::Published, "{outcomes:?}");
    // Down shows (the breaker's gauges stayed at 0 through black holes: black-box run).
    let down_gauge = |v: u8| format!("outbox_sqs_queue_down{{queue=\"{b}\"}} {v}");
    assert!(
        publisher.encode_metrics().contains(&down_gauge(1)),
        "{}",
        publisher.encode_metrics()
    );
    assert!(
        publisher
            .encode_metrics()
            .contains(&format!("outbox_sqs_queue_down{{queue=\"{a}\"}} 0"))
    );
    // Back: found by its probe.
    fx.answer_queue("b");
    let published = outbox_tests::eventually(Duration::from_secs(10), async || {
        let outcomes = publisher.publish(std::slice::from_ref(&to_b)).await;
        matches!(outcomes.as_deref(), Ok([PublishOutcome::Published]))
    })
    .await;
    assert!(published);
    assert!(publisher.encode_metrics().contains(&down_gauge(0)));
}

/// A queue silent at start-up has its own `MaximumMessageSize` read once its probe finds it back:
/// it kept SQS's 1 MiB for the rest of the process, and a message over the queue's own limit was
/// sent, for SQS to refuse, instead of being offloaded or refused without a call.
#[tokio::test]
async fn a_queue_found_back_has_its_own_message_limit_read() {
    let fx = SqsFixture::start().await;
    let a = fx.create_queue("a");
    let b = fx.create_queue("b");
    fx.set_max_message_size("b", 2048);
    fx.silence_queue("b");
    let publisher = a_and_b(&fx, &a, &b).await;
    publisher.check().await.expect("queue a answers");
    fx.answer_queue("b");
    let big = event("b.thing", "x", "1", 1, json!("x".repeat(4096)));
    let mut last = None;
    let answered = outbox_tests::eventually(Duration::from_secs(10), async || {
        let outcomes = publisher.publish(std::slice::from_ref(&big)).await.unwrap();
        let waiting = matches!(outcomes[0], PublishOutcome::Unavailable(_));
        last = Some(outcomes);
        !waiting
    })
    .await;
    assert!(answered, "{last:?}");
    match last.as_deref() {
        Some([PublishOutcome::Permanent(f)]) => {
            assert_eq!(f.kind(), FailureKind::TooLarge, "{f:?}");
            assert!(f.message().contains("at most 2048"), "{f:?}");
        }
        other => panic!("expected it refused as too large for the queue, got {other:?}"),
    }
}

/// While a queue is down, its events are put back before their payloads are offloaded: each
/// claim uploaded them to S3 again, for nothing, while it was down. The other queue's go on.
#[tokio::test]
async fn a_down_queues_large_events_are_not_offloaded_while_it_is_down() {
    let fx = SqsFixture::start().await;
    let a = fx.create_queue("a");
    let b = fx.create_queue("b");
    fx.silence_queue("b");
    let s3 = aws::s3_client().await;
    let bucket = aws::bucket_name();
    aws::create_bucket(&s3, &bucket).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk_config_for(&fx.endpoint_url()).await);
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config_for(&endpoint()).await)
        .client(sqs)
        .max_attempts(1)
        .call_timeout(Duration::from_millis(1_500))
        .breaker_probe_interval(Duration::from_secs(3600))
        .route("b.*", b.as_str())
        .default_queue(a.as_str())
        .offload_bucket(&bucket)
        .offload_threshold(1024)
        .build()
        .await
        .unwrap();
    publisher.check().await.expect("queue a answers");
    let to_b = event("b.thing", "x", "1", 1, json!("x".repeat(4096)));
    let to_a = event("a.thing", "y", "1", 2, json!("y".repeat(4096)));
    let started = Instant::now();
    let outcomes = publisher
        .publish(&[to_b.clone(), to_a.clone()])
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(
        matches!(&outcomes[0], PublishOutcome::Unavailable(f) if f.message().contains("does not answer")),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[1], PublishOutcome::Published, "{outcomes:?}");
    let key = |e: &outbox_core::ClaimedEvent| outbox_sqs::offload_key(&e.id.to_string());
    assert!(aws::get_object(&s3, &bucket, &key(&to_a)).await.is_some());
    assert_eq!(
        aws::get_object(&s3, &bucket, &key(&to_b)).await,
        None,
        "uploaded for a queue that is down"
    );
}

/// With every destination down, a publish of events with no route alone settles them (dead
/// letters, "no SQS route") instead of failing as a whole (review).
#[tokio::test]
async fn events_with_no_route_are_settled_while_every_destination_is_down() {
    let fx = SqsFixture::start().await;
    let b = fx.create_queue("b");
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config_for(&fx.endpoint_url()).await)
        .max_attempts(1)
        .call_timeout(Duration::from_millis(1_500))
        .breaker_probe_interval(Duration::from_secs(3600))
        .route("b.*", b.as_str())
        .build()
        .await
        .unwrap();
    fx.silence_queue("b");
    let to_b = event("b.thing", "x", "1", 1, json!({}));
    let down_gauge = format!("outbox_sqs_queue_down{{queue=\"{b}\"}} 1");
    let down = outbox_tests::eventually(Duration::from_secs(15), async || {
        let failed = publisher.publish(std::slice::from_ref(&to_b)).await;
        failed.is_err() && publisher.encode_metrics().contains(&down_gauge)
    })
    .await;
    assert!(down, "the only queue is down");
    let lost = event("nowhere.thing", "y", "1", 2, json!({}));
    let outcomes = publisher.publish(&[lost]).await.unwrap();
    assert!(
        matches!(&outcomes[0], PublishOutcome::Permanent(f) if f.kind() == FailureKind::NoRoute),
        "{outcomes:?}"
    );
    assert!(publisher.publish(&[to_b]).await.is_err(), "still down");
}

/// A queue that answers, however slowly, is not down for long: once it has answered, a call past
/// the watch's probe goes on to its time-out, and its probe is given the call time-out. Before, a
/// destination answering in 2-12 s was taken for down at every probe, and its probe (given at
/// most the probe interval) seldom found it back: almost nothing got through (black-box run).
#[tokio::test]
async fn a_slow_queue_is_not_taken_for_down() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("slow");
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config_for(&fx.endpoint_url()).await)
        .max_attempts(1)
        .call_timeout(Duration::from_secs(10))
        .call_wait(WAIT_FOR_CALLS)
        .breaker_probe_interval(Duration::from_secs(1))
        .default_queue(q.as_str())
        .build()
        .await
        .unwrap();
    publisher.check().await.unwrap();
    // Every answer 4 s late: past the watch's look (1 s) and its probe (2 s).
    fx.set_latency(Duration::from_secs(4));
    let until = Instant::now() + Duration::from_secs(16);
    let mut published = 0;
    let mut seq = 0;
    while Instant::now() < until {
        seq += 1;
        let outcomes = publisher
            .publish(&[event("order.placed", "order", "o", seq, json!({}))])
            .await;
        if matches!(outcomes.as_deref(), Ok([PublishOutcome::Published])) {
            published += 1;
        } else {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert!(published >= 2, "{published} published in 16 s");
}
