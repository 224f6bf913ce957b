//! S3 offload of large payloads against the local emulator (fauxqs: SQS, SNS and S3;
//! `bash scripts/services.sh` starts it), read back with the AWS reference reader of the pointer
//! format, the Python `amazon-sqs-extended-client` (installed by `scripts/extended-client.sh` into
//! `.tools/venv`).

mod aws;
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use aws::{TestTopic, bucket_name, create_bucket, get_object, s3_client};
use common::{assert_all_published, event};
use outbox_core::{Emitter, FailureKind, PublishOutcome, Publisher, Relay};
use outbox_sqs::{
    EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, ErrorKind, OFFLOAD_MAX_MESSAGE_BYTES, SQS_LIMITS,
    SqsPublisher, offload_key, pointer_body,
};
use outbox_tests::sqs::{TestQueue, endpoint, sdk_config};
use outbox_tests::{RunningRelay, TestDb, TestEvent, eventually};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);
const MIB: usize = 1024 * 1024;
/// The offload wait here: long enough that a publish returns with its uploads done. The default
/// (1 s) puts an event back while a slow upload goes on (`detached_upload.rs` tests that), and a
/// 20 MiB upload took longer than that on a loaded CI machine.
const UPLOADS_WAITED_FOR: Duration = Duration::from_secs(600);

async fn offloading(target: &str, bucket: &str) -> SqsPublisher {
    SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(endpoint())
        .default_queue(target)
        .offload_bucket(bucket)
        .offload_wait(UPLOADS_WAITED_FOR)
        .build()
        .await
        .unwrap()
}

/// [`offloading`] with the breaker's probe interval and broken-destination limit.
async fn breaking(target: &str, bucket: &str, probe: Duration, limit: Duration) -> SqsPublisher {
    SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(endpoint())
        .default_queue(target)
        .offload_bucket(bucket)
        .offload_wait(UPLOADS_WAITED_FOR)
        .breaker_probe_interval(probe)
        .broken_queue_dead_letter_after(limit)
        .build()
        .await
        .unwrap()
}

/// A payload of about `bytes` bytes: a JSON string of varied text (multi-byte characters included).
fn payload(bytes: usize) -> String {
    let unit = "0123456789abcdef ünï ✓ ";
    let text = unit.repeat(bytes / unit.len() + 1);
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    json!(&text[..end]).to_string()
}

/// Reads `count` messages from `queue` with the Python extended client; returns the directory
/// holding one file per event id.
fn read_with_extended_client(queue: &TestQueue, count: usize) -> tempdir::Dir {
    let dir = tempdir::Dir::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("bash")
        .arg(root.join("scripts/extended-client.sh"))
        .arg(queue.url())
        .arg(dir.path())
        .arg(count.to_string())
        .env("AWS_ENDPOINT_URL_SQS", endpoint())
        .output()
        .expect("run scripts/extended-client.sh (needs bash, python3.11 with venv and pip)");
    assert!(
        out.status.success(),
        "scripts/extended-client.sh failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let read: usize = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    assert_eq!(
        read, count,
        "the extended client read {read} of {count} messages"
    );
    dir
}

mod tempdir {
    use std::path::{Path, PathBuf};

