//! SNS topics as destinations, against the local emulator (fauxqs: SQS, SNS and S3 on one port;
//! `bash scripts/services.sh` starts it): fan-out to SQS subscriptions with raw message delivery on
//! and off, FIFO topics, routing a relay's events to topics and queues at once, a deleted topic.

mod aws;
mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws::TestTopic;
use common::{assert_all_published, body, event, events};
use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome, Publisher};
use outbox_sqs::{ErrorKind, SNS_LIMITS, SqsPublisher, message_group_id};
use outbox_tests::sqs::{ReceivedMessage, TestQueue, endpoint, sdk_config};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

fn attributes_of(e: &ClaimedEvent) -> BTreeMap<String, String> {
    let mut m = BTreeMap::from([
        ("event_id".to_owned(), e.id.to_string()),
        ("event_type".to_owned(), e.event_type.clone()),
        ("aggregate_type".to_owned(), e.aggregate_type.clone()),
        ("aggregate_id".to_owned(), e.aggregate_id.clone()),
    ]);
    if let Some(tp) = e.traceparent() {
        m.insert("traceparent".to_owned(), tp.to_owned());
    }
    m
}

fn by_event_id(messages: Vec<ReceivedMessage>) -> HashMap<String, ReceivedMessage> {
    let mut map = HashMap::new();
    for m in messages {
        let id = m.attributes["event_id"].clone();
        assert!(
            map.insert(id.clone(), m).is_none(),
            "event {id} received twice"
        );
    }
    map
}

/// A publisher on the local emulator with these routes.
async fn publisher(routes: &[(&str, &str)]) -> SqsPublisher {
    let mut b = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(endpoint());
    for (pattern, target) in routes {
        b = b.route(*pattern, *target);
    }
    b.build().await.unwrap()
}

#[tokio::test]
async fn a_topic_fans_out_to_raw_and_enveloped_subscriptions_and_a_queue_route_still_works() {
    let topic = TestTopic::standard().await;
    let raw = TestQueue::standard().await;
    let enveloped = TestQueue::standard().await;
    let audit = TestQueue::standard().await;
    topic.subscribe(&raw, true).await;
    topic.subscribe(&enveloped, false).await;
    let p = publisher(&[("order.*", &topic.arn), ("audit.*", audit.url())]).await;
    p.check().await.unwrap();
    // A route to a topic: the publisher states SNS's limits.
    assert_eq!(p.limits(), SNS_LIMITS);

    let mut orders = events(13, "order.created");
    orders[0].set_payload(json!({"nested": {"list": [1, 2.5]}, "unicode": "ünï ✓"}).to_string());
    orders[3].set_metadata(
        json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
            .to_string(),
    );
    orders[4].aggregate_id = "id with spaces / and: punctuation".into();
    let audits = events(3, "audit.logged");
    let all: Vec<ClaimedEvent> = orders.iter().chain(&audits).cloned().collect();
    assert_all_published(&p.publish(&all).await.unwrap());

    // Raw delivery: the body and the attributes exactly as on a queue.
    let got = by_event_id(raw.receive_all(orders.len(), WAIT).await);
    assert_eq!(got.len(), orders.len());
    for e in &orders {
        let m = &got[&e.id.to_string()];
        assert_eq!(m.body, body(e));
        assert_eq!(m.attributes, attributes_of(e));
        assert!(m.attribute_types.values().all(|t| t == "String"), "{m:?}");
    }

    // Without raw delivery: SNS's JSON envelope, the payload in `Message`, the attributes in
    // `MessageAttributes`.
    let got = enveloped.receive_all(orders.len(), WAIT).await;
    assert_eq!(got.len(), orders.len());
    let mut seen = HashMap::new();
    for m in got {
        let envelope: Value = serde_json::from_str(&m.body).unwrap();
        assert_eq!(envelope["Type"], "Notification");
        assert_eq!(envelope["TopicArn"], topic.arn.as_str());
        let attributes: BTreeMap<String, String> = envelope["MessageAttributes"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                assert_eq!(v["Type"], "String", "{k}");
                (k.clone(), v["Value"].as_str().unwrap().to_owned())
            })
            .collect();
        let id = attributes["event_id"].clone();
        seen.insert(
            id,
            (envelope["Message"].as_str().unwrap().to_owned(), attributes),
        );
    }
    for e in &orders {
        let (message, attributes) = &seen[&e.id.to_string()];
        assert_eq!(message, &body(e));
        assert_eq!(attributes, &attributes_of(e));
    }

    // The queue route got its events, and only those.
    let got = by_event_id(
        audit
            .receive_all(audits.len() + 1, Duration::from_secs(2))
            .await,
    );
    assert_eq!(got.len(), audits.len());
    for e in &audits {
        assert_eq!(got[&e.id.to_string()].body, body(e));
    }
}

