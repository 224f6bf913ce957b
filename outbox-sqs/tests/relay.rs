//! The relay with the SQS publisher, end to end: PostgreSQL → relay → fauxqs or the fault fixture.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use outbox_core::{Relay, emit, emit_all};
use outbox_queries::queries::emit as emit_sql;
use outbox_sqs::SqsPublisher;
use outbox_sqs_fixture::{CallFault, EntryFault, SqsFixture};
use outbox_tests::sqs::TestQueue;
use outbox_tests::{RunningRelay, TestDb, TestEvent};

async fn fixture_publisher(fx: &SqsFixture, queue_url: &str) -> SqsPublisher {
    SqsPublisher::builder()
        .sdk_config(outbox_tests::sqs::sdk_config_for(&fx.endpoint_url()).await)
        .default_queue(queue_url)
        .max_attempts(1)
        .call_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap()
}

fn sent_ids(fx: &SqsFixture) -> Vec<String> {
    fx.messages()
        .iter()
        .map(|m| m.attributes["event_id"].clone())
        .collect()
}

/// A publisher sending every event to `queue` on the local SQS server (fauxqs).
async fn fauxqs_publisher(queue: &TestQueue) -> SqsPublisher {
    SqsPublisher::builder()
        .sdk_config(outbox_tests::sqs::sdk_config().await)
        .default_queue(queue.url())
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn emit_in_a_transaction_then_relay_then_read_back_from_sqs() {
    let db = TestDb::new().await;
    let queue = TestQueue::standard().await;
    let publisher = fauxqs_publisher(&queue).await;
    let relay = Relay::builder(db.pool().clone(), publisher)
        .listen(db.config().clone())
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);

    let mut client = db.pool().get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    emit(&tx, &TestEvent::new("order-9", 1).note("rolled back"))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let event = TestEvent::new("order-7", 3).note("hello, queue");
    // Emitted inside a trace: the trace context travels with the message.
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let id = outbox_core::trace::with_traceparent(traceparent, emit(&tx, &event))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let received = queue.receive_all(1, Duration::from_secs(10)).await;
    assert_eq!(received.len(), 1);
    let m = &received[0];
    // The body is the payload's JSON (jsonb keeps its own key order).
    let body: serde_json::Value = serde_json::from_str(&m.body).unwrap();
    assert_eq!(body, serde_json::to_value(&event).unwrap());
    assert_eq!(m.attributes["event_id"], id.to_string());
    assert_eq!(m.attributes["event_type"], "order.test");
    assert_eq!(m.attributes["aggregate_type"], "order");
    assert_eq!(m.attributes["aggregate_id"], "order-7");
    assert_eq!(m.attributes["traceparent"], traceparent);
    assert_eq!(m.attributes.len(), 5, "{:?}", m.attributes);
    // Nothing else arrives: the rolled-back event never does.
    assert!(
        queue
            .receive_all(1, Duration::from_secs(1))
            .await
            .is_empty()
    );
    running.stop().await;
    assert!(db.event(id).await.processed_at.is_some());
}

/// Rows written straight into the table (bypassing emit's checks) with content SQS rejects produce
/// real per-entry failures from fauxqs inside a successful batch: they are dead-lettered, their
/// batch-mates delivered.
#[tokio::test]
async fn content_sqs_rejects_is_dead_lettered_and_batch_mates_delivered() {
    let db = TestDb::new().await;
    let queue = TestQueue::standard().await;
    let publisher = fauxqs_publisher(&queue).await;
    let relay = Relay::builder(db.pool().clone(), publisher)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let good = emit_all(
        &client,
        &(0..8)
            .map(|n| TestEvent::new(format!("g-{n}"), n))
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    // Straight through the generated insert: emit would refuse these.
    let payload = serde_json::json!({"text": "not a character: \u{FFFF}"});
    let bad_body = emit_sql::insert_outbox_event()
        .bind(
            &client,
            &"order",
            &"b-1",
            &uuid::Uuid::now_v7(),
            &"order.test",
            &payload,
            &serde_json::json!({}),
        )
        .one()
        .await
        .unwrap();
    let bad_body_too = emit_sql::insert_outbox_event()
        .bind(
            &client,
            &"order",
            &"b-2",
            &uuid::Uuid::now_v7(),
            &"order.test",
            &serde_json::json!({"t": "\u{FFFE}"}),
            &serde_json::json!({}),
        )
        .one()
        .await
        .unwrap();

    let report = relay.run_once().await.unwrap();
    assert_eq!(
        (report.claimed, report.published, report.dead_lettered),
        (10, 8, 2),
        "{report:?}"
    );
    for id in [bad_body, bad_body_too] {
        let r = db.event(id).await;
        assert!(r.dead_lettered_at.is_some(), "dead-lettered at once");
        assert!(
            !r.last_error.unwrap_or_default().is_empty(),
            "with the reason"
        );
    }
    let received = queue.receive_all(8, Duration::from_secs(10)).await;
    let got: HashSet<String> = received
        .iter()
        .map(|m| m.attributes["event_id"].clone())
        .collect();
    assert_eq!(got, good.iter().map(|i| i.to_string()).collect());
}

#[tokio::test]
async fn partial_batch_failure_retries_only_the_failed_entries() {
    let db = TestDb::new().await;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("partial");
    fx.fail_entries_where(|m| m.body.contains("flaky"), EntryFault::server_error());
    let relay = Relay::builder(db.pool().clone(), fixture_publisher(&fx, &url).await)
        .backoff(Duration::from_millis(200), Duration::from_secs(1))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..10)
        .map(|n| TestEvent::new(format!("o-{n}"), n).note(if n % 3 == 0 { "flaky" } else { "" }))
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.published, report.retried), (6, 4), "{report:?}");
    for (i, id) in ids.iter().enumerate() {
        let r = db.event(*id).await;
        if i % 3 == 0 {
            assert_eq!((r.attempts, r.processed_at.is_none()), (1, true));
            assert!(r.last_error.unwrap().contains("InternalError"));
        } else {
            assert!(r.processed_at.is_some());
        }
    }
    fx.clear_faults();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.published, 4, "{report:?}");
    let sent = sent_ids(&fx);
    assert_eq!(sent.len(), 10, "each event accepted exactly once");
    assert_eq!(sent.iter().collect::<HashSet<_>>().len(), 10);
}

