//! Messages whose payload the publisher offloaded to S3 (the Extended Client pointer format): the
//! consumer reads the object and hands the handler the event. Before, it decoded the pointer as
//! the event: every offloaded event was bad input (deleted under the Delete policy: lost).

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::MessageAttributeValue;
use outbox_core::Relay;
use outbox_sqs::consumer::{BadInput, Outcome};
use outbox_sqs::{EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, SqsPublisher, pointer_body};
use outbox_tests::sqs::{TestQueue, endpoint, sdk_config};
use outbox_tests::{RunningRelay, TestDb, eventually};
use uuid::Uuid;

use crate::support::*;

async fn bucket() -> String {
    let s3 = s3_client(None).await;
    let name = format!("outbox-test-{}", Uuid::new_v4().simple());
    s3.create_bucket()
        .bucket(&name)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "CreateBucket on {} (bash scripts/services.sh starts it): {e:?}",
                endpoint()
            )
        });
    name
}

/// A relay that offloads every event to `bucket` and sends the pointers to `queue`.
async fn offloading_relay(db: &TestDb, queue: &TestQueue, bucket: &str) -> RunningRelay {
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(endpoint())
        .default_queue(queue.url())
        .offload_bucket(bucket)
        .offload_threshold(1) // every event
        .build()
        .await
        .unwrap();
    let relay = Relay::builder(db.pool().clone(), publisher)
        .listen(db.config().clone())
        .build()
        .unwrap();
    RunningRelay::start(&relay)
}

/// One offloaded event for each of `accounts` accounts, relayed to a new queue (the relay stopped
/// once they are all published); their ids.
async fn relayed_offloaded(db: &TestDb, accounts: usize) -> (TestQueue, Vec<Uuid>) {
    let (queue, ids, _) = relayed_offloaded_to(db, accounts).await;
    (queue, ids)
}

/// [`relayed_offloaded`], and the bucket the payloads are in.
async fn relayed_offloaded_to(db: &TestDb, accounts: usize) -> (TestQueue, Vec<Uuid>, String) {
    let queue = TestQueue::standard().await;
    let bucket = bucket().await;
    let relay = offloading_relay(db, &queue, &bucket).await;
    let ids = emit_credits(db, accounts, 1).await;
    assert!(eventually(Duration::from_secs(20), async || db.pending().await == 0).await);
    relay.stop().await;
    (queue, ids, bucket)
}

/// Four events that carry their payload (accounts `inline-0` to `inline-3`), relayed to `queue`
/// (the relay stopped once they are published).
async fn relay_inline(db: &TestDb, queue: &TestQueue) {
    let relay = start_relay(db, queue).await;
    let mut client = db.pool().get().await.unwrap();
    for i in 0..4 {
        let tx = client.transaction().await.unwrap();
        outbox_core::emit(&tx, &AccountEvent::credited(&format!("inline-{i}"), 1))
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    drop(client);
    assert!(eventually(Duration::from_secs(20), async || db.pending().await == 0).await);
    relay.stop().await;
}

/// A proxy to the S3 (and SQS) endpoint, black-holed from the start.
async fn black_holed_s3() -> outbox_tests::BlackHoleProxy {
    let upstream = endpoint()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("the SQS endpoint is host:port");
    let proxy = outbox_tests::BlackHoleProxy::start(upstream).await;
    proxy.black_hole();
    proxy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offloaded_events_are_read_from_s3_and_applied() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let bucket = bucket().await;
    let relay = offloading_relay(&db, &queue, &bucket).await;
    let ids = emit_credits(&db, 2, 2).await;

    // And a pointer to an object that is not there: a failed delivery, not bad input.
    send_pointer(&queue, &bucket, "outbox/missing", Uuid::new_v4()).await;

    let c = consumer(&db, &queue, "ledger").await.build().await.unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    let done = eventually(Duration::from_secs(30), async || {
        effect_counts(&db).await.1 == ids.len() as i64
            && running.consumer.metrics().failures("offload") >= 1
    })
    .await;
    let c = running.stop().await;
    relay.stop().await;
    let m = c.metrics();
    assert!(done, "{m:?}");
    assert_eq!(effect_counts(&db).await, (4, 4));
    assert_eq!(m.failures("undecodable"), 0, "{m:?}");
    assert_eq!(m.failures("bad_pointer"), 0, "{m:?}");
}

/// An S3 client for the local server, through `proxy` when given.
async fn s3_client(proxy: Option<&outbox_tests::BlackHoleProxy>) -> aws_sdk_s3::Client {
    let sdk = sdk_config().await;
    let url = proxy.map_or_else(endpoint, |p| format!("http://{}", p.addr()));
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .endpoint_url(url)
            .force_path_style(true)
            .build(),
    )
}

