//! `SqsPublisher` against the local SQS server (fauxqs; `bash scripts/services.sh` starts it), a
//! fresh queue per test.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use common::{assert_all_published, body, event, events};
use outbox_core::message::message_size;
use outbox_sqs::SQS_LIMITS;
const SQS_MAX_MESSAGE_BYTES: usize = SQS_LIMITS.max_message_bytes();
use outbox_core::{ClaimedEvent, PublishOutcome, Publisher};
use outbox_sqs::{ErrorKind, SqsPublisher, message_group_id};
use outbox_tests::sqs::{
    BatchCallCounter, ReceivedMessage, TestQueue, counting_sqs_client, sdk_config,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

async fn publisher_to(queue: &TestQueue) -> SqsPublisher {
    SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .default_queue(queue.url())
        .build()
        .await
        .unwrap()
}

fn expected_attributes(e: &ClaimedEvent) -> BTreeMap<String, String> {
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

#[tokio::test]
async fn standard_queue_receives_every_event_with_exact_body_and_attributes() {
    let queue = TestQueue::standard().await;
    let publisher = publisher_to(&queue).await;
    publisher.check().await.unwrap();

    let mut evs = events(13, "order.created");
    evs[0].set_payload(
        json!({"nested": {"list": [1, 2.5, "x"], "null": null}, "unicode": "ünï ✓"}).to_string(),
    );
    evs[1].set_payload(json!("a bare string").to_string());
    evs[2].set_payload(json!([]).to_string());
    evs[3].set_metadata(
        json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
            .to_string(),
    );
    evs[4].aggregate_id = "id with spaces / and: punctuation".into();

    let outcomes = publisher.publish(&evs).await.unwrap();
    assert_all_published(&outcomes);

    let received = by_event_id(queue.receive_all(evs.len(), WAIT).await);
    assert_eq!(received.len(), evs.len());
    for e in &evs {
        let m = &received[&e.id.to_string()];
        assert_eq!(m.body, body(e));
        assert_eq!(m.attributes, expected_attributes(e));
        assert!(m.attribute_types.values().all(|t| t == "String"), "{m:?}");
        assert_eq!(m.group_id, None);
        assert_eq!(m.dedup_id, None);
    }
    // Compact JSON, exactly as serde_json writes it.
    assert_eq!(
        received[&evs[0].id.to_string()].body,
        r#"{"nested":{"list":[1,2.5,"x"],"null":null},"unicode":"ünï ✓"}"#
    );
}

#[tokio::test]
async fn fifo_queue_gets_group_and_dedup_ids_and_keeps_aggregate_order() {
    let queue = TestQueue::fifo().await;
    let publisher = publisher_to(&queue).await;
    publisher.check().await.unwrap();

    let long_id = "L".repeat(200);
    let mut evs = vec![
        event("order.created", "order", "1", 1, json!({"i": 1})),
        event("order.created", "order", "with space", 2, json!({"i": 2})),
        event("order.created", "order", &long_id, 3, json!({"i": 3})),
    ];
    // Several events of one aggregate in one call (the relay with ordering off): in seq order.
    for seq in 4..=8 {
        evs.push(event(
            "order.updated",
            "order",
            "many",
            seq,
            json!({"seq": seq}),
        ));
    }
    let outcomes = publisher.publish(&evs).await.unwrap();
    assert_all_published(&outcomes);

    let received = queue.receive_all(evs.len(), WAIT).await;
    assert_eq!(received.len(), evs.len());
    let many: Vec<String> = received
        .iter()
        .filter(|m| m.attributes["aggregate_id"] == "many")
        .map(|m| m.body.clone())
        .collect();
    let expected: Vec<String> = (4..=8).map(|seq| format!("{{\"seq\":{seq}}}")).collect();
    assert_eq!(many, expected, "one aggregate's events arrive in seq order");

    let received = by_event_id(received);
    for e in &evs {
        let m = &received[&e.id.to_string()];
        assert_eq!(m.body, body(e));
        assert_eq!(m.attributes, expected_attributes(e));
        assert_eq!(
            m.group_id.as_deref(),
            Some(message_group_id(&e.aggregate_type, &e.aggregate_id).as_str())
        );
        assert_eq!(m.dedup_id.as_deref(), Some(e.id.to_string().as_str()));
    }
    assert_eq!(
        received[&evs[0].id.to_string()].group_id.as_deref(),
        Some("order:1")
    );
    for e in &evs[1..3] {
        let group = received[&e.id.to_string()].group_id.clone().unwrap();
        assert!(group.starts_with("sha256:") && group.len() == 71, "{group}");
    }
}

#[tokio::test]
async fn fifo_resend_of_the_same_event_is_dropped_by_the_server() {
    let queue = TestQueue::fifo().await;
    let publisher = publisher_to(&queue).await;
    let e = event("order.created", "order", "dedup", 1, json!({"x": 1}));

    // Twice before anyone reads: one copy.
    assert_all_published(&publisher.publish(std::slice::from_ref(&e)).await.unwrap());
    assert_all_published(&publisher.publish(std::slice::from_ref(&e)).await.unwrap());
    let first = queue.receive_all(1, WAIT).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].attributes["event_id"], e.id.to_string());

    // Again after the first copy was received and deleted: still dropped (5-minute window).
    assert_all_published(&publisher.publish(std::slice::from_ref(&e)).await.unwrap());
    let again = queue.receive_all(1, Duration::from_secs(2)).await;
    assert!(again.is_empty(), "duplicate delivered: {again:?}");
}