#[tokio::test]
async fn a_fifo_topic_keeps_each_aggregates_order_on_fifo_subscriptions() {
    let topic = TestTopic::fifo().await;
    let first = TestQueue::fifo().await;
    let second = TestQueue::fifo().await;
    topic.subscribe(&first, true).await;
    topic.subscribe(&second, true).await;
    let p = publisher(&[("*", &topic.arn)]).await;
    p.check().await.unwrap();

    // Three aggregates, interleaved, several events each in one publish (the relay with ordering
    // off) and over several publishes: 3 × 8 events, more than two batches.
    let mut seq = 0;
    let mut all = Vec::new();
    for round in 0..2 {
        let mut batch = Vec::new();
        for n in 0..4 {
            for agg in ["a", "b", "c"] {
                seq += 1;
                batch.push(event(
                    "order.updated",
                    "order",
                    agg,
                    seq,
                    json!({"agg": agg, "n": round * 4 + n}),
                ));
            }
        }
        assert_all_published(&p.publish(&batch).await.unwrap());
        all.extend(batch);
    }

    for queue in [&first, &second] {
        let got = queue.receive_all(all.len(), WAIT).await;
        assert_eq!(got.len(), all.len());
        for agg in ["a", "b", "c"] {
            let ns: Vec<i64> = got
                .iter()
                .filter(|m| m.attributes["aggregate_id"] == agg)
                .map(|m| {
                    serde_json::from_str::<Value>(&m.body).unwrap()["n"]
                        .as_i64()
                        .unwrap()
                })
                .collect();
            assert_eq!(
                ns,
                (0..8).collect::<Vec<_>>(),
                "aggregate {agg} out of order"
            );
        }
        let got = by_event_id(got);
        for e in &all {
            let m = &got[&e.id.to_string()];
            assert_eq!(m.attributes, attributes_of(e));
            // SNS passes the group and deduplication ids on to FIFO subscriptions.
            assert_eq!(
                m.group_id.as_deref(),
                Some(message_group_id(&e.aggregate_type, &e.aggregate_id).as_str())
            );
            assert_eq!(m.dedup_id.as_deref(), Some(e.id.to_string().as_str()));
        }
    }
}

#[tokio::test]
async fn a_deleted_topic_is_handled_like_a_broken_queue() {
    let topic = TestTopic::standard().await;
    let healthy = TestQueue::standard().await;
    let p = publisher(&[("order.*", &topic.arn), ("audit.*", healthy.url())]).await;
    p.check().await.unwrap();
    topic.delete().await;

    // The start-up check names the topic.
    let e = p.check().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TopicNotFound, "{e}");
    assert!(e.to_string().contains(&topic.arn), "{e}");

    // Its events are put back without an attempt; the queue's go through.
    let evs = vec![
        event("order.created", "order", "1", 1, json!({"n": 1})),
        event("audit.logged", "audit", "1", 2, json!({"n": 2})),
    ];
    let outcomes = p.publish(&evs).await.unwrap();
    match &outcomes[0] {
        PublishOutcome::Unavailable(f) => {
            assert_eq!(f.kind(), FailureKind::Destination, "{f}");
            assert!(f.message().contains("NotFound"), "{f}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(outcomes[1], PublishOutcome::Published);
    assert_eq!(healthy.receive_all(1, WAIT).await.len(), 1);

    // The breaker is open: listed, exported, and the next publish fails fast.
    let open = p.unavailable_queues();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].url, topic.arn);
    let metrics = p.encode_metrics();
    assert!(
        metrics.contains(&format!(
            "outbox_sns_topic_unavailable{{topic=\"{}\"}} 1",
            topic.arn
        )),
        "{metrics}"
    );
    let outcomes = p.publish(&evs[..1]).await.unwrap();
    assert!(
        matches!(outcomes[0], PublishOutcome::Unavailable(_)),
        "{outcomes:?}"
    );
}

#[tokio::test]
async fn a_message_over_snss_limit_is_permanent_without_offload() {
    let topic = TestTopic::standard().await;
    let p = publisher(&[("*", &topic.arn)]).await;
    let e = event(
        "order.created",
        "order",
        "big",
        1,
        json!("x".repeat(300 * 1024)),
    );
    let outcomes = p.publish(&[e]).await.unwrap();
    match &outcomes[0] {
        PublishOutcome::Permanent(f) => {
            assert_eq!(f.kind(), FailureKind::TooLarge);
            assert!(f.message().contains("SNS accepts at most 262144"), "{f}");
        }
        other => panic!("expected Permanent, got {other:?}"),
    }
}

