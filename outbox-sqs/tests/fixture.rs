//! `SqsPublisher` against the SQS test fixture: injected failures, latency and refused connections.

mod common;

use std::time::{Duration, Instant};

use common::{assert_all_published, builder, event, events, publisher};
use outbox_core::{PublishOutcome, Publisher};
use outbox_sqs::ErrorKind;
use outbox_sqs_fixture::{CallFault, EntryFault, SqsFixture};
use serde_json::json;

/// A publisher to `queue` that makes one call at a time.
async fn one_call_at_a_time(fx: &SqsFixture, queue: &str) -> outbox_sqs::SqsPublisher {
    builder(fx)
        .await
        .default_queue(queue)
        .max_in_flight(1)
        .build()
        .await
        .unwrap()
}

fn permanent(o: &PublishOutcome) -> &str {
    match o {
        PublishOutcome::Permanent(r) => r.message(),
        other => panic!("expected Permanent, got {other:?}"),
    }
}

fn retry(o: &PublishOutcome) -> &str {
    match o {
        PublishOutcome::Retry(r) => r.message(),
        other => panic!("expected Retry, got {other:?}"),
    }
}

fn unavailable(o: &PublishOutcome) -> &str {
    match o {
        PublishOutcome::Unavailable(r) => r.message(),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn partial_batch_failure_fails_only_the_failed_entries() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = publisher(&fx, &q).await;
    fx.fail_entries_where(
        |m| m.body.contains("poison"),
        EntryFault::sender_fault("InvalidParameterValue", "poisoned entry"),
    );
    fx.fail_entries_where(
        |m| {
            m.attributes
                .get("event_type")
                .is_some_and(|t| t == "order.flaky")
        },
        EntryFault::server_error(),
    );

    let mut evs = events(12, "order.created");
    evs[1].set_payload(json!({"note": "poison"}).to_string());
    evs[7].set_payload(json!({"note": "poison"}).to_string());
    evs[4].event_type = "order.flaky".into();
    evs[11].event_type = "order.flaky".into();
    let outcomes = publisher.publish(&evs).await.unwrap();

    for i in [1, 7] {
        let reason = permanent(&outcomes[i]);
        assert!(reason.contains("InvalidParameterValue"), "{reason}");
        assert!(reason.contains("poisoned entry"), "{reason}");
    }
    for i in [4, 11] {
        let reason = retry(&outcomes[i]);
        assert!(reason.contains("InternalError"), "{reason}");
    }
    for i in [0, 2, 3, 5, 6, 8, 9, 10] {
        assert_eq!(outcomes[i], PublishOutcome::Published, "event {i}");
    }
    let mut sent: Vec<String> = fx
        .messages()
        .iter()
        .map(|m| m.attributes["event_id"].clone())
        .collect();
    sent.sort();
    let mut expected: Vec<String> = [0, 2, 3, 5, 6, 8, 9, 10]
        .iter()
        .map(|&i| evs[i].id.to_string())
        .collect();
    expected.sort();
    assert_eq!(sent, expected);
    assert_eq!(fx.calls_to("SendMessageBatch"), 2);
}

/// Attribute values SQS refuses (a character outside its set, an empty value), in rows written by
/// hand past `emit`'s checks: refused before the call, for their event alone. They were sent as
/// they were: SQS refusing them is told per entry or, as fauxqs did for some, not at all.
#[tokio::test]
async fn invalid_attribute_text_is_permanent_for_that_entry_only() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = publisher(&fx, &q).await;
    let mut evs = events(4, "order.created");
    evs[1].aggregate_id = "bad\u{1}id".into(); // bypassing emit's checks
    evs[2].event_type = String::new();
    let outcomes = publisher.publish(&evs).await.unwrap();
    assert_eq!(outcomes[0], PublishOutcome::Published);
    let reason = permanent(&outcomes[1]);
    assert!(reason.contains("aggregate_id holds U+0001"), "{reason}");
    let reason = permanent(&outcomes[2]);
    assert!(reason.contains("event_type would be empty"), "{reason}");
    assert_eq!(outcomes[3], PublishOutcome::Published);
    assert_eq!(fx.messages().len(), 2);
}

