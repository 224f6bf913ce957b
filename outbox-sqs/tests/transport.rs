//! The two `SendMessageBatch` transports — the direct one (the default) and the AWS SDK's —
//! against the SQS fixture, which checks every request's SigV4 signature as SQS does.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider, future};
use common::{assert_all_published, builder, event, events};
use outbox_core::{ClaimedEvent, PublishOutcome, Publisher};
use outbox_sqs::{ErrorKind, SqsPublisher, SqsTransport};
use outbox_sqs_fixture::{CallFault, SentMessage, SqsFixture};
use outbox_tests::sqs::sdk_config_for;
use serde_json::json;

async fn publisher(
    fx: &SqsFixture,
    queue: &str,
    transport: SqsTransport,
    attempts: u32,
) -> SqsPublisher {
    builder(fx)
        .await
        .default_queue(queue)
        .transport(transport)
        .max_attempts(attempts)
        .build()
        .await
        .unwrap()
}

/// What a consumer sees of a message: queue, body, attributes (name, type, value), group, dedup id.
type Seen = (
    String,
    String,
    Vec<(String, String, String)>,
    Option<String>,
    Option<String>,
);

/// What a consumer sees of a message.
fn seen(m: &SentMessage) -> Seen {
    let attributes = m
        .attributes
        .iter()
        .map(|(k, v)| (k.clone(), m.attribute_types[k].clone(), v.clone()))
        .collect();
    (
        m.queue_name.clone(),
        m.body.clone(),
        attributes,
        m.group_id.clone(),
        m.dedup_id.clone(),
    )
}

fn tricky_events() -> Vec<ClaimedEvent> {
    let mut list = vec![
        event(
            "order.created",
            "order",
            "a b/ü",
            1,
            json!({"quote": "\"", "backslash": "\\", "tab": "\t", "nl": "\n", "ü": "😀", "n": 1e300}),
        ),
        event("order.paid", "order", "a b/ü", 2, json!([1, {"x": null}])),
    ];
    list.extend(events(9, "order.shipped"));
    list
}