/// A message as the relay sends it for an offloaded event: a pointer to `key` in `bucket`.
async fn send_pointer(queue: &TestQueue, bucket: &str, key: &str, event_id: Uuid) {
    let attr = |t: &str, v: &str| {
        MessageAttributeValue::builder()
            .data_type(t)
            .string_value(v)
            .build()
            .unwrap()
    };
    queue
        .client()
        .send_message()
        .queue_url(queue.url())
        .message_body(pointer_body(bucket, key))
        .message_attributes(EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, attr("Number", "100"))
        .message_attributes("event_id", attr("String", &event_id.to_string()))
        .message_attributes("event_type", attr("String", "account.credited"))
        .send()
        .await
        .unwrap();
}

/// A pointer to an object far larger than the message says (here 2 MiB for 100 bytes) is bad
/// input, not read: the consumer held any object whole in memory, a multi-GB one included
/// (review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_far_larger_than_its_message_says_is_not_read() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let bucket = bucket().await;
    let id = Uuid::new_v4();
    let key = format!("outbox/{id}");
    s3_client(None)
        .await
        .put_object()
        .bucket(&bucket)
        .key(&key)
        // A valid event, padded: read, it would be handled.
        .body(
            format!(
                r#"{{"kind":"credited","account":"a-1","n":1,"cents":5}}{}"#,
                " ".repeat(2 * 1024 * 1024)
            )
            .into_bytes()
            .into(),
        )
        .send()
        .await
        .unwrap();
    send_pointer(&queue, &bucket, &key, id).await;

    let recorder = Arc::new(Recorder::default());
    let c = consumer(&db, &queue, "ledger").await.build().await.unwrap();
    let running = Running::start(c, recorder.clone());
    let refused = eventually(Duration::from_secs(20), async || {
        running.consumer.metrics().failures("bad_pointer") > 0
    })
    .await;
    let c = running.stop().await;
    assert!(refused, "{:?}", c.metrics());
    assert_eq!(recorder.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// A duplicate of an offloaded event already in the inbox is acknowledged without reading its
/// object. Before, the object was read first: a large download for nothing, and, once the bucket's
/// lifecycle rule had removed the object, a failed delivery on every receive until the redrive
/// policy dead-lettered a message that was handled long ago.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offloaded_duplicate_is_acknowledged_without_reading_its_object() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let bucket = bucket().await;
    let handled = Uuid::new_v4();
    db.connect()
        .await
        .execute(
            "INSERT INTO processed_events (consumer, event_id) VALUES ('ledger', $1)",
            &[&handled],
        )
        .await
        .unwrap();
    // Its object expired long ago.
    send_pointer(&queue, &bucket, &format!("outbox/{handled}"), handled).await;

    let c = consumer(&db, &queue, "ledger").await.build().await.unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    let done = eventually(Duration::from_secs(20), async || {
        running.consumer.metrics().duplicates() == 1
            || running.consumer.metrics().failures("offload") > 0
    })
    .await;
    let c = running.stop().await;
    let m = c.metrics();
    assert!(done, "{m:?}");
    assert_eq!((m.duplicates(), m.failures("offload")), (1, 0), "{m:?}");
    assert_eq!(effect_counts(&db).await, (0, 0));
}