#[tokio::test]
async fn server_errors_on_every_call_fail_the_whole_publish() {
    // (Throttling is a queue's own trouble: see tests/breaker.rs.)
    for fault in [CallFault::InternalError, CallFault::ServiceUnavailable] {
        let fx = SqsFixture::start().await;
        let q = fx.create_queue("events");
        let publisher = publisher(&fx, &q).await;
        fx.fail_next_calls(3, fault.clone());
        let err = publisher
            .publish(&events(25, "order.created"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Service, "{fault:?}: {err}");
        assert!(err.is_retryable());
        assert!(
            err.to_string().contains("all 3 SendMessageBatch call(s)"),
            "{err}"
        );
        assert_eq!(fx.calls_to("SendMessageBatch"), 3);
        assert!(fx.messages().is_empty());
        // The fault is spent: the next publish goes through.
        assert_all_published(
            &publisher
                .publish(&events(25, "order.created"))
                .await
                .unwrap(),
        );
    }
}

#[tokio::test]
async fn a_failed_call_among_successful_ones_makes_its_entries_retry() {
    for fault in [CallFault::InternalError, CallFault::ServiceUnavailable] {
        let fx = SqsFixture::start().await;
        let q = fx.create_queue("events");
        // One call at a time: the first batch (events 0–9) gets the fault.
        let publisher = one_call_at_a_time(&fx, &q).await;
        fx.fail_next_calls(1, fault.clone());
        let outcomes = publisher
            .publish(&events(25, "order.created"))
            .await
            .unwrap();
        for (i, o) in outcomes.iter().enumerate() {
            if i < 10 {
                let reason = retry(o);
                assert!(
                    reason.contains("InternalError") || reason.contains("ServiceUnavailable"),
                    "{reason}"
                );
            } else {
                assert_eq!(o, &PublishOutcome::Published, "{fault:?} event {i}");
            }
        }
        assert_eq!(fx.messages().len(), 15);
    }
}

#[tokio::test]
async fn a_batch_refused_as_a_whole_for_its_content_is_resent_entry_by_entry() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = publisher(&fx, &q).await;
    // The whole call is refused as invalid; then entry "poison" keeps being refused.
    fx.fail_next_calls(
        1,
        CallFault::Error {
            status: 400,
            code: "InvalidParameterValue".into(),
            message: "one of the entries is invalid".into(),
        },
    );
    fx.fail_entries_where(
        |m| m.body.contains("poison"),
        EntryFault::sender_fault("InvalidMessageContents", "bad body"),
    );
    let mut evs = events(3, "order.created");
    evs[1].set_payload(json!("poison").to_string());
    let outcomes = publisher.publish(&evs).await.unwrap();
    assert_eq!(outcomes[0], PublishOutcome::Published);
    assert!(permanent(&outcomes[1]).contains("InvalidMessageContents"));
    assert_eq!(outcomes[2], PublishOutcome::Published);
    assert_eq!(
        fx.calls_to("SendMessageBatch"),
        4,
        "1 batch + 3 single-entry calls"
    );
}

#[tokio::test]
async fn refused_connections_fail_the_whole_publish_until_the_server_is_back() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = publisher(&fx, &q).await;
    // Open a pooled connection first: it must be closed too.
    assert_all_published(
        &publisher
            .publish(&events(1, "order.created"))
            .await
            .unwrap(),
    );

    fx.refuse_connections().await;
    let err = publisher
        .publish(&events(15, "order.created"))
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Unavailable | ErrorKind::Service),
        "{err:?}"
    );
    assert!(err.is_retryable());

    fx.accept_connections().await;
    assert_all_published(
        &publisher
            .publish(&events(15, "order.created"))
            .await
            .unwrap(),
    );

    // And with a timed outage.
    fx.refuse_connections_for(Duration::from_millis(300)).await;
    let err = publisher
        .publish(&events(1, "order.created"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_all_published(
        &publisher
            .publish(&events(1, "order.created"))
            .await
            .unwrap(),
    );
}

#[tokio::test]
async fn calls_beyond_the_call_timeout_are_retried() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = builder(&fx)
        .await
        .default_queue(q.as_str())
        .call_timeout(Duration::from_millis(150))
        .build()
        .await
        .unwrap();
    fx.set_latency(Duration::from_millis(600));
    let started = Instant::now();
    let err = publisher
        .publish(&events(20, "order.created"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.to_string().contains("150 ms"), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(550),
        "{:?}",
        started.elapsed()
    );

    // Some calls in time, some not: the late call's entries are Retry. One call at a time, the
    // latency lifted while the second call waits: only the first call is late.
    let publisher = builder(&fx)
        .await
        .default_queue(q.as_str())
        .call_timeout(Duration::from_millis(150))
        .max_in_flight(1)
        .build()
        .await
        .unwrap();
    let evs = events(20, "order.created");
    let publish = publisher.publish(&evs);
    let lift = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        fx.set_latency(Duration::ZERO);
    };
    let (outcomes, ()) = tokio::join!(publish, lift);
    let outcomes = outcomes.unwrap();
    for (i, o) in outcomes.iter().enumerate() {
        if i < 10 {
            assert!(retry(o).contains("no answer within 150 ms"), "{o:?}");
        } else {
            assert_eq!(o, &PublishOutcome::Published, "event {i}");
        }
    }
}

