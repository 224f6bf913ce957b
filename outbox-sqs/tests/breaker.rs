//! The per-queue circuit breaker of `SqsPublisher`, against the SQS test fixture: a queue broken as
//! a whole (missing, KMS key disabled, throttled) gets `Unavailable` outcomes without failing the
//! publish, is not called while its breaker is open (bar one probe per interval), closes when it
//! works again, and dead-letters its events once broken longer than the limit.

mod common;

use std::time::Duration;

use common::{assert_all_published, events};
use outbox_core::{ClaimedEvent, PublishOutcome, Publisher};
use outbox_sqs::SqsPublisher;
use outbox_sqs_fixture::{CallFault, EntryFault, SqsFixture};
use outbox_tests::sqs::sdk_config_for;

const PROBE: Duration = Duration::from_millis(300);

fn unavailable(o: &PublishOutcome) -> &str {
    match o {
        PublishOutcome::Unavailable(r) => r.message(),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

fn permanent(o: &PublishOutcome) -> &str {
    match o {
        PublishOutcome::Permanent(r) => r.message(),
        other => panic!("expected Permanent, got {other:?}"),
    }
}

/// `broken` events of type `broken.thing` interleaved with `healthy` events of `order.created`.
fn mixed(broken: usize, healthy: usize) -> Vec<ClaimedEvent> {
    let mut evs = events(broken + healthy, "order.created");
    for e in evs.iter_mut().take(broken) {
        e.event_type = "broken.thing".into();
    }
    evs
}

async fn publisher(fx: &SqsFixture, default: &str, dead_letter_after: Duration) -> SqsPublisher {
    SqsPublisher::builder()
        .sdk_config(sdk_config_for(&fx.endpoint_url()).await)
        .max_attempts(1)
        .route("broken.*", fx.queue_url("broken"))
        .default_queue(default)
        .breaker_probe_interval(PROBE)
        .broken_queue_dead_letter_after(dead_letter_after)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_missing_queue_opens_its_breaker_and_the_healthy_queue_keeps_flowing() {
    let fx = SqsFixture::start().await;
    let healthy = fx.create_queue("healthy");
    // The route's queue `broken` is never created: SQS answers QueueDoesNotExist.
    let publisher = publisher(&fx, &healthy, Duration::from_secs(3600)).await;

    let evs = mixed(10, 15);
    let outcomes = publisher.publish(&evs).await.unwrap();
    for o in &outcomes[..10] {
        let reason = unavailable(o);
        assert!(reason.contains("does not exist"), "{reason}");
        // SQS's code and status once (they were given twice, by the message and its source).
        assert_eq!(reason.matches("HTTP 400").count(), 1, "{reason}");
    }
    assert_all_published(&outcomes[10..]);
    let open = publisher.unavailable_queues();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].url, fx.queue_url("broken"));
    assert!(open[0].last_error.contains("does not exist"), "{open:?}");
    assert_eq!(
        fx.calls_to("SendMessageBatch"),
        3,
        "1 to the broken queue + 2"
    );
    let exposition = publisher.encode_metrics();
    assert!(
        exposition.contains(&format!(
            "outbox_sqs_queue_unavailable{{queue=\"{}\"}} 1",
            fx.queue_url("broken")
        )),
        "{exposition}"
    );
    assert!(
        exposition.contains(&format!(
            "outbox_sqs_queue_unavailable{{queue=\"{healthy}\"}} 0"
        )),
        "{exposition}"
    );

    // Open: the broken queue is not called; the healthy one is.
    fx.reset_counters();
    let outcomes = publisher.publish(&mixed(10, 15)).await.unwrap();
    for o in &outcomes[..10] {
        let reason = unavailable(o);
        assert!(reason.contains("circuit open, not called"), "{reason}");
        assert!(
            reason.contains("does not exist"),
            "the SQS error is kept: {reason}"
        );
    }
    assert_all_published(&outcomes[10..]);
    assert_eq!(fx.calls_to("SendMessageBatch"), 2, "only the healthy queue");

    // A probe while still broken keeps it open.
    tokio::time::sleep(PROBE + Duration::from_millis(50)).await;
    fx.reset_counters();
    let outcomes = publisher.publish(&mixed(10, 0)).await.unwrap();
    assert!(unavailable(&outcomes[0]).contains("does not exist"));
    assert_eq!(fx.calls_to("SendMessageBatch"), 1, "one probe");
    assert_eq!(publisher.unavailable_queues().len(), 1);

    // The queue comes back: the next probe succeeds and closes the breaker.
    fx.create_queue("broken");
    tokio::time::sleep(PROBE + Duration::from_millis(50)).await;
    assert_all_published(&publisher.publish(&mixed(10, 5)).await.unwrap());
    assert!(publisher.unavailable_queues().is_empty());
    let exposition = publisher.encode_metrics();
    assert!(
        !exposition
            .lines()
            .any(|l| l.starts_with("outbox_sqs_queue_unavailable{") && l.ends_with(" 1")),
        "the gauge shows the breaker closed: {exposition}"
    );
    assert_all_published(&publisher.publish(&mixed(20, 5)).await.unwrap());
    assert_eq!(
        fx.messages()
            .iter()
            .filter(|m| m.queue_name == "broken")
            .count(),
        30
    );
}

#[tokio::test]
async fn a_queue_broken_longer_than_the_limit_dead_letters_its_events_until_it_works_again() {
    let fx = SqsFixture::start().await;
    let healthy = fx.create_queue("healthy");
    fx.create_queue("broken");
    let publisher = publisher(&fx, &healthy, Duration::from_secs(1)).await;
    // Every call fails with a KMS error (the queue's key disabled): no call succeeds, yet the
    // publish does not fail as a whole and no event is dead-lettered at first.
    fx.fail_calls_for(
        Duration::from_secs(60),
        CallFault::Error {
            status: 400,
            code: "KMS.DisabledException".into(),
            message: "the key is disabled".into(),
        },
    );
    let outcomes = publisher.publish(&mixed(10, 0)).await.unwrap();
    for o in &outcomes {
        assert!(unavailable(o).contains("KMS.DisabledException"));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let outcomes = publisher.publish(&mixed(10, 0)).await.unwrap();
    assert!(unavailable(&outcomes[0]).contains("KMS.DisabledException"));

    // Past the limit (1 s): dead-lettered with the SQS error, probe or not.
    tokio::time::sleep(Duration::from_millis(700)).await;
    for _ in 0..2 {
        let outcomes = publisher.publish(&mixed(10, 0)).await.unwrap();
        for o in &outcomes {
            assert!(permanent(o).contains("KMS.DisabledException"), "{o:?}");
        }
    }

    // Fixed: the next probe closes the breaker and events flow again.
    fx.clear_faults();
    tokio::time::sleep(PROBE + Duration::from_millis(50)).await;
    assert_all_published(&publisher.publish(&mixed(10, 0)).await.unwrap());
    assert!(publisher.unavailable_queues().is_empty());
}

#[tokio::test]
async fn a_throttled_queue_puts_its_events_back_and_backs_off() {
    let fx = SqsFixture::start().await;
    let healthy = fx.create_queue("healthy");
    let publisher = publisher(&fx, &healthy, Duration::from_secs(3600)).await;
    fx.fail_next_calls(1, CallFault::Throttling);
    let outcomes = publisher
        .publish(&events(5, "order.created"))
        .await
        .unwrap();
    for o in &outcomes {
        assert!(unavailable(o).contains("RequestThrottled"), "{o:?}");
    }
    fx.reset_counters();
    let outcomes = publisher
        .publish(&events(5, "order.created"))
        .await
        .unwrap();
    assert!(unavailable(&outcomes[0]).contains("circuit open"));
    assert_eq!(fx.calls(), 0, "no call while the breaker is open");
    tokio::time::sleep(PROBE + Duration::from_millis(50)).await;
    assert_all_published(
        &publisher
            .publish(&events(5, "order.created"))
            .await
            .unwrap(),
    );
}

/// Throttling past the dead-letter limit still only puts the events back: they are fine and go
/// through once the load passes (they were dead-lettered after the limit, like a deleted queue's).
#[tokio::test]
async fn a_queue_throttled_past_the_limit_never_dead_letters() {
    let fx = SqsFixture::start().await;
    let healthy = fx.create_queue("healthy");
    let publisher = publisher(&fx, &healthy, Duration::from_millis(200)).await;
    fx.fail_calls_for(Duration::from_secs(3600), CallFault::Throttling);
    for _ in 0..4 {
        for o in &publisher
            .publish(&events(3, "order.created"))
            .await
            .unwrap()
        {
            unavailable(o);
        }
        tokio::time::sleep(PROBE + Duration::from_millis(50)).await;
    }
    fx.clear_faults();
    assert_all_published(
        &publisher
            .publish(&events(3, "order.created"))
            .await
            .unwrap(),
    );
}

#[tokio::test]
async fn an_entry_failed_for_its_queues_key_opens_the_breaker() {
    let fx = SqsFixture::start().await;
    let healthy = fx.create_queue("healthy");
    let publisher = publisher(&fx, &healthy, Duration::from_secs(3600)).await;
    fx.fail_entries_where(
        |_| true,
        EntryFault {
            sender_fault: false,
            code: "KMS.AccessDeniedException".into(),
            message: "access to the key is denied".into(),
        },
    );
    let outcomes = publisher
        .publish(&events(3, "order.created"))
        .await
        .unwrap();
    for o in &outcomes {
        assert!(
            unavailable(o).contains("KMS.AccessDeniedException"),
            "{o:?}"
        );
    }
    assert_eq!(publisher.unavailable_queues().len(), 1);
    // Nothing sent: a probe of its own cannot see a key that refuses sends only
    // (`GetQueueAttributes` works), so only a send closes it (closed so, it reopened at the next
    // send, its dead-letter clock restarted each time: review).
    tokio::time::sleep(PROBE * 4).await;
    assert_eq!(
        publisher.unavailable_queues().len(),
        1,
        "closed by a probe that cannot see the refusal"
    );
}

#[tokio::test]
async fn the_breakers_settings_are_validated() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("q");
    for (probe, limit) in [
        (Duration::ZERO, Duration::from_secs(60)),
        (Duration::from_secs(3601), Duration::from_secs(60)),
        (PROBE, Duration::ZERO),
        (PROBE, Duration::from_secs(31 * 24 * 3600)),
    ] {
        let e = SqsPublisher::builder()
            .sdk_config(sdk_config_for(&fx.endpoint_url()).await)
            .default_queue(q.as_str())
            .breaker_probe_interval(probe)
            .broken_queue_dead_letter_after(limit)
            .build()
            .await
            .unwrap_err();
        assert_eq!(e.kind(), outbox_sqs::ErrorKind::Config, "{e}");
    }
}

/// With ordering off, one FIFO group spanning two calls: the second call's events, held back after
/// the queue failed as a whole, are put back without an attempt too.
#[tokio::test]
async fn events_held_back_behind_a_broken_fifo_queue_are_unavailable_too() {
    let fx = SqsFixture::start().await;
    let healthy = fx.create_queue("healthy");
    let publisher = SqsPublisher::builder()
        .sdk_config(sdk_config_for(&fx.endpoint_url()).await)
        .max_attempts(1)
        .route("broken.*", fx.queue_url("broken.fifo"))
        .default_queue(healthy.as_str())
        .build()
        .await
        .unwrap();
    let mut evs = events(15, "broken.thing");
    for e in &mut evs {
        e.aggregate_id = "one-group".into();
    }
    let outcomes = publisher.publish(&evs).await.unwrap();
    for (i, o) in outcomes.iter().enumerate() {
        let reason = unavailable(o);
        if i >= 10 {
            assert!(reason.contains("not sent"), "{i}: {reason}");
        }
    }
    assert_eq!(
        fx.calls_to("SendMessageBatch"),
        1,
        "the second call is not made"
    );
}

/// A breaker nothing calls (its events dead-lettered, or held back behind them) is probed by a
/// task of its own and closes once the queue works: it stayed open, and its gauge at 1, however
/// long ago the queue was fixed (black-box run: the alert fired on for a topic that was back).
#[tokio::test]
async fn an_open_breaker_that_nothing_calls_closes_once_its_queue_works() {
    let fx = SqsFixture::start().await;
    let healthy = fx.create_queue("healthy");
    let publisher = publisher(&fx, &healthy, Duration::from_secs(3600)).await;
    let outcomes = publisher.publish(&mixed(1, 0)).await.unwrap();
    assert!(unavailable(&outcomes[0]).contains("does not exist"));
    assert_eq!(publisher.unavailable_queues().len(), 1);

    // Still missing: probed in the background (idle from two probe intervals after it opened, on
    // the task's next tick; waited for, not slept: a slow first call on a loaded CI machine moved
    // the tick past a fixed sleep), it stays open.
    let probed =
        outbox_tests::eventually(PROBE * 10, async || fx.calls_to("GetQueueAttributes") > 0).await;
    assert!(probed, "probed while idle");
    tokio::time::sleep(PROBE).await;
    assert_eq!(publisher.unavailable_queues().len(), 1);

    // Back, and nothing published: found by its probe.
    fx.create_queue("broken");
    let closed = outbox_tests::eventually(PROBE * 4, async || {
        publisher.unavailable_queues().is_empty()
    })
    .await;
    assert!(closed, "{:?}", publisher.unavailable_queues());
    assert_eq!(fx.calls_to("SendMessageBatch"), 1, "nothing sent meanwhile");
}