/// S3 stops answering (a partition) while offloaded messages wait: the messages in hand fail
/// once, then units wait before reading the next offloaded payload until a `HeadBucket` is
/// answered, so no message's receive count climbs through the outage. Before, each offloaded
/// message was received, failed and hidden again on every retry delay, and an outage of a few
/// minutes dead-lettered the whole backlog through the redrive policy. Messages that carry their
/// payload are handled meanwhile: the offloaded ones wait without a handler permit (at first they
/// held them all, and the consumer handled nothing until S3 was back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_outage_costs_each_offloaded_message_one_delivery_at_most() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let (queue, ids) = relayed_offloaded(&db, 6).await;
    let proxy = black_holed_s3().await;
    let seen = Seen::default();
    let c = consumer(&db, &queue, "ledger")
        .await
        .s3_client(s3_client(Some(&proxy)).await)
        .concurrency(2)
        .call_timeout(Duration::from_secs(1))
        .retry_backoff(Duration::from_millis(100), Duration::from_millis(500))
        .observe(seen.observer())
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    // Read time-outs of 1 s and retry delays of at most 0.5 s: up to 4 deliveries each.
    // The offloaded messages in hand fail; received again, they wait for S3.
    assert!(
        eventually(Duration::from_secs(10), async || {
            running.consumer.metrics().received() >= ids.len() as u64 + 2
        })
        .await,
        "the offloaded messages in hand fail and are received again: {:?}",
        running.consumer.metrics()
    );
    // Four events that carry their payload arrive while the offloaded ones wait for S3.
    relay_inline(&db, &queue).await;
    let inline_handled = eventually(Duration::from_secs(6), async || {
        effect_counts(&db).await.1 == 4
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        effect_counts(&db).await.1,
        4,
        "only the events that carry their payload are applied while S3 is down"
    );
    proxy.heal();
    let done = eventually(Duration::from_secs(30), async || {
        effect_counts(&db).await.1 == ids.len() as i64 + 4
    })
    .await;
    let c = running.stop().await;
    assert!(
        inline_handled,
        "the events that carry their payload were handled during the outage: {:?}",
        c.metrics()
    );
    assert!(
        done,
        "every event applied once S3 is back: {:?}",
        c.metrics()
    );
    assert_eq!(effect_counts(&db).await, (10, 10));
    let most = seen.most_receive_count();
    assert!(
        most <= 2,
        "a message was delivered {most} times through the outage: {:?}",
        c.metrics()
    );
}

/// Offloaded messages waiting for a handler permit when S3 first fails wait for S3 instead, once
/// they get one: each took its permit in turn to spend a whole call time-out on S3, and the
/// messages that carry their payload waited behind them (black-box run: 8 offloaded messages and
/// 2 permits held inline ones back 44 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offloaded_messages_behind_s3s_first_failure_do_not_hold_back_the_others() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let (queue, ids) = relayed_offloaded(&db, 10).await;
    relay_inline(&db, &queue).await;
    let proxy = black_holed_s3().await;
    let c = consumer(&db, &queue, "ledger")
        .await
        .s3_client(s3_client(Some(&proxy)).await)
        .concurrency(2)
        .call_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let running = Running::start(c, Arc::new(Recorder::default()));
    // One round of S3 time-outs (2 s) for the two permits, then the inline events: not one round
    // per two offloaded messages (10 s).
    let inline_handled = eventually(Duration::from_secs(20), async || {
        effect_counts(&db).await.1 == 4
    })
    .await;
    let took = started.elapsed();
    proxy.heal();
    let done = eventually(Duration::from_secs(30), async || {
        effect_counts(&db).await.1 == ids.len() as i64 + 4
    })
    .await;
    let c = running.stop().await;
    assert!(inline_handled, "{:?}", c.metrics());
    assert!(
        took < Duration::from_secs(7),
        "the events that carry their payload waited {took:?} behind the offloaded ones"
    );
    assert!(
        done,
        "every event applied once S3 is back: {:?}",
        c.metrics()
    );
}