#[tokio::test]
async fn several_calls_are_in_flight_at_once() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = publisher(&fx, &q).await;
    // Warm up the connection pool's first connection.
    assert_all_published(
        &publisher
            .publish(&events(1, "order.created"))
            .await
            .unwrap(),
    );
    fx.set_latency(Duration::from_millis(100));
    fx.reset_counters();

    let started = Instant::now();
    let outcomes = publisher
        .publish(&events(50, "order.created"))
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_all_published(&outcomes);
    assert_eq!(fx.calls_to("SendMessageBatch"), 5);
    assert!(
        elapsed < Duration::from_millis(400),
        "5 calls of 100 ms took {elapsed:?}: not concurrent"
    );
    assert_eq!(fx.max_concurrent_calls(), 5);

    // The limit holds: at most 2 at once.
    let limited = builder(&fx)
        .await
        .default_queue(q.as_str())
        .max_in_flight(2)
        .build()
        .await
        .unwrap();
    fx.reset_counters();
    let started = Instant::now();
    assert_all_published(&limited.publish(&events(50, "order.created")).await.unwrap());
    assert_eq!(fx.max_concurrent_calls(), 2);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn fifo_group_spilling_over_batches_is_sent_in_order_and_held_back_after_a_failure() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("orders.fifo");
    let publisher = publisher(&fx, &q).await;

    // 12 events of one aggregate (the relay with ordering off) and 2 of another.
    let mut evs: Vec<_> = (1..=12)
        .map(|seq| event("order.updated", "order", "A", seq, json!({"seq": seq})))
        .collect();
    evs.push(event("order.updated", "order", "B", 13, json!({"seq": 13})));
    evs.push(event("order.updated", "order", "B", 14, json!({"seq": 14})));
    // Handed over out of order: the publisher sorts by seq.
    evs.swap(0, 5);
    let outcomes = publisher.publish(&evs).await.unwrap();
    assert_all_published(&outcomes);
    let sent = fx.take_messages();
    let a: Vec<String> = sent
        .iter()
        .filter(|m| m.group_id.as_deref() == Some("order:A"))
        .map(|m| m.body.clone())
        .collect();
    let expected: Vec<String> = (1..=12).map(|s| format!("{{\"seq\":{s}}}")).collect();
    assert_eq!(a, expected);
    assert!(sent.iter().all(|m| m.dedup_id.is_some()));

    // Event seq 3 of A fails: A's events in the next batch (seq 11, 12) are held back, not sent,
    // so no attempt counts against them (it did: with ordering off, or two aggregates sharing a
    // group, nothing else forgave it, and an event could be dead-lettered without ever being sent).
    fx.fail_entries_where(|m| m.body == "{\"seq\":3}", EntryFault::server_error());
    let evs: Vec<_> = (1..=12)
        .map(|seq| event("order.updated", "order", "A", seq, json!({"seq": seq})))
        .chain([event("order.updated", "order", "B", 13, json!({"seq": 13}))])
        .collect();
    let outcomes = publisher.publish(&evs).await.unwrap();
    assert!(retry(&outcomes[2]).contains("InternalError"));
    for i in [10, 11] {
        assert!(
            unavailable(&outcomes[i]).contains("not sent"),
            "{:?}",
            outcomes[i]
        );
    }
    for i in (0..10).filter(|&i| i != 2).chain([12]) {
        assert_eq!(outcomes[i], PublishOutcome::Published, "event {i}");
    }
}

#[tokio::test]
async fn a_too_large_message_is_permanent_without_a_call() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = publisher(&fx, &q).await;
    let e = event(
        "order.created",
        "order",
        "1",
        1,
        json!("x".repeat(1024 * 1024)),
    );
    let outcomes = publisher.publish(&[e]).await.unwrap();
    assert!(permanent(&outcomes[0]).contains("SQS accepts at most 1048576"));
    assert_eq!(fx.calls(), 0);
}

/// A queue's own lower limit, raised since it was read, is read again before an event over the
/// old one is refused: a queue raised from 1 KiB to 256 KiB still had its retried dead letters
/// refused at 1 KiB, the error naming SQS's limit, until the relay restarted (black-box run).
#[tokio::test]
async fn a_queues_raised_limit_is_read_again_before_an_event_over_the_old_one_is_refused() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    fx.set_max_message_size("events", 2048);
    let publisher = publisher(&fx, &q).await;
    publisher.check().await.unwrap();
    let big = |seq| event("order.created", "order", "1", seq, json!("x".repeat(4096)));
    let outcomes = publisher.publish(&[big(1)]).await.unwrap();
    let refusal = permanent(&outcomes[0]);
    assert!(
        refusal.contains("the queue takes at most 2048 (its MaximumMessageSize)"),
        "{refusal}"
    );
    fx.set_max_message_size("events", 262_144);
    // Read again at most every 5 s.
    tokio::time::sleep(Duration::from_millis(5_200)).await;
    let outcomes = publisher.publish(&[big(2)]).await.unwrap();
    assert_eq!(outcomes[0], PublishOutcome::Published);
    assert_eq!(fx.messages().len(), 1);
}