#[tokio::test]
async fn both_transports_send_the_same_correctly_signed_messages() {
    let fx = SqsFixture::start().await;
    fx.verify_signatures("test", "test");
    let mut runs = Vec::new();
    for transport in [SqsTransport::Direct, SqsTransport::Sdk] {
        for name in ["orders.fifo", "plain"] {
            let q = fx.create_queue(name);
            let p = publisher(&fx, &q, transport, 1).await;
            let outcomes = p.publish(&tricky_events()).await.unwrap();
            assert_all_published(&outcomes);
        }
        let agent = fx.last_user_agent().unwrap_or_default();
        match transport {
            SqsTransport::Direct => assert!(agent.starts_with("outbox-sqs/"), "{agent}"),
            _ => assert!(agent.contains("aws-sdk-rust"), "{agent}"),
        }
        let mut messages: Vec<_> = fx.take_messages().iter().map(seen).collect();
        // Event ids differ between runs (each run makes its own events): compare the rest.
        for m in &mut messages {
            m.2.retain(|(name, _, _)| name != "event_id");
            m.4 = m.4.as_ref().map(|_| "event id".into());
        }
        messages.sort();
        assert_eq!(messages.len(), 22);
        runs.push(messages);
    }
    assert_eq!(
        runs[0], runs[1],
        "the direct transport sends what the SDK sends"
    );
    // Two calls per queue (11 events: 10 + 1), two queues, two transports.
    assert_eq!(fx.calls_to("SendMessageBatch"), 8);
    assert_eq!(fx.signatures_verified(), 8);

    // A wrong secret is refused by the signature check: a credentials failure of the whole call.
    fx.verify_signatures("test", "not the secret");
    let q = fx.create_queue("plain");
    let err = publisher(&fx, &q, SqsTransport::Direct, 1)
        .await
        .publish(&events(2, "order.created"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Credentials, "{err}");
    assert!(err.to_string().contains("SignatureDoesNotMatch"), "{err}");
}

#[tokio::test]
async fn the_direct_transport_retries_as_the_sdk_does() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("plain");
    // Back-offs of tens of milliseconds: the retries end before the publisher's watch would send
    // its probe (a second into a call), which would take one of the faults injected below.
    let sdk = sdk_config_for(&fx.endpoint_url())
        .await
        .to_builder()
        .retry_config(
            aws_sdk_sqs::config::retry::RetryConfig::standard()
                .with_initial_backoff(std::time::Duration::from_millis(20)),
        )
        .build();
    let p = SqsPublisher::builder()
        .sdk_config(sdk)
        .default_queue(q.as_str())
        .transport(SqsTransport::Direct)
        .max_attempts(3)
        .build()
        .await
        .unwrap();

    // Server errors and throttling are retried within the call, up to the attempts.
    fx.fail_next_calls(2, CallFault::InternalError);
    assert_all_published(&p.publish(&events(3, "order.created")).await.unwrap());
    assert_eq!(fx.calls_to("SendMessageBatch"), 3);
    fx.reset_counters();
    fx.fail_next_calls(1, CallFault::Throttling);
    assert_all_published(&p.publish(&events(3, "order.created")).await.unwrap());
    assert_eq!(fx.calls_to("SendMessageBatch"), 2);

    // A refusal of the request itself is not retried.
    fx.reset_counters();
    fx.fail_next_calls(
        3,
        CallFault::Error {
            status: 400,
            code: "InvalidParameterValue".into(),
            message: "bad".into(),
        },
    );
    let outcomes = p.publish(&events(1, "order.created")).await.unwrap();
    assert!(
        matches!(outcomes[0], PublishOutcome::Permanent(_)),
        "{outcomes:?}"
    );
    assert_eq!(fx.calls_to("SendMessageBatch"), 1);

    // Attempts used up: every call failed transiently, so the publish fails as a whole.
    fx.reset_counters();
    fx.fail_next_calls(3, CallFault::ServiceUnavailable);
    let err = p.publish(&events(2, "order.created")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Service, "{err}");
    assert!(err.to_string().contains("ServiceUnavailable"), "{err}");
    assert_eq!(fx.calls_to("SendMessageBatch"), 3);
}

#[tokio::test]
async fn the_direct_transport_survives_closed_connections() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("plain");
    let p = publisher(&fx, &q, SqsTransport::Direct, 1).await;
    assert_all_published(&p.publish(&events(3, "order.created")).await.unwrap());

    fx.refuse_connections().await;
    let err = p.publish(&events(2, "order.created")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("cannot reach SQS"), "{err}");

    // The pooled connection the server closed is not reused.
    fx.accept_connections().await;
    fx.take_messages();
    assert_all_published(&p.publish(&events(4, "order.created")).await.unwrap());
    assert_eq!(fx.take_messages().len(), 4);
}

#[derive(Debug)]
struct Counting(Arc<AtomicUsize>);

impl ProvideCredentials for Counting {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.0.fetch_add(1, Ordering::SeqCst);
        future::ProvideCredentials::ready(Ok(Credentials::new("test", "test", None, None, "t")))
    }
}

#[tokio::test]
async fn the_direct_transport_caches_credentials_and_fetches_them_again_when_refused() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("plain");
    let fetched = Arc::new(AtomicUsize::new(0));
    let sdk = sdk_config_for(&fx.endpoint_url())
        .await
        .into_builder()
        .credentials_provider(SharedCredentialsProvider::new(Counting(fetched.clone())))
        .build();
    let p = SqsPublisher::builder()
        .sdk_config(sdk)
        .max_attempts(1)
        .default_queue(q.as_str())
        .build()
        .await
        .unwrap();
    // Once at build, to check what a request header is given (`header_text.rs`): the signer
    // starts with those.
    let built = fetched.load(Ordering::SeqCst);
    assert_eq!(built, 1);
    let fetched_since = || fetched.load(Ordering::SeqCst) - built;
    for _ in 0..3 {
        assert_all_published(&p.publish(&events(12, "order.created")).await.unwrap());
    }
    assert_eq!(fetched_since(), 0, "the build's, cached across calls");

    fx.fail_next_calls(
        1,
        CallFault::Error {
            status: 403,
            code: "InvalidClientTokenId".into(),
            message: "The security token included in the request is invalid.".into(),
        },
    );
    let err = p.publish(&events(1, "order.created")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Credentials, "{err}");
    assert_all_published(&p.publish(&events(1, "order.created")).await.unwrap());
    assert_eq!(fetched_since(), 1, "fetched again after the refusal");

    // A refused signature (with SQS's time in the answer, as always) may be a rotated secret too.
    fx.fail_next_calls(
        1,
        CallFault::Error {
            status: 403,
            code: "InvalidSignatureException".into(),
            message:
                "The request signature we calculated does not match the signature you provided."
                    .into(),
        },
    );
    p.publish(&events(1, "order.created")).await.unwrap_err();
    assert_all_published(&p.publish(&events(1, "order.created")).await.unwrap());
    assert_eq!(
        fetched_since(),
        2,
        "fetched again after a refused signature"
    );
}