/// After an S3 failure, the probe that lets offloaded messages through again gets at least the
/// database probe's 10 s, not the call time-out (sized for SQS calls): with a short call time-out
/// and an S3 slower than it but well within an object read's time, the gate opened never and the
/// offloaded messages waited until the consumer was restarted (review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_s3_reopens_after_a_failure_despite_a_short_call_timeout() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let (queue, ids) = relayed_offloaded(&db, 4).await;
    let proxy = black_holed_s3().await;
    let c = consumer(&db, &queue, "ledger")
        .await
        .s3_client(s3_client(Some(&proxy)).await)
        .concurrency(1)
        .call_timeout(Duration::from_millis(400))
        .retry_backoff(Duration::from_millis(100), Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    assert!(
        eventually(Duration::from_secs(10), async || {
            running.consumer.metrics().failures("offload") >= 1
        })
        .await,
        "an object read fails in the black hole: {:?}",
        running.consumer.metrics()
    );
    // S3 answers again, 0.5 s late: longer than the call time-out, well within an object read's
    // (the call time-out and a second per MiB).
    proxy.delay_requests(Duration::from_millis(500));
    proxy.heal();
    let done = eventually(Duration::from_secs(20), async || {
        effect_counts(&db).await.0 == ids.len() as i64
    })
    .await;
    let c = running.stop().await;
    assert!(done, "the offloaded events are applied: {:?}", c.metrics());
}

/// Messages waiting for S3 when the consumer stops are released for the next consumer, not taken
/// back by the stopping consumer's own long polls. A poll cut short at shutdown stays open at SQS
/// until its wait ends: a message made visible at once was handed to it, hidden for a whole
/// visibility time-out with one more receive counted, for an answer nobody read (black-box run:
/// after two stops during an S3 outage, offloaded events reached the dead-letter queue unhandled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_waiting_for_s3_at_shutdown_go_to_the_next_consumer() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let (queue, ids) = relayed_offloaded(&db, 3).await;
    let proxy = black_holed_s3().await;
    let stopping = Seen::default();
    let c = consumer(&db, &queue, "ledger")
        .await
        .s3_client(s3_client(Some(&proxy)).await)
        .call_timeout(Duration::from_secs(1))
        .retry_backoff(Duration::from_millis(100), Duration::from_millis(500))
        // A long poll in flight at the stop (one message a poll, with slots to spare: the
        // receiver polls again at once), and a visibility time-out longer than it.
        .concurrency(4)
        .max_messages(1)
        .wait(Duration::from_secs(3))
        .visibility_timeout(Duration::from_secs(20))
        .observe(stopping.observer())
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    // Each fails once in the black hole; received again, each waits for S3.
    assert!(
        eventually(Duration::from_secs(15), async || {
            running.consumer.metrics().received() >= 2 * ids.len() as u64
        })
        .await,
        "{:?}",
        running.consumer.metrics()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopped = running.stop().await;
    assert_eq!(
        stopped.metrics().released(),
        ids.len() as u64,
        "each waiting message released at the stop, counted"
    );
    let before = stopping.most_receive_count();
    assert_eq!(before, 2, "each message was received twice before the stop");

    // The next consumer, with S3 back, gets them after the stopped one's polls end (3 s and a
    // margin), not after the visibility time-out (20 s), and with one receive more each.
    let next = Seen::default();
    let c = consumer(&db, &queue, "ledger")
        .await
        .s3_client(s3_client(None).await)
        .observe(next.observer())
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    let done = eventually(Duration::from_secs(12), async || {
        effect_counts(&db).await.0 == ids.len() as i64
    })
    .await;
    let c = running.stop().await;
    assert!(
        done,
        "the released messages reach the next consumer before their visibility time-out: {:?}",
        c.metrics()
    );
    assert_eq!(
        next.most_receive_count(),
        before + 1,
        "received once more each, by the next consumer only"
    );
}

