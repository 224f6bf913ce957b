//! The fixture as `aws-sdk-sqs` sees it.

use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::Credentials;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::operation::get_queue_attributes::GetQueueAttributesError;
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchError;
use aws_sdk_sqs::types::{MessageAttributeValue, QueueAttributeName, SendMessageBatchRequestEntry};
use outbox_sqs_fixture::{CallFault, EntryFault, SqsFixture};

async fn client(fx: &SqsFixture) -> Client {
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(fx.endpoint_url())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .load()
        .await;
    let conf = aws_sdk_sqs::config::Builder::from(&sdk)
        .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled())
        .build();
    Client::from_conf(conf)
}

fn entry(id: &str, body: &str) -> SendMessageBatchRequestEntry {
    SendMessageBatchRequestEntry::builder()
        .id(id)
        .message_body(body)
        .message_attributes(
            "event_type",
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value("order.created")
                .build()
                .unwrap(),
        )
        .build()
        .unwrap()
}

async fn send(
    client: &Client,
    url: &str,
    entries: Vec<SendMessageBatchRequestEntry>,
) -> Result<
    aws_sdk_sqs::operation::send_message_batch::SendMessageBatchOutput,
    SdkError<SendMessageBatchError>,
> {
    client
        .send_message_batch()
        .queue_url(url)
        .set_entries(Some(entries))
        .send()
        .await
}

#[tokio::test]
async fn records_what_it_accepts() {
    let fx = SqsFixture::start().await;
    let c = client(&fx).await;
    let url = fx.create_queue("orders");
    assert_eq!(url, format!("{}/000000000000/orders", fx.endpoint_url()));
    let out = send(
        &c,
        &url,
        vec![entry("a", "{\"n\":1}"), entry("b", "{\"n\":2}")],
    )
    .await
    .unwrap();
    assert_eq!(out.successful().len(), 2);
    assert!(out.failed().is_empty());
    // MD5 of `{"n":1}`.
    assert_eq!(
        out.successful()[0].md5_of_message_body(),
        "082c26c8a6bc75226a31da5495cc9292"
    );
    let sent = fx.messages();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].body, "{\"n\":1}");
    assert_eq!(sent[0].queue_name, "orders");
    assert_eq!(sent[0].attributes["event_type"], "order.created");
    assert_eq!(sent[0].attribute_types["event_type"], "String");
    assert_eq!(sent[0].entry_id.as_deref(), Some("a"));
    assert_eq!(sent[0].message_id, out.successful()[0].message_id());
    assert_eq!(fx.calls(), 1);
    assert_eq!(fx.calls_to("SendMessageBatch"), 1);
    assert_eq!(fx.accepted(), 2);

    // SendMessage too, and FIFO fields.
    let fifo = fx.create_queue("orders.fifo");
    c.send_message()
        .queue_url(&fifo)
        .message_body("x")
        .message_group_id("order:1")
        .message_deduplication_id("d1")
        .send()
        .await
        .unwrap();
    let last = fx.take_messages().pop().unwrap();
    assert_eq!(last.action, "SendMessage");
    assert_eq!(last.group_id.as_deref(), Some("order:1"));
    assert_eq!(last.dedup_id.as_deref(), Some("d1"));
    assert!(fx.messages().is_empty());

    // Recording off still counts.
    fx.set_recording(false);
    send(&c, &url, vec![entry("a", "x")]).await.unwrap();
    assert!(fx.messages().is_empty());
    assert_eq!(fx.accepted(), 4);
}