#[tokio::test]
async fn the_direct_transport_signs_with_sqs_clock_once_told_it_is_off() {
    let fx = SqsFixture::start().await;
    fx.verify_signatures("test", "test");
    let q = fx.create_queue("plain");
    // This machine's clock is an hour behind SQS's.
    fx.set_clock_skew(3600);

    // Without attempts to spare, the refusal fails the call — retried by the relay, never
    // dead-lettered — and teaches the publisher SQS's time.
    let once = publisher(&fx, &q, SqsTransport::Direct, 1).await;
    let err = once.publish(&events(2, "order.created")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Credentials, "{err}");
    assert!(err.to_string().contains("RequestTimeTooSkewed"), "{err}");
    assert_all_published(&once.publish(&events(2, "order.created")).await.unwrap());

    // With attempts to spare, the call itself is signed again with the corrected time.
    fx.reset_counters();
    let retrying = publisher(&fx, &q, SqsTransport::Direct, 2).await;
    assert_all_published(&retrying.publish(&events(3, "order.created")).await.unwrap());
    assert_eq!(fx.calls_to("SendMessageBatch"), 2);
    assert_eq!(fx.take_messages().len(), 5);
}

/// A refusal whose date is more than a day away is not taken for SQS's clock: a date years
/// away (a broken endpoint) had every later request signed at a time the signer cannot write,
/// and it panicked (review).
#[tokio::test]
async fn a_clock_more_than_a_day_away_is_not_taken() {
    let fx = SqsFixture::start().await;
    fx.verify_signatures("test", "test");
    let q = fx.create_queue("plain");
    fx.set_clock_skew(2 * 24 * 3600);
    let p = publisher(&fx, &q, SqsTransport::Direct, 1).await;
    for _ in 0..2 {
        let err = p.publish(&events(1, "order.created")).await.unwrap_err();
        assert!(err.to_string().contains("RequestTimeTooSkewed"), "{err}");
    }
}

/// An answer that is not SQS's (a proxy's 403 page: no error code) proves nothing about the
/// entries: they are retried, never dead-lettered, through either transport. (Before, it was
/// classified like an unknown sender fault: every entry `Permanent`.)
#[tokio::test]
async fn an_answer_without_an_sqs_error_code_is_retried_not_dead_lettered() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("plain");
    for transport in [SqsTransport::Direct, SqsTransport::Sdk] {
        let p = publisher(&fx, &q, transport, 1).await;
        fx.fail_next_calls(
            1,
            CallFault::Foreign {
                status: 403,
                body: "<html><body>Forbidden by proxy</body></html>".into(),
            },
        );
        // Every call of the publish failed transiently: it fails as a whole, and the relay
        // retries the batch later (a dead-lettering outcome would be `Ok([Permanent, …])`).
        let err = p
            .publish(&events(2, "order.created"))
            .await
            .expect_err("the publish fails as a whole, to be retried");
        assert_eq!(err.kind(), ErrorKind::Service, "{transport:?}: {err}");
        assert!(err.to_string().contains("HTTP 403"), "{transport:?}: {err}");
        assert_all_published(&p.publish(&events(2, "order.created")).await.unwrap());
    }
}