#[tokio::test]
async fn permanent_entry_failure_is_dead_lettered_with_the_reason() {
    let db = TestDb::new().await;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("permanent");
    fx.fail_entries_where(
        |m| m.body.contains("refuse-me"),
        EntryFault::sender_fault("InvalidParameterValue", "the body is not acceptable"),
    );
    let relay = Relay::builder(db.pool().clone(), fixture_publisher(&fx, &url).await)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let bad = emit(&client, &TestEvent::new("x", 1).note("refuse-me"))
        .await
        .unwrap();
    let ok = emit(&client, &TestEvent::new("y", 1)).await.unwrap();
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.published, report.dead_lettered), (1, 1));
    let r = db.event(bad).await;
    assert!(r.dead_lettered_at.is_some());
    let reason = r.last_error.unwrap();
    assert!(
        reason.contains("InvalidParameterValue") && reason.contains("not acceptable"),
        "{reason}"
    );
    assert!(db.event(ok).await.processed_at.is_some());
}

#[tokio::test]
async fn server_errors_are_retried_without_losing_anything() {
    let db = TestDb::new().await;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("throttled");
    let relay = Relay::builder(db.pool().clone(), fixture_publisher(&fx, &url).await)
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &(0..30)
            .map(|n| TestEvent::new(format!("o-{n}"), n))
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();

    // Every call failed by SQS (503): the publish fails as a whole, nothing is counted against
    // the events.
    fx.fail_next_calls(100, CallFault::ServiceUnavailable);
    let e = relay.run_once().await.unwrap_err();
    assert_eq!(e.kind(), outbox_core::ErrorKind::Publish, "{e}");
    assert!(
        db.event(ids[0]).await.attempts == 0,
        "no attempt counted for an outage"
    );
    fx.clear_faults();

    // One 5xx call among successful ones (30 events = 3 calls): its entries are retried later,
    // with backoff.
    let relay = Relay::builder(db.pool().clone(), fixture_publisher(&fx, &url).await)
        .backoff(Duration::from_millis(300), Duration::from_secs(1))
        .build()
        .unwrap();
    fx.fail_next_calls(1, CallFault::ServiceUnavailable);
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.published, report.retried), (20, 10), "{report:?}");
    assert_eq!(
        relay.run_once().await.unwrap().claimed,
        0,
        "not before the backoff"
    );
    tokio::time::sleep(Duration::from_millis(350)).await;
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.published, 10, "{report:?}");
    assert_eq!(db.pending().await, 0, "everything delivered");
    let sent: HashSet<String> = sent_ids(&fx).into_iter().collect();
    assert_eq!(sent, ids.iter().map(|i| i.to_string()).collect());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_unreachable_for_10_seconds_loses_nothing() {
    let db = TestDb::new().await;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("unreachable");
    let relay = Relay::builder(db.pool().clone(), fixture_publisher(&fx, &url).await)
        .listen(db.config().clone())
        .poll_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let client = db.pool().get().await.unwrap();
    let mut ids = emit_all(
        &client,
        &(0..50)
            .map(|n| TestEvent::new(format!("a-{}", n % 7), n))
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    fx.refuse_connections().await;
    // Events keep coming while SQS is unreachable.
    for n in 0..50 {
        ids.push(
            emit(&client, &TestEvent::new(format!("b-{}", n % 7), n))
                .await
                .unwrap(),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let during = db.pending().await;
    fx.accept_connections().await;
    let start = Instant::now();
    while db.pending().await > 0 && start.elapsed() < Duration::from_secs(40) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.stop().await;
    assert!(during > 0, "the outage held events back");
    assert_eq!(db.pending().await, 0, "delivered after SQS returned");
    let client = db.pool().get().await.unwrap();
    assert_eq!(
        outbox_core::stats(&client).await.unwrap().dead_letters,
        0,
        "nothing dead-lettered by an outage"
    );
    let sent: HashSet<String> = sent_ids(&fx).into_iter().collect();
    assert_eq!(
        sent,
        ids.iter().map(|i| i.to_string()).collect::<HashSet<_>>()
    );
}