#[tokio::test]
async fn queue_actions_and_a_missing_queue() {
    let fx = SqsFixture::start().await;
    let c = client(&fx).await;
    let created = c.create_queue().queue_name("q1").send().await.unwrap();
    let url = created.queue_url().unwrap().to_owned();
    assert_eq!(
        c.get_queue_url()
            .queue_name("q1")
            .send()
            .await
            .unwrap()
            .queue_url(),
        Some(url.as_str())
    );
    let attrs = c
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    assert!(
        attrs
            .attributes()
            .unwrap()
            .contains_key(&QueueAttributeName::QueueArn)
    );
    let listed = c.list_queues().send().await.unwrap();
    assert_eq!(listed.queue_urls(), std::slice::from_ref(&url));

    // A FIFO queue needs the .fifo suffix.
    let err = c
        .create_queue()
        .queue_name("nofifo")
        .attributes(QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("InvalidParameterValue"));

    // The SDK parses a missing queue into its typed error.
    let err = c
        .get_queue_attributes()
        .queue_url(fx.queue_url("missing"))
        .send()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.as_service_error(),
            Some(GetQueueAttributesError::QueueDoesNotExist(_))
        ),
        "{err:?}"
    );
    let err = send(&c, &fx.queue_url("missing"), vec![entry("a", "x")])
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.as_service_error(),
            Some(SendMessageBatchError::QueueDoesNotExist(_))
        ),
        "{err:?}"
    );
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 400);
}

#[tokio::test]
async fn validates_batches_and_entries_like_sqs() {
    let fx = SqsFixture::start().await;
    let c = client(&fx).await;
    let url = fx.create_queue("v");
    let fifo = fx.create_queue("v.fifo");

    let too_many: Vec<_> = (0..11).map(|i| entry(&format!("e{i}"), "x")).collect();
    let err = send(&c, &url, too_many).await.unwrap_err();
    assert!(matches!(
        err.as_service_error(),
        Some(SendMessageBatchError::TooManyEntriesInBatchRequest(_))
    ));
    let err = send(&c, &url, vec![entry("a", "x"), entry("a", "y")])
        .await
        .unwrap_err();
    assert!(matches!(
        err.as_service_error(),
        Some(SendMessageBatchError::BatchEntryIdsNotDistinct(_))
    ));
    let half = "x".repeat(600 * 1024);
    let err = send(&c, &url, vec![entry("a", &half), entry("b", &half)])
        .await
        .unwrap_err();
    assert!(matches!(
        err.as_service_error(),
        Some(SendMessageBatchError::BatchRequestTooLong(_))
    ));

    let bad_attr = SendMessageBatchRequestEntry::builder()
        .id("c")
        .message_body("ok")
        .message_attributes(
            "aggregate_id",
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value("a\u{1}b")
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let out = send(
        &c,
        &url,
        vec![entry("a", "fine"), entry("b", "bad \u{FFFF}"), bad_attr],
    )
    .await
    .unwrap();
    assert_eq!(out.successful().len(), 1);
    let failed = out.failed();
    assert_eq!(failed.len(), 2);
    assert_eq!(
        (failed[0].id(), failed[0].code(), failed[0].sender_fault()),
        ("b", "InvalidMessageContents", true)
    );
    assert_eq!(
        (failed[1].id(), failed[1].code()),
        ("c", "InvalidParameterValue")
    );

    // FIFO needs a group id.
    let out = send(&c, &fifo, vec![entry("a", "x")]).await.unwrap();
    assert_eq!(out.failed()[0].code(), "MissingParameter");
}

#[tokio::test]
async fn injected_call_faults() {
    let fx = SqsFixture::start().await;
    let c = client(&fx).await;
    let url = fx.create_queue("f");

    fx.fail_next_calls(2, CallFault::ServiceUnavailable);
    for _ in 0..2 {
        let err = send(&c, &url, vec![entry("a", "x")]).await.unwrap_err();
        assert_eq!(err.raw_response().unwrap().status().as_u16(), 503);
        assert_eq!(err.code(), Some("ServiceUnavailable"));
    }
    send(&c, &url, vec![entry("a", "x")]).await.unwrap();

    fx.fail_next_calls(1, CallFault::InternalError);
    let err = send(&c, &url, vec![entry("a", "x")]).await.unwrap_err();
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 500);
    assert_eq!(err.code(), Some("InternalError"));

    fx.fail_next_calls(1, CallFault::Throttling);
    let err = send(&c, &url, vec![entry("a", "x")]).await.unwrap_err();
    assert!(matches!(
        err.as_service_error(),
        Some(SendMessageBatchError::RequestThrottled(_))
    ));
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 400);

    fx.fail_calls_for(Duration::from_millis(200), CallFault::Throttling);
    assert!(send(&c, &url, vec![entry("a", "x")]).await.is_err());
    tokio::time::sleep(Duration::from_millis(250)).await;
    send(&c, &url, vec![entry("a", "x")]).await.unwrap();

    fx.fail_next_calls(
        1,
        CallFault::Error {
            status: 403,
            code: "AccessDenied".into(),
            message: "nope".into(),
        },
    );
    let err = send(&c, &url, vec![entry("a", "x")]).await.unwrap_err();
    assert_eq!(err.code(), Some("AccessDenied"));
    assert_eq!(err.message(), Some("nope"));
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 403);
    assert_eq!(fx.calls_to("SendMessageBatch"), 8);
}