/// A payload holding a character SQS refuses in a body is refused for its event alone, without a
/// call (SQS refused it itself, in its words).
#[tokio::test]
async fn a_payload_with_a_character_sqs_refuses_is_refused_without_a_call() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = publisher(&fx, &q).await;
    let bad = event("order.created", "order", "1", 1, json!("\u{FFFF}"));
    let outcomes = publisher.publish(&[bad]).await.unwrap();
    let refusal = permanent(&outcomes[0]);
    assert!(
        refusal.contains("the payload holds U+FFFF at byte 1, which SQS does not accept"),
        "{refusal}"
    );
    assert_eq!(fx.calls(), 0);
}

/// A queue's limit lowered while the relay runs: SQS's refusal names the new limit, which is taken
/// at once; the events it refused are put back once, uncounted, and their next attempt is refused
/// (or offloaded) without a call, in the relay's own words. Before, each was dead-lettered with
/// SQS's refusal (`InvalidParameterValue`), and retrying did not help until a restart (black-box
/// run).
#[tokio::test]
async fn a_queues_limit_lowered_since_it_was_read_is_taken_from_sqss_refusal() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let publisher = publisher(&fx, &q).await;
    publisher.check().await.unwrap();
    fx.set_max_message_size("events", 2048);
    let big = |id: &str, seq| event("order.created", "order", id, seq, json!("x".repeat(4096)));
    let small = event("order.created", "order", "3", 1, json!("x"));
    let outcomes = publisher
        .publish(&[big("1", 1), big("2", 1), small.clone()])
        .await
        .unwrap();
    for outcome in &outcomes[..2] {
        let put_back = unavailable(outcome);
        assert!(
            put_back.contains("longer than 2048 bytes, the queue's limit now"),
            "{put_back}"
        );
    }
    assert_eq!(outcomes[2], PublishOutcome::Published);
    let calls = fx.calls();
    let outcomes = publisher
        .publish(&[big("1", 1), big("2", 1)])
        .await
        .unwrap();
    for outcome in &outcomes {
        let refusal = permanent(outcome);
        assert!(
            refusal.contains("the queue takes at most 2048 (its MaximumMessageSize)"),
            "{refusal}"
        );
    }
    assert_eq!(fx.calls(), calls, "refused without a call");
    assert_eq!(fx.messages().len(), 1);
}

/// Throughput through the fixture (ignored: run with `--ignored --nocapture`, ideally `--release`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn throughput_100k_events_through_the_fixture() {
    let fx = SqsFixture::start().await;
    fx.set_recording(false);
    let q = fx.create_queue("bench");
    let publisher = publisher(&fx, &q).await;
    let all = events(100_000, "order.created");
    let started = Instant::now();
    // Calls of 100 events, 4 at once, as relay workers would.
    let mut chunks = all.chunks(100);
    loop {
        let batch: Vec<_> = chunks.by_ref().take(4).collect();
        if batch.is_empty() {
            break;
        }
        let results =
            futures::future::join_all(batch.into_iter().map(|c| publisher.publish(c))).await;
        for r in results {
            assert_all_published(&r.unwrap());
        }
    }
    let elapsed = started.elapsed();
    assert_eq!(fx.accepted(), 100_000);
    println!(
        "100000 events in {elapsed:?}: {:.0} events/s, {} calls",
        100_000.0 / elapsed.as_secs_f64(),
        fx.calls_to("SendMessageBatch")
    );
}

#[tokio::test]
async fn a_server_error_closes_its_connection_and_the_next_call_opens_another() {
    // A front end that answers 5xx (an unhealthy host behind SQS's endpoint) is left: the next
    // call may reach a healthy one (as the AWS SDK does). Success keeps the connection.
    for fault in [CallFault::InternalError, CallFault::ServiceUnavailable] {
        let fx = SqsFixture::start().await;
        let q = fx.create_queue("events");
        let publisher = one_call_at_a_time(&fx, &q).await;
        let publish = async || publisher.publish(&events(10, "order.created")).await;
        assert_all_published(&publish().await.unwrap());
        let opened = fx.connections();
        assert_all_published(&publish().await.unwrap());
        assert_eq!(
            fx.connections(),
            opened,
            "a successful call keeps its connection"
        );

        fx.fail_next_calls(1, fault.clone());
        let calls = fx.calls();
        let _ = publish().await;
        assert_eq!(fx.calls(), calls + 1, "{fault:?} answered one call");
        assert_all_published(&publish().await.unwrap());
        assert_eq!(
            fx.connections(),
            opened + 1,
            "{fault:?}: the call after a server error is sent on a new connection"
        );
    }
}