/// A pointer into a bucket that is gone fails saying S3's code and message (the log showed the
/// SDK's `Debug` of the error: `unhandled error (NoSuchBucket): Error { code: …`),
/// and one whose declared size is not a byte count is bad input saying so (it read as size 0, and
/// the object was refused as larger than that). A current-thread runtime: the consumer's tasks log
/// under the capturing subscriber.
#[tokio::test]
async fn unreadable_pointers_are_told_plainly() {
    let logs = outbox_tests::LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let bucket = bucket().await;
    let gone = format!("outbox-test-gone-{}", Uuid::new_v4().simple());
    send_pointer(&queue, &gone, "outbox/missing", Uuid::new_v4()).await;
    queue
        .client()
        .send_message()
        .queue_url(queue.url())
        .message_body(pointer_body(&bucket, "outbox/any"))
        .message_attributes(
            EXTENDED_PAYLOAD_SIZE_ATTRIBUTE,
            MessageAttributeValue::builder()
                .data_type("Number")
                .string_value("abc")
                .build()
                .unwrap(),
        )
        .message_attributes(
            "event_id",
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(Uuid::new_v4().to_string())
                .build()
                .unwrap(),
        )
        .message_attributes(
            "event_type",
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value("account.credited")
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let c = consumer(&db, &queue, "ledger")
        .await
        .s3_client(s3_client(None).await)
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    let both = eventually(Duration::from_secs(15), async || {
        let m = running.consumer.metrics();
        m.failures("offload") >= 1 && m.failures("bad_pointer") >= 1
    })
    .await;
    let c = running.stop().await;
    assert!(both, "{:?}", c.metrics());
    let text = logs.text();
    let missing = text
        .lines()
        .find(|l| l.contains("outbox/missing") && l.contains("error="))
        .unwrap_or_else(|| panic!("no failure logged for the missing bucket:\n{text}"));
    assert!(missing.contains("NoSuchBucket"), "{missing}");
    assert!(!missing.contains("Error {"), "{missing}");
    assert!(
        text.contains("ExtendedPayloadSize `abc` is not a byte count"),
        "{text}"
    );
}

/// With `offload_buckets` set, a pointer into any other bucket is bad input and its object is not
/// read (whoever can send to the queue could have the consumer read any object its role can);
/// pointers into the publisher's bucket are read as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pointers_outside_the_offload_buckets_are_not_read() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let (queue, ids, allowed) = relayed_offloaded_to(&db, 2).await;
    let other = bucket().await;
    s3_client(None)
        .await
        .put_object()
        .bucket(&other)
        .key("outbox/secret")
        .body(
            r#"{"kind":"credited","account":"acc-x","n":1,"cents":1}"#
                .as_bytes()
                .to_vec()
                .into(),
        )
        .send()
        .await
        .unwrap();
    send_pointer(&queue, &other, "outbox/secret", Uuid::new_v4()).await;
    let seen = Seen::default();
    let c = consumer(&db, &queue, "ledger")
        .await
        .s3_client(s3_client(None).await)
        .offload_buckets([allowed.as_str()])
        .observe(seen.observer())
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    let done = eventually(Duration::from_secs(20), async || {
        let m = running.consumer.metrics();
        m.handled() == ids.len() as u64 && m.failures("bad_pointer") >= 1
    })
    .await;
    let c = running.stop().await;
    assert!(done, "{:?}", c.metrics());
    // The other bucket's object was not applied.
    assert_eq!(effect_counts(&db).await, (2, 2));
    assert!(
        seen.0
            .lock()
            .unwrap()
            .iter()
            .any(|d| d.outcome == Outcome::BadInput(BadInput::BadPointer))
    );
}