/// A payload holding a character SNS refuses in a body (written past `emit`'s checks) is refused
/// for its event alone, in the relay's words, without a call; the other events of the batch go
/// (black-box run: SNS bodies were not checked, attribute values were).
#[tokio::test]
async fn a_payload_with_a_character_sns_refuses_is_permanent_for_its_event_alone() {
    let topic = TestTopic::standard().await;
    let p = publisher(&[("*", &topic.arn)]).await;
    let bad = event("order.created", "order", "1", 1, json!({"t": "x\u{FFFE}"}));
    // Fullwidth forms share the lead byte of U+FFFE: still sent.
    let good = event("order.created", "order", "2", 1, json!({"t": "ｘ\u{FF01}"}));
    let outcomes = p.publish(&[bad, good]).await.unwrap();
    match &outcomes[0] {
        PublishOutcome::Permanent(f) => {
            assert_eq!(f.kind(), FailureKind::InvalidContent);
            assert!(
                f.message()
                    .contains("the payload holds U+FFFE at byte 7, which SNS does not accept"),
                "{f}"
            );
        }
        other => panic!("expected Permanent, got {other:?}"),
    }
    assert_eq!(outcomes[1], PublishOutcome::Published);
}

/// A topic's own `MaximumMessageSize` (1 KiB to 1 MiB, 256 KiB by default) is read by the start-up
/// check and is what the publisher holds to and states to `emit`: before, every topic was taken
/// to accept 256 KiB, so `emit` refused the larger events a topic raised to 1 MiB takes, and a
/// topic lowered to 2 KiB was sent events it refuses (dead-lettered by its answer).
#[tokio::test]
async fn a_topics_own_maximum_message_size_is_read_by_the_check_and_held_to() {
    let large = TestTopic::with_max_message_size(1024 * 1024).await;
    let p = publisher(&[("*", &large.arn)]).await;
    assert_eq!(p.limits(), SNS_LIMITS, "before the check, SNS's default");
    p.check().await.unwrap();
    // What `emit` is told (the emulator itself refuses anything over 256 KiB on a topic, so the
    // larger send is not tried here).
    assert_eq!(p.limits().max_message_bytes(), 1024 * 1024);

    let small = TestTopic::with_max_message_size(2048).await;
    let p = publisher(&[("*", &small.arn)]).await;
    p.check().await.unwrap();
    assert_eq!(p.limits().max_message_bytes(), 2048);
    let refused = p.limits().check_size("order.created", 3000).unwrap_err();
    assert!(
        refused
            .to_string()
            .ends_with("; the topic's MaximumMessageSize allows at most 2048 bytes"),
        "{refused}"
    );
    // With a queue too, the smallest of them, said so.
    let queue = TestQueue::standard().await;
    let both = publisher(&[("order.*", &small.arn), ("*", queue.url())]).await;
    both.check().await.unwrap();
    let refused = both.limits().check_size("order.created", 3000).unwrap_err();
    assert!(
        refused.to_string().ends_with(
            "; the smallest MaximumMessageSize of the publisher's queues and topics allows at \
             most 2048 bytes"
        ),
        "{refused}"
    );
    let e = event("order.created", "order", "o", 1, json!("x".repeat(3000)));
    match &p.publish(&[e]).await.unwrap()[0] {
        PublishOutcome::Permanent(f) => {
            assert_eq!(f.kind(), FailureKind::TooLarge);
            assert!(
                f.message()
                    .contains("the topic takes at most 2048 (its MaximumMessageSize)"),
                "{f}"
            );
        }
        other => panic!("expected Permanent, got {other:?}"),
    }
}

#[tokio::test]
async fn route_targets_that_are_neither_queue_nor_topic_are_refused_at_build() {
    for bad in [
        "arn:aws:sqs:us-east-1:000000000000:orders",
        "arn:aws:sns:us-east-1:000000000000",
        "not a queue",
    ] {
        let e = SqsPublisher::builder()
            .sdk_config(sdk_config().await)
            .route("order.*", bad)
            .build()
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config, "{bad}: {e}");
        assert!(e.to_string().contains("order.*"), "{bad}: {e}");
        assert!(e.to_string().contains(bad), "{bad}: {e}");
    }
}