#[tokio::test]
async fn payload_just_under_one_mib_is_delivered_and_one_over_is_permanent() {
    let queue = TestQueue::standard().await;
    let publisher = publisher_to(&queue).await;

    let mut e = event("order.created", "order", "big", 1, json!(null));
    let attributes_only = message_size(0, &e.event_type, &e.aggregate_type, &e.aggregate_id, None);
    // A JSON string body is the text plus two quotes.
    let fill = SQS_MAX_MESSAGE_BYTES - attributes_only - 2;
    e.set_payload(json!("x".repeat(fill)).to_string());
    assert_eq!(
        message_size(
            body(&e).len(),
            &e.event_type,
            &e.aggregate_type,
            &e.aggregate_id,
            None
        ),
        SQS_MAX_MESSAGE_BYTES
    );
    let mut too_big = event(
        "order.created",
        "order",
        "bigger",
        2,
        json!("x".repeat(fill + 1)),
    );
    too_big.aggregate_id = "big".into();

    let outcomes = publisher.publish(&[e.clone(), too_big]).await.unwrap();
    assert_eq!(outcomes[0], PublishOutcome::Published);
    match &outcomes[1] {
        PublishOutcome::Permanent(reason) => {
            assert_eq!(reason.kind(), outbox_core::FailureKind::TooLarge);
            assert!(
                reason
                    .message()
                    .contains(&format!("{}", SQS_MAX_MESSAGE_BYTES + 1)),
                "{reason}"
            )
        }
        other => panic!("expected Permanent, got {other:?}"),
    }
    let received = queue.receive_all(1, WAIT).await;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body.len(), fill + 2);
    assert_eq!(received[0].body, body(&e));
}