    /// A fresh directory under the target directory, removed when dropped.
    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new() -> Dir {
            let dir = std::env::temp_dir().join(format!("outbox-offload-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[tokio::test]
async fn large_payloads_go_to_s3_and_the_python_extended_client_reads_them_back() {
    let s3 = s3_client().await;
    let bucket = bucket_name();
    create_bucket(&s3, &bucket).await;
    // Through a topic to two raw subscriptions: one read here, one by the extended client.
    let topic = TestTopic::standard().await;
    let raw = TestQueue::standard().await;
    let python = TestQueue::standard().await;
    topic.subscribe(&raw, true).await;
    topic.subscribe(&python, true).await;
    let p = offloading(&topic.arn, &bucket).await;
    p.check().await.unwrap();
    assert_eq!(p.limits().max_message_bytes(), OFFLOAD_MAX_MESSAGE_BYTES);

    let small = event("order.created", "order", "small", 1, json!({"n": 1}));
    let mut two = event("order.created", "order", "two", 2, json!(null));
    two.set_payload(payload(2 * MIB));
    let mut twenty = event("order.created", "order", "twenty", 3, json!(null));
    twenty.set_payload(payload(20 * MIB));
    let evs = [small.clone(), two.clone(), twenty.clone()];
    assert_all_published(&p.publish(&evs).await.unwrap());

    // The objects, byte for byte, at the event's key; nothing for the small one.
    for e in [&two, &twenty] {
        let stored = get_object(&s3, &bucket, &offload_key(&e.id.to_string())).await;
        assert_eq!(
            stored.as_deref(),
            Some(e.payload().as_bytes()),
            "{}",
            e.aggregate_id
        );
    }
    assert_eq!(
        get_object(&s3, &bucket, &offload_key(&small.id.to_string())).await,
        None
    );

    // The messages as sent: the pointer and the size attribute for the large ones, the payload and
    // the usual attributes only for the small one.
    let got = raw.receive_all(3, WAIT).await;
    assert_eq!(got.len(), 3);
    for m in &got {
        let e = evs
            .iter()
            .find(|e| e.id.to_string() == m.attributes["event_id"])
            .unwrap();
        if e.id == small.id {
            assert_eq!(m.body, e.payload());
            assert!(!m.attributes.contains_key(EXTENDED_PAYLOAD_SIZE_ATTRIBUTE));
        } else {
            assert_eq!(
                m.body,
                pointer_body(&bucket, &offload_key(&e.id.to_string()))
            );
            assert_eq!(
                m.attributes[EXTENDED_PAYLOAD_SIZE_ATTRIBUTE],
                e.payload().len().to_string()
            );
            assert_eq!(m.attribute_types[EXTENDED_PAYLOAD_SIZE_ATTRIBUTE], "Number");
            assert_eq!(m.attributes["event_type"], "order.created");
        }
    }

    // The reference reader returns every original payload unchanged.
    let dir = read_with_extended_client(&python, 3);
    for e in &evs {
        let body = std::fs::read(dir.path().join(e.id.to_string())).unwrap();
        assert!(
            body == e.payload().as_bytes(),
            "event {} differs",
            e.aggregate_id
        );
    }
}

#[tokio::test]
async fn a_20_mib_event_goes_from_emit_through_postgresql_and_the_relay_to_the_extended_client() {
    let s3 = s3_client().await;
    let bucket = bucket_name();
    create_bucket(&s3, &bucket).await;
    let queue = TestQueue::standard().await;
    let p = offloading(queue.url(), &bucket).await;
    p.check().await.unwrap();

    let db = TestDb::new().await;
    let big = TestEvent::new("order-big", 1).note("y".repeat(20 * MIB));
    // The default emitter refuses it (1 MiB); one built for the publisher takes it.
    let mut client = db.pool().get().await.unwrap();
    let e = Emitter::new().emit(&**client, &big).await.unwrap_err();
    assert!(e.to_string().contains("bytes"), "{e}");
    let emitter = Emitter::for_publisher(&p);
    let tx = client.transaction().await.unwrap();
    let id = emitter.emit(&tx, &big).await.unwrap();
    let small_id = emitter
        .emit(&tx, &TestEvent::new("order-small", 1))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // The relay's default claim budget (4 MiB) still claims it, alone.
    let relay = Relay::builder(db.pool().clone(), p).build().unwrap();
    let running = RunningRelay::start(&relay);
    assert!(
        eventually(WAIT, async || db.pending().await == 0).await,
        "not relayed"
    );
    running.stop().await;

    let dir = read_with_extended_client(&queue, 2);
    // Byte for byte what PostgreSQL stores (the relay sends the jsonb text unparsed).
    let stored: String = db
        .connect()
        .await
        .query_one(
            "SELECT payload::text FROM outbox_events WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    let body = std::fs::read(dir.path().join(id.to_string())).unwrap();
    assert!(
        body == stored.as_bytes(),
        "the payload read back differs from the stored one"
    );
    let sent: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(sent, serde_json::to_value(&big).unwrap());
    assert!(dir.path().join(small_id.to_string()).exists());
    assert!(
        get_object(&s3, &bucket, &offload_key(&small_id.to_string()))
            .await
            .is_none()
    );
}

/// A bucket that refuses uploads (missing, access denied) is a broken destination, as a missing
/// queue is: its events are put back without an attempt counted and without an upload each (one
/// probe per interval), the healthy ones go; once it exists, the probe sends the event, once; past
/// the broken-destination limit they are dead-lettered. (Black-box run: each large event counted
/// an attempt per claim, two log lines each, and was a dead letter after its ten attempts, about
/// 17 minutes, where a missing queue's events wait an hour.)
#[tokio::test]
async fn a_bucket_that_refuses_uploads_is_a_broken_destination_then_its_events_go_once() {
    let s3 = s3_client().await;
    let bucket = bucket_name(); // not created yet: every PutObject fails
    let queue = TestQueue::standard().await;
    let p = breaking(
        queue.url(),
        &bucket,
        Duration::from_millis(500),
        Duration::from_secs(3600),
    )
    .await;
    let e = p.check().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BucketNotFound, "{e}");
    assert!(e.to_string().contains(&bucket), "{e}");

    let mut big = event("order.created", "order", "big", 1, json!(null));
    big.set_payload(payload(2 * MIB));
    let small = event("order.created", "order", "small", 2, json!({"n": 1}));
    let put_back = |o: &PublishOutcome, says: &str| match o {
        PublishOutcome::Unavailable(f) => {
            assert_eq!(f.kind(), FailureKind::Destination, "{f}");
            assert!(f.message().contains("NoSuchBucket"), "{f}");
            assert!(f.message().contains(says), "{f}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    };
    let outcomes = p.publish(&[big.clone(), small.clone()]).await.unwrap();
    put_back(&outcomes[0], "S3 refused the upload");
    assert_eq!(outcomes[1], PublishOutcome::Published);
    // Open: not uploaded again before the probe is due (500 ms).
    let outcomes = p.publish(std::slice::from_ref(&big)).await.unwrap();
    put_back(&outcomes[0], "not called");
    let gauge = format!("outbox_s3_bucket_unavailable{{bucket=\"{bucket}\"}}");
    assert!(p.encode_metrics().contains(&format!("{gauge} 1")));
    // A health check sees it: the bucket, not a queue.
    let open = p.unavailable_bucket().expect("the bucket is unavailable");
    assert_eq!(open.bucket, bucket);
    assert!(open.last_error.contains("NoSuchBucket"), "{open:?}");
    assert!(p.unavailable_queues().is_empty());
    let got = queue.receive_all(1, Duration::from_secs(2)).await;
    assert_eq!(got.len(), 1, "only the small event was sent");
    assert_eq!(got[0].attributes["event_id"], small.id.to_string());

    // The bucket appears; the probe writes the object and sends the pointer, once.
    create_bucket(&s3, &bucket).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_all_published(&p.publish(std::slice::from_ref(&big)).await.unwrap());
    assert!(p.encode_metrics().contains(&format!("{gauge} 0")));
    assert_eq!(p.unavailable_bucket(), None);
    let got = queue.receive_all(2, Duration::from_secs(3)).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].attributes["event_id"], big.id.to_string());
    assert_eq!(
        get_object(&s3, &bucket, &offload_key(&big.id.to_string()))
            .await
            .as_deref(),
        Some(big.payload().as_bytes())
    );

    // Refusing longer than the limit: dead-lettered, saying so.
    let missing = bucket_name();
    let p = breaking(
        queue.url(),
        &missing,
        Duration::from_millis(300),
        Duration::from_millis(300),
    )
    .await;
    let outcomes = p.publish(std::slice::from_ref(&big)).await.unwrap();
    put_back(&outcomes[0], "S3 refused the upload");
    tokio::time::sleep(Duration::from_millis(400)).await;
    match &p.publish(std::slice::from_ref(&big)).await.unwrap()[0] {
        PublishOutcome::Permanent(f) => {
            assert!(f.message().contains("longer than the limit"), "{f}");
            assert!(f.message().contains(&missing), "{f}");
        }
        other => panic!("expected Permanent, got {other:?}"),
    }
    // The bucket comes back past the limit: the probe's success lets the batch's other uploads
    // through (admitted one by one, they were dead-lettered as "longer than the limit" while the
    // probe that closed the breaker was under way; black-box run).
    create_bucket(&s3, &missing).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut batch = Vec::new();
    for n in 0..3 {
        let mut e = event(
            "order.created",
            "order",
            &format!("late-{n}"),
            10 + n,
            json!(null),
        );
        e.set_payload(payload(2 * MIB));
        batch.push(e);
    }
    assert_all_published(&p.publish(&batch).await.unwrap());
}

#[tokio::test]
async fn below_the_threshold_nothing_touches_s3_and_a_lower_threshold_is_honoured() {
    let s3 = s3_client().await;
    let bucket = bucket_name();
    create_bucket(&s3, &bucket).await;
    let queue = TestQueue::standard().await;
    let p = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(endpoint())
        .default_queue(queue.url())
        .offload_bucket(&bucket)
        .offload_wait(UPLOADS_WAITED_FOR)
        .offload_threshold(1000)
        .build()
        .await
        .unwrap();
    let under = event("order.created", "order", "under", 1, json!("u".repeat(500)));
    let over = event("order.created", "order", "over", 2, json!("o".repeat(1000)));
    assert_all_published(&p.publish(&[under.clone(), over.clone()]).await.unwrap());
    assert_eq!(
        get_object(&s3, &bucket, &offload_key(&under.id.to_string())).await,
        None
    );
    assert_eq!(
        get_object(&s3, &bucket, &offload_key(&over.id.to_string()))
            .await
            .as_deref(),
        Some(over.payload().as_bytes())
    );
    let dir = read_with_extended_client(&queue, 2);
    for e in [&under, &over] {
        assert_eq!(
            std::fs::read(dir.path().join(e.id.to_string())).unwrap(),
            e.payload().as_bytes()
        );
    }
}

#[tokio::test]
async fn offload_settings_are_checked_at_build() {
    let queue_url = "http://127.0.0.1:4566/000000000000/q";
    let topic = "arn:aws:sns:us-east-1:000000000000:t";
    let cases: Vec<(Option<&str>, &str, Option<usize>, &str)> = vec![
        (
            None,
            "outbox-bucket",
            Some(SQS_LIMITS.max_message_bytes() + 1),
            "threshold",
        ),
        (
            Some(topic),
            "outbox-bucket",
            Some(1024 * 1024 + 1),
            "1048576",
        ),
        // Its reason is not "no queue or topic accepts more" (it was).
        (
            None,
            "outbox-bucket",
            Some(0),
            "so 1 offloads every message",
        ),
        (None, "Not_A_Bucket", None, "bucket"),
        (None, "", None, "bucket"),
    ];
    for (route, bucket, threshold, says) in cases {
        let mut b = SqsPublisher::builder()
            .sdk_config(sdk_config().await)
            .default_queue(queue_url)
            .offload_bucket(bucket);
        if let Some(t) = route {
            b = b.route("order.*", t);
        }
        if let Some(t) = threshold {
            b = b.offload_threshold(t);
        }
        let e = b.build().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    // A threshold without a bucket is a mistake too.
    let e = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .default_queue(queue_url)
        .offload_threshold(1000)
        .build()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("offload bucket"), "{e}");
}

/// A queue created with a smaller `MaximumMessageSize` than SQS's limit: the start-up check reads
/// it, so a message between the two is offloaded (it was sent inline, refused by the queue and
/// dead-lettered), also under a configured threshold above the queue's limit, and without offload
/// it is refused without a call, naming the queue's limit.
#[tokio::test]
async fn a_queue_that_takes_less_than_the_sqs_limit_gets_its_larger_events_offloaded() {
    let s3 = s3_client().await;
    let bucket = bucket_name();
    create_bucket(&s3, &bucket).await;
    let sqs = outbox_tests::sqs::sqs_client().await;
    let small = sqs
        .create_queue()
        .queue_name(format!("outbox-test-{}", uuid::Uuid::new_v4().simple()))
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::MaximumMessageSize,
            "262144",
        )
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    let big = event("order.created", "order", "big", 1, json!(payload(300_000)));

    let p = offloading(&small, &bucket).await;
    p.check().await.unwrap();
    assert_all_published(&p.publish(std::slice::from_ref(&big)).await.unwrap());
    assert_eq!(
        get_object(&s3, &bucket, &offload_key(&big.id.to_string()))
            .await
            .as_deref(),
        Some(big.payload().as_bytes()),
        "offloaded"
    );

    // A threshold above the queue's own limit (valid at build, against SQS's 1 MiB) gives way
    // to it: the event was sent inline and refused as too large.
    let high = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(endpoint())
        .default_queue(&small)
        .offload_bucket(&bucket)
        .offload_wait(UPLOADS_WAITED_FOR)
        .offload_threshold(512 * 1024)
        .build()
        .await
        .unwrap();
    high.check().await.unwrap();
    let also_big = event(
        "order.created",
        "order",
        "big-2",
        1,
        json!(payload(300_000)),
    );
    assert_all_published(&high.publish(std::slice::from_ref(&also_big)).await.unwrap());
    assert_eq!(
        get_object(&s3, &bucket, &offload_key(&also_big.id.to_string()))
            .await
            .as_deref(),
        Some(also_big.payload().as_bytes()),
        "offloaded under a threshold above the queue's limit"
    );

    let inline = SqsPublisher::builder()
        .sdk_config(sdk_config().await)
        .endpoint_url(endpoint())
        .default_queue(&small)
        .build()
        .await
        .unwrap();
    assert_eq!(
        Emitter::for_publisher(&inline).limits().max_message_bytes(),
        SQS_LIMITS.max_message_bytes(),
        "before the check, the service's limit"
    );
    inline.check().await.unwrap();
    // An emitter made after the check refuses what this queue would (it checked against SQS's
    // 1 MiB: the event was written, then dead-lettered by the relay).
    assert_eq!(
        Emitter::for_publisher(&inline).limits().max_message_bytes(),
        262_144
    );
    // Said to be the queue's, as the relay says it (emit said "SQS accepts at most 262144
    // bytes", a limit nobody could raise: black-box run).
    let refused = Emitter::for_publisher(&inline)
        .limits()
        .check_size("order.created", 300_000)
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .ends_with("; the queue's MaximumMessageSize allows at most 262144 bytes"),
        "{refused}"
    );
    match &inline.publish(&[big]).await.unwrap()[0] {
        PublishOutcome::Permanent(f) => {
            assert_eq!(f.kind(), FailureKind::TooLarge, "{f:?}");
            assert!(f.message().contains("262144"), "{f:?}");
        }
        other => panic!("expected a permanent failure, got {other:?}"),
    }
}
