//! Messages the consumer cannot read: counted, logged without their body, never a hot loop.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::MessageAttributeValue;
use outbox_sqs::consumer::{BadInputPolicy, Outcome};
use outbox_tests::sqs::TestQueue;
use outbox_tests::{LogCapture, TestDb, eventually};
use uuid::Uuid;

use crate::support::*;

const SECRET: &str = "SECRET-4111-1111";
const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn attr(v: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(v)
        .build()
        .unwrap()
}

/// Sends the three kinds of bad input, each with the secret in its body.
async fn send_bad_input(queue: &TestQueue) {
    let body = format!(r#"{{"kind":"credited","account":"{SECRET}","n":1,"cents":1}}"#);
    let send = |body: String| {
        queue
            .client()
            .send_message()
            .queue_url(queue.url())
            .message_body(body)
    };
    // No event_id.
    send(body.clone())
        .message_attributes("event_type", attr("account.credited"))
        .send()
        .await
        .unwrap();
    // An event type the consumer's type does not accept.
    send(body)
        .message_attributes("event_id", attr(&Uuid::new_v4().to_string()))
        .message_attributes("event_type", attr("invoice.paid"))
        .send()
        .await
        .unwrap();
    // A body that does not decode.
    send(format!(r#"{{"card":"{SECRET}"}}"#))
        .message_attributes("event_id", attr(&Uuid::new_v4().to_string()))
        .message_attributes("event_type", attr("account.credited"))
        .send()
        .await
        .unwrap();
}

// A current-thread runtime: every task runs on this thread, under the capturing subscriber.
#[tokio::test]
async fn bad_input_is_counted_logged_without_body_and_released_with_a_long_delay() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    send_bad_input(&queue).await;
    // And an undecodable one with the whole envelope, for its log span.
    queue
        .client()
        .send_message()
        .queue_url(queue.url())
        .message_body("[]")
        .message_attributes("event_id", attr(&Uuid::new_v4().to_string()))
        .message_attributes("event_type", attr("account.credited"))
        .message_attributes("aggregate_type", attr("account"))
        .message_attributes("aggregate_id", attr("acc-7"))
        .message_attributes("traceparent", attr(TP))
        .send()
        .await
        .unwrap();

    let seen = Seen::default();
    let c = consumer(&db, &queue, "ledger")
        .await
        .bad_input(BadInputPolicy::Release, Duration::from_secs(2))
        .observe(seen.observer())
        .build()
        .await
        .unwrap();
    let recorder = Arc::new(Recorder::default());
    let running = Running::start(c, recorder.clone());
    // Five seconds: with the 2 s delay each message is received at most 3 times (a hot loop
    // would receive it hundreds of times).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let c = running.stop().await;
    let m = c.metrics();
    assert_eq!(recorder.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(m.failures("missing_event_id") >= 1, "{m:?}");
    assert!(m.failures("unknown_event_type") >= 1, "{m:?}");
    assert!(m.failures("undecodable") >= 1, "{m:?}");
    assert!((4..=13).contains(&m.received()), "bounded receives: {m:?}");
    assert!(
        seen.0
            .lock()
            .unwrap()
            .iter()
            .all(|d| matches!(d.outcome, Outcome::BadInput(_)))
    );
    assert_eq!(m.handled(), 0);
    // Left in the queue for its redrive policy.
    let left = queue.receive_all(4, Duration::from_secs(6)).await;
    assert_eq!(left.len(), 4);

    let text = logs.text();
    assert!(text.contains("missing_event_id"), "{text}");
    assert!(text.contains("undecodable"), "{text}");
    assert!(!text.contains(SECRET), "a body was logged:\n{text}");
    assert!(!text.contains("card"), "a body was logged:\n{text}");
    // The messages with an envelope are logged in their span: with the envelope they have, not
    // empty fields for the aggregate and trace context they lack (a black-box run read
    // `aggregate=:` and `traceparent=""`).
    let spanned: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("outbox.consume{"))
        .collect();
    assert!(!spanned.is_empty(), "no line in a message's span:\n{text}");
    let (whole, bare): (Vec<&str>, Vec<&str>) =
        spanned.into_iter().partition(|l| l.contains("acc-7"));
    assert!(!whole.is_empty() && !bare.is_empty(), "{text}");
    for line in bare {
        assert!(line.contains(" event_type="), "{line}");
        assert!(!line.contains("aggregate="), "{line}");
        assert!(!line.contains("traceparent="), "{line}");
    }
    for line in whole {
        assert!(line.contains(" aggregate=account:acc-7"), "{line}");
        assert!(line.contains(&format!(" traceparent={TP}")), "{line}");
    }
}

#[tokio::test]
async fn bad_input_is_deleted_under_the_delete_policy() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    send_bad_input(&queue).await;

    let c = consumer(&db, &queue, "ledger")
        .await
        .bad_input(BadInputPolicy::Delete, Duration::ZERO)
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Recorder::default());
    assert!(
        eventually(Duration::from_secs(20), async || {
            running.consumer.metrics().received() >= 3
        })
        .await
    );
    // Longer than the visibility time-out (2 s): a message not deleted would come back.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let c = running.stop().await;
    assert_eq!(c.metrics().received(), 3, "{:?}", c.metrics());
    assert!(
        queue
            .receive_all(1, Duration::from_secs(2))
            .await
            .is_empty()
    );
    assert!(!logs.text().contains(SECRET));
}

/// An event this consumer processed already is a duplicate, even when its type no longer decodes
/// (renamed or dropped since): redelivered after its delete failed, it is deleted, not counted as
/// bad input, hidden and dead-lettered (review: the decode came before the inbox check for
/// messages that carry their payload, while offloaded ones were checked first).
#[tokio::test]
async fn a_processed_event_whose_type_no_longer_decodes_is_a_duplicate() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let id = Uuid::new_v4();
    let client = db.connect().await;
    assert!(
        outbox_core::process_once(&client, "ledger", id)
            .await
            .unwrap()
    );
    queue
        .client()
        .send_message()
        .queue_url(queue.url())
        .message_body(r#"{"paid":true}"#)
        .message_attributes("event_id", attr(&id.to_string()))
        .message_attributes("event_type", attr("invoice.paid"))
        .send()
        .await
        .unwrap();

    let seen = Seen::default();
    let c = consumer(&db, &queue, "ledger")
        .await
        .bad_input(BadInputPolicy::Release, Duration::from_secs(2))
        .observe(seen.observer())
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Recorder::default());
    assert!(
        eventually(Duration::from_secs(20), async || {
            !seen.0.lock().unwrap().is_empty()
        })
        .await
    );
    let c = running.stop().await;
    let outcomes: Vec<Outcome> = seen.0.lock().unwrap().iter().map(|d| d.outcome).collect();
    assert!(matches!(outcomes[..], [Outcome::Duplicate]), "{outcomes:?}");
    let m = c.metrics();
    assert_eq!(m.duplicates(), 1, "{m:?}");
    assert_eq!(m.failures("unknown_event_type"), 0, "{m:?}");
    // Deleted: not back after the bad-input delay nor the visibility time-out.
    assert!(
        queue
            .receive_all(1, Duration::from_secs(3))
            .await
            .is_empty()
    );
}