#[tokio::test]
async fn events_are_routed_by_type_to_two_queues() {
    let orders = TestQueue::standard().await;
    let payments = TestQueue::standard().await;
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .route("order.*", orders.url())
        .route("payment.captured", payments.name()) // a name, resolved with GetQueueUrl
        .build()
        .await
        .unwrap();
    publisher.check().await.unwrap();
    assert_eq!(publisher.queue_urls(), vec![orders.url(), payments.url()]);

    let evs = vec![
        event("order.created", "order", "1", 1, json!({"o": 1})),
        event("payment.captured", "payment", "p1", 2, json!({"p": 1})),
        event("order.line.added", "order", "1", 3, json!({"o": 2})),
        event("user.signed_up", "user", "u1", 4, json!({"u": 1})),
        event("payment.refunded", "payment", "p1", 5, json!({"p": 2})),
    ];
    let outcomes = publisher.publish(&evs).await.unwrap();
    assert_eq!(outcomes[0], PublishOutcome::Published);
    assert_eq!(outcomes[1], PublishOutcome::Published);
    assert_eq!(outcomes[2], PublishOutcome::Published);
    assert_eq!(
        outcomes[3],
        PublishOutcome::permanent(
            outbox_core::FailureKind::NoRoute,
            "no SQS route for event type `user.signed_up`"
        )
    );
    assert_eq!(
        outcomes[4],
        PublishOutcome::permanent(
            outbox_core::FailureKind::NoRoute,
            "no SQS route for event type `payment.refunded`"
        )
    );

    let mut order_types: Vec<String> = orders
        .receive_all(2, WAIT)
        .await
        .into_iter()
        .map(|m| m.attributes["event_type"].clone())
        .collect();
    order_types.sort();
    assert_eq!(order_types, vec!["order.created", "order.line.added"]);
    let payment = payments.receive_all(1, WAIT).await;
    assert_eq!(payment.len(), 1);
    assert_eq!(payment[0].attributes["event_type"], "payment.captured");
    // Nothing else arrives.
    assert!(
        orders
            .receive_all(1, Duration::from_secs(1))
            .await
            .is_empty()
    );
    assert!(
        payments
            .receive_all(1, Duration::from_secs(1))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn content_the_server_rejects_is_permanent_and_batch_mates_are_published() {
    let queue = TestQueue::standard().await;
    let publisher = publisher_to(&queue).await;

    let mut evs = events(5, "order.created");
    // U+FFFF is not a character SQS accepts; emit would have refused it, and the publisher does,
    // for that entry alone, without asking SQS.
    evs[2].set_payload(json!({"bad": "\u{FFFF}"}).to_string());
    let outcomes = publisher.publish(&evs).await.unwrap();
    for (i, o) in outcomes.iter().enumerate() {
        if i == 2 {
            match o {
                PublishOutcome::Permanent(reason) => {
                    assert_eq!(reason.kind(), outbox_core::FailureKind::InvalidContent);
                    assert!(
                        reason
                            .message()
                            .contains("the payload holds U+FFFF at byte 8, which SQS does not"),
                        "{reason}"
                    )
                }
                other => panic!("expected Permanent, got {other:?}"),
            }
        } else {
            assert_eq!(o, &PublishOutcome::Published, "event {i}");
        }
    }
    let received = by_event_id(queue.receive_all(4, WAIT).await);
    assert_eq!(received.len(), 4);
    assert!(!received.contains_key(&evs[2].id.to_string()));
}

#[tokio::test]
async fn twenty_five_events_take_three_batch_calls() {
    let queue = TestQueue::standard().await;
    let counter = BatchCallCounter::new();
    let publisher = SqsPublisher::builder()
        .client(counting_sqs_client(&counter).await)
        .default_queue(queue.url())
        .build()
        .await
        .unwrap();
    let evs = events(25, "order.created");
    assert_all_published(&publisher.publish(&evs).await.unwrap());
    assert_eq!(counter.get(), 3);
    assert_eq!(queue.receive_all(25, WAIT).await.len(), 25);
}

#[tokio::test]
async fn check_names_a_missing_queue() {
    let queue = TestQueue::standard().await;
    let missing = format!("{}-missing", queue.url());
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .route("order.*", queue.url())
        .default_queue(missing.as_str())
        .build()
        .await
        .unwrap();
    let err = publisher.check().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QueueNotFound);
    assert!(err.to_string().contains(&missing), "{err}");

    // A queue name that does not resolve fails the build, naming it.
    let err = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .default_queue("outbox-test-no-such-queue")
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QueueNotFound);
    assert!(
        err.to_string().contains("outbox-test-no-such-queue"),
        "{err}"
    );
}