#[tokio::test]
async fn injected_entry_faults() {
    let fx = SqsFixture::start().await;
    let c = client(&fx).await;
    let url = fx.create_queue("e");
    fx.fail_entries_where(
        |m| m.body.contains("perm"),
        EntryFault::sender_fault("InvalidParameterValue", "bad"),
    );
    fx.fail_entries_where(|m| m.body.contains("temp"), EntryFault::server_error());
    let out = send(
        &c,
        &url,
        vec![entry("a", "ok"), entry("b", "perm"), entry("c", "temp")],
    )
    .await
    .unwrap();
    assert_eq!(out.successful().len(), 1);
    let f = out.failed();
    assert_eq!(
        (f[0].id(), f[0].sender_fault(), f[0].code(), f[0].message()),
        ("b", true, "InvalidParameterValue", Some("bad"))
    );
    assert_eq!(
        (f[1].id(), f[1].sender_fault(), f[1].code()),
        ("c", false, "InternalError")
    );
    assert_eq!(fx.messages().len(), 1);
    fx.clear_faults();
    let out = send(&c, &url, vec![entry("b", "perm")]).await.unwrap();
    assert_eq!(out.successful().len(), 1);
}

#[tokio::test]
async fn latency_and_concurrency() {
    let fx = SqsFixture::start().await;
    let c = client(&fx).await;
    let url = fx.create_queue("l");
    fx.set_latency(Duration::from_millis(100));
    let started = Instant::now();
    let calls = (0..4).map(|i| {
        let (c, url) = (c.clone(), url.clone());
        async move { send(&c, &url, vec![entry(&format!("e{i}"), "x")]).await }
    });
    for r in futures_join_all(calls).await {
        r.unwrap();
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(100) && elapsed < Duration::from_millis(300),
        "{elapsed:?}"
    );
    assert_eq!(fx.max_concurrent_calls(), 4);
    fx.set_latency(Duration::ZERO);
    fx.reset_counters();
    assert_eq!(fx.calls(), 0);
    assert_eq!(fx.max_concurrent_calls(), 0);
}

/// A minimal join-all (the fixture has no `futures` dependency).
async fn futures_join_all<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test]
async fn refuses_connections_then_resumes_on_the_same_port() {
    let fx = SqsFixture::start().await;
    let c = client(&fx).await;
    let url = fx.create_queue("r");
    send(&c, &url, vec![entry("a", "x")]).await.unwrap();
    let addr = fx.addr();

    fx.refuse_connections().await;
    assert!(std::net::TcpStream::connect(addr).is_err());
    let err = send(&c, &url, vec![entry("a", "x")]).await.unwrap_err();
    assert!(
        matches!(
            err,
            SdkError::DispatchFailure(_) | SdkError::ResponseError(_)
        ),
        "{err:?}"
    );

    fx.accept_connections().await;
    assert_eq!(fx.addr(), addr);
    send(&c, &url, vec![entry("a", "x")]).await.unwrap();

    fx.refuse_connections_for(Duration::from_millis(200)).await;
    assert!(send(&c, &url, vec![entry("a", "x")]).await.is_err());
    tokio::time::sleep(Duration::from_millis(400)).await;
    send(&c, &url, vec![entry("a", "x")]).await.unwrap();

    // Dropping the fixture closes the port.
    drop(fx);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(std::net::TcpStream::connect(addr).is_err());
}
