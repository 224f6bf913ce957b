//! The retry quota of the standard retry mode (500 tokens shared by a client's calls): when SQS
//! fails most calls, each is tried once instead of `max_attempts` times. The direct transport
//! keeps its own quota; these tests hold it to the SDK's (the `sdk` transport) call for call.

mod common;

use std::time::Duration;

use common::{assert_all_published, events};
use outbox_core::Publisher;
use outbox_sqs::SqsTransport;
use outbox_sqs_fixture::{CallFault, SqsFixture};

/// A publisher of `transport` to a new queue of `fx` that makes one call at a time, 3 attempts
/// per call with a backoff of a millisecond or two.
async fn publisher(fx: &SqsFixture, transport: SqsTransport) -> outbox_sqs::SqsPublisher {
    let q = fx.create_queue("events");
    let retry = aws_config::retry::RetryConfig::standard()
        .with_max_attempts(3)
        .with_initial_backoff(Duration::from_millis(1))
        .with_max_backoff(Duration::from_millis(2));
    let sdk = outbox_tests::sqs::sdk_config_for(&fx.endpoint_url())
        .await
        .into_builder()
        .retry_config(retry)
        .build();
    outbox_sqs::SqsPublisher::builder()
        .sdk_config(sdk)
        .transport(transport)
        .default_queue(&q)
        .max_in_flight(1)
        .build()
        .await
        .unwrap()
}

/// Publishes 10 events `calls` times, each call preceded by `fault`'s first `fails` attempts
/// failing (the fixture's count replaced before each call): the `SendMessageBatch` calls made.
async fn calls_made(
    fx: &SqsFixture,
    p: &outbox_sqs::SqsPublisher,
    calls: usize,
    fails: u64,
    fault: CallFault,
) -> u64 {
    let before = fx.calls_to("SendMessageBatch");
    for _ in 0..calls {
        fx.fail_next_calls(fails, fault.clone());
        let _ = p.publish(&events(10, "order.created")).await;
    }
    fx.clear_faults();
    fx.calls_to("SendMessageBatch") - before
}

/// One test, so that nothing else in this process shares the SDK's quota: the SDK keeps one per
/// retry partition (the service and region), for every client of the process.
#[tokio::test]
async fn the_retry_quota_runs_out_and_refills_as_the_sdks_does() {
    for transport in [SqsTransport::Direct, SqsTransport::Sdk] {
        let fx = SqsFixture::start().await;
        let p = publisher(&fx, transport).await;
        // Heard from (its first failures are then not taken for the queue being down, which
        // would spare the later calls: `failing_destination.rs`). A success at a full bucket
        // adds nothing to it.
        assert_all_published(&p.publish(&events(10, "order.created")).await.unwrap());
        // Every call fails with a server error (HTTP 500: a retry costs 10 of the 500 tokens):
        // the first 25 calls are tried 3 times and the rest once — the client does not triple
        // the load on a failing service.
        let made = calls_made(&fx, &p, 60, 1_000, CallFault::InternalError).await;
        assert_eq!(made, 25 * 3 + 35, "{transport}: every call failing");

        // Ten successes at the first attempt pay for one retry after a server error again.
        for _ in 0..10 {
            assert_all_published(&p.publish(&events(10, "order.created")).await.unwrap());
        }
        let made = calls_made(&fx, &p, 1, 1_000, CallFault::InternalError).await;
        assert_eq!(made, 2, "{transport}: after 10 successes");

        // A full bucket again (each first-attempt success adds 1 token).
        for _ in 0..500 {
            assert_all_published(&p.publish(&events(10, "order.created")).await.unwrap());
        }
        // Two attempts of every three fail: a call that succeeds at its third attempt gets back
        // its last retry's 10 tokens only, so each costs 10 for good. After 49 calls 10 are
        // left: the 50th call's second retry is refused, and every later call is tried once
        // and fails. Refunding every retry's tokens, the quota never ran out (450 calls).
        let made = calls_made(&fx, &p, 150, 2, CallFault::InternalError).await;
        assert_eq!(made, 49 * 3 + 2 + 100, "{transport}: two failures in three");
    }
}