/// The AWS configuration's attempt timeout bounds each attempt of the direct transport, so a
/// stalled answer costs one attempt, not the whole call.
#[tokio::test]
async fn the_direct_transport_honours_the_attempt_timeout() {
    use aws_sdk_sqs::config::timeout::TimeoutConfig;
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("plain");
    let sdk = sdk_config_for(&fx.endpoint_url())
        .await
        .into_builder()
        .timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(std::time::Duration::from_millis(200))
                .build(),
        )
        .build();
    let p = SqsPublisher::builder()
        .sdk_config(sdk)
        .max_attempts(2)
        // The publish waits for its call (two attempts and the SDK's back-off between them could
        // outlast the default wait of 1 s: the call went on, and the test failed on a loaded CI).
        .call_wait(std::time::Duration::from_secs(3600))
        .default_queue(q.as_str())
        .build()
        .await
        .unwrap();
    fx.set_latency(std::time::Duration::from_secs(3));
    let started = std::time::Instant::now();
    let err = p.publish(&events(1, "order.created")).await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("attempt timeout"), "{err}");
    assert!(took < std::time::Duration::from_millis(2500), "{took:?}");
    assert_eq!(
        fx.calls_to("SendMessageBatch"),
        2,
        "both attempts were made"
    );
}

/// SQS's answer to a request signed with the wrong secret quotes the canonical request it
/// expected, session token included (the fixture answers so). Through either transport, the
/// error names the code and leaves the quote out: it is logged and stored with the events as
/// their last error.
#[tokio::test]
async fn a_refused_signature_never_shows_the_session_token() {
    let fx = SqsFixture::start().await;
    fx.verify_signatures("test", "the real secret");
    let q = fx.create_queue("plain");
    let token = "IQoJb3JpZ2luX2VjTOKEN";
    let sdk = sdk_config_for(&fx.endpoint_url())
        .await
        .into_builder()
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "test",
            "a rotated-away secret",
            Some(token.into()),
            None,
            "test",
        )))
        .build();
    for transport in [SqsTransport::Direct, SqsTransport::Sdk] {
        let p = SqsPublisher::builder()
            .sdk_config(sdk.clone())
            .max_attempts(1)
            .transport(transport)
            .default_queue(q.as_str())
            .build()
            .await
            .unwrap();
        let err = p.publish(&events(1, "order.created")).await.unwrap_err();
        let text = outbox_core::error_chain(&err);
        assert!(
            text.contains("SignatureDoesNotMatch"),
            "{transport:?}: {text}"
        );
        assert!(
            !text.contains(token) && !err.to_string().contains(token),
            "{transport:?}: {text}"
        );
        assert!(text.contains("left out"), "{transport:?}: {text}");
    }
}

/// The start-up check reads each queue through the transport that will publish to it: with the
/// direct transport, its own HTTP client, TLS and signing (the check used the SDK's client, so a
/// network path only that client had — a proxy, a private CA — passed the check and then failed
/// every publish).
#[tokio::test]
async fn the_start_up_check_goes_through_the_publishing_transport() {
    let fx = SqsFixture::start().await;
    fx.verify_signatures("test", "test");
    let q = fx.create_queue("plain");
    for (transport, agent) in [
        (SqsTransport::Direct, "outbox-sqs/"),
        (SqsTransport::Sdk, "aws-sdk-rust/"),
    ] {
        fx.reset_counters();
        let p = publisher(&fx, &q, transport, 1).await;
        p.check().await.unwrap();
        assert_eq!(fx.calls_to("GetQueueAttributes"), 1, "{transport:?}");
        let seen = fx.last_user_agent().unwrap_or_default();
        assert!(seen.starts_with(agent), "{transport:?}: {seen}");
    }
    // A queue that does not exist is named as such through the direct transport too.
    let missing = format!("{}/000000000000/missing", fx.endpoint_url());
    let err = publisher(&fx, &missing, SqsTransport::Direct, 1)
        .await
        .check()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QueueNotFound, "{err}");
}
