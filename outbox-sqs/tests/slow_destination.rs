//! Batch calls that go on without their publish (the default call wait, 1 s): a destination
//! answering slowly holds only its own events, not the batch's others bound for healthy
//! destinations; each event's next claim takes its call's answer without calling again.

mod common;

use std::time::{Duration, Instant};

use common::slow::{accepted, fast_and_slow, goes_on, until_answered};
use common::{builder, event};
use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome, Publisher};
use outbox_sqs_fixture::{CallFault, EntryFault, SqsFixture};
use outbox_tests::eventually;
use serde_json::json;

#[tokio::test]
async fn a_slow_queue_holds_only_its_own_events_and_the_next_claim_takes_its_answer() {
    let (fx, publisher) = fast_and_slow(Duration::from_millis(2_500), "slow", 8).await;
    let slow = event("slow.created", "order", "s", 1, json!("slow-1"));
    let fast: Vec<ClaimedEvent> = (0..15)
        .map(|n| {
            event(
                "order.created",
                "order",
                &format!("f{n}"),
                2 + n,
                json!(format!("fast-{n}")),
            )
        })
        .collect();
    let mut batch = vec![slow.clone()];
    batch.extend(fast.iter().cloned());

    let started = Instant::now();
    let outcomes = publisher.publish(&batch).await.unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(2_000),
        "the publish waited {took:?} for a call answered in 2.5 s"
    );
    assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    for (n, o) in outcomes[1..].iter().enumerate() {
        assert_eq!(o, &PublishOutcome::Published, "fast event {n}");
    }
    for e in &fast {
        assert_eq!(accepted(&fx, e), 1);
    }

    // Claimed again while its call runs: put back at once, no second call.
    let again = Instant::now();
    let outcomes = publisher
        .publish(std::slice::from_ref(&slow))
        .await
        .unwrap();
    assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    assert!(again.elapsed() < Duration::from_millis(1_000));

    // Once the call answered, the next claim takes its answer without calling (2.5 s).
    let (outcomes, took) = until_answered(&publisher, std::slice::from_ref(&slow)).await;
    assert_eq!(outcomes, vec![PublishOutcome::Published]);
    assert!(
        took < Duration::from_millis(1_000),
        "called again: {took:?}"
    );
    assert_eq!(accepted(&fx, &slow), 1, "sent once");
    // Taken once: a later claim (another relay's message was lost, say) sends it again.
    let outcomes = publisher
        .publish(std::slice::from_ref(&slow))
        .await
        .unwrap();
    assert!(
        goes_on(&outcomes[0]),
        "a new call, slow again: {outcomes:?}"
    );
}

/// A counted failure of a call that went on is not lost with its publish: the event's next
/// claim counts it.
#[tokio::test]
async fn a_detached_calls_failure_counts_at_the_next_claim() {
    let (fx, publisher) = fast_and_slow(Duration::from_millis(2_000), "slow", 8).await;
    fx.fail_entries_where(|m| m.body.contains("poisoned"), EntryFault::server_error());
    let slow = event("slow.created", "order", "s", 1, json!("poisoned"));
    let outcomes = publisher
        .publish(std::slice::from_ref(&slow))
        .await
        .unwrap();
    assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    let (outcomes, _) = until_answered(&publisher, std::slice::from_ref(&slow)).await;
    assert!(
        matches!(&outcomes[0], PublishOutcome::Retry(f) if f.message().contains("InternalError")),
        "{outcomes:?}"
    );
}

/// A call going on that fails as a whole while no call of the publisher had an answer (every
/// call failing: an outage) puts its events back uncounted, as a publish whose calls all fail
/// does; while others went through, its failure counts (the fault suite: each event of a 30 s
/// SQS outage was charged attempts once its calls, slow to fail, went on).
#[tokio::test]
async fn a_call_going_on_that_fails_in_an_outage_of_everything_counts_no_attempt() {
    let (fx, publisher) = fast_and_slow(Duration::from_millis(2_500), "slow", 8).await;
    fx.fail_calls_for(Duration::from_secs(60), CallFault::ServiceUnavailable);
    let lone = event("slow.created", "order", "s", 1, json!("slow-1"));
    let outcomes = publisher
        .publish(std::slice::from_ref(&lone))
        .await
        .unwrap();
    assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    // Its call failed with nothing else answered, nor its probe: the queue is down, and the event
    // put back uncounted.
    let outcomes = publisher
        .publish(std::slice::from_ref(&lone))
        .await
        .unwrap();
    assert!(
        matches!(&outcomes[0], PublishOutcome::Unavailable(f) if f.message().contains("does not answer")),
        "{outcomes:?}"
    );

    // While the fast queue answers, the slow one's failure counts.
    fx.clear_faults();
    let (fx, publisher) = fast_and_slow(Duration::from_millis(2_500), "slow", 8).await;
    let slow = event("slow.created", "order", "t", 1, json!("slow-2"));
    let outcomes = publisher
        .publish(std::slice::from_ref(&slow))
        .await
        .unwrap();
    assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    let fast = event("order.created", "order", "f", 2, json!("fast"));
    let outcomes = publisher
        .publish(std::slice::from_ref(&fast))
        .await
        .unwrap();
    assert_eq!(outcomes, vec![PublishOutcome::Published]);
    // The slow call takes this fault when its 2.5 s are up.
    fx.fail_next_calls(1, CallFault::ServiceUnavailable);
    let (outcomes, _) = until_answered(&publisher, std::slice::from_ref(&slow)).await;
    assert!(
        matches!(&outcomes[0], PublishOutcome::Retry(_)),
        "{outcomes:?}"
    );
}

/// A result taken by a publish that then fails as a whole (every call of it failing, an outage:
/// its outcomes are not applied) is kept for the event's next claim: dropped, it had a published
/// event sent again.
#[tokio::test]
async fn a_result_taken_by_a_publish_that_fails_as_a_whole_is_kept() {
    let (fx, publisher) = fast_and_slow(Duration::from_millis(2_000), "slow", 8).await;
    let slow = event("slow.created", "order", "s", 1, json!("slow-1"));
    let outcomes = publisher
        .publish(std::slice::from_ref(&slow))
        .await
        .unwrap();
    assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    assert!(eventually(Duration::from_secs(10), async || accepted(&fx, &slow) == 1).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    fx.fail_next_calls(1, CallFault::InternalError);
    let fast = event("order.created", "order", "f", 2, json!("fast"));
    let failed = publisher.publish(&[slow.clone(), fast]).await;
    assert!(failed.is_err(), "every call failed: {failed:?}");
    let started = Instant::now();
    let outcomes = publisher
        .publish(std::slice::from_ref(&slow))
        .await
        .unwrap();
    assert_eq!(outcomes, vec![PublishOutcome::Published]);
    assert!(started.elapsed() < Duration::from_millis(1_000));
    assert_eq!(accepted(&fx, &slow), 1, "not sent again");
}

/// A publish whose every call that ended failed is an outage, whatever its calls going on will
/// do: it fails as a whole, its events put back uncounted (counted as calls that went through,
/// calls going on had each event of a 30 s SQS outage charged attempts: fault suite).
#[tokio::test]
async fn a_publish_whose_ended_calls_all_failed_is_an_outage_whatever_goes_on() {
    let (fx, publisher) = fast_and_slow(Duration::from_millis(2_000), "slow", 8).await;
    // The fast queue's call takes the fault: the slow one's waits 2 s before it would.
    fx.fail_next_calls(1, CallFault::InternalError);
    let slow = event("slow.created", "order", "s", 1, json!("slow-1"));
    let fast = event("order.created", "order", "f", 2, json!("fast"));
    let failed = publisher.publish(&[slow.clone(), fast]).await;
    assert!(failed.is_err(), "{failed:?}");
    // The slow call went on all the same: its answer is taken at the next claim.
    let (outcomes, _) = until_answered(&publisher, std::slice::from_ref(&slow)).await;
    assert_eq!(outcomes, vec![PublishOutcome::Published]);
    assert_eq!(accepted(&fx, &slow), 1);
}

/// A call that went on stands, whatever became of an earlier event of its FIFO message group: a
/// later event's answer is applied, not dropped as behind the earlier one (its answer taken, the
/// published event was sent again, or a counted failure lost).
#[tokio::test]
async fn a_later_events_answer_is_applied_whatever_became_of_its_groups_earlier_event() {
    let (fx, publisher) = fast_and_slow(Duration::from_millis(2_000), "slow.fifo", 8).await;
    fx.fail_entries_where(|m| m.body.contains("poisoned"), EntryFault::server_error());
    let first = event("slow.created", "order", "g", 1, json!("poisoned"));
    let second = event("slow.created", "order", "g", 2, json!("second"));
    // Claimed apart (the relay with ordering off), each call going on.
    for e in [&first, &second] {
        let outcomes = publisher.publish(std::slice::from_ref(e)).await.unwrap();
        assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    }
    assert!(
        eventually(Duration::from_secs(10), async || accepted(&fx, &second)
            == 1)
        .await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let outcomes = publisher.publish(&[first, second.clone()]).await.unwrap();
    assert!(
        matches!(&outcomes[0], PublishOutcome::Retry(f) if f.message().contains("InternalError")),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[1], PublishOutcome::Published, "{outcomes:?}");
    assert_eq!(accepted(&fx, &second), 1);
}

/// On a FIFO queue, an event behind one of its message group whose call goes on waits with it,
/// and is sent after it.
#[tokio::test]
async fn a_fifo_groups_later_event_waits_for_the_call_going_on() {
    let (fx, publisher) = fast_and_slow(Duration::from_millis(2_500), "slow.fifo", 8).await;
    let first = event("slow.created", "order", "g", 1, json!("first"));
    let second = event("slow.created", "order", "g", 2, json!("second"));
    let outcomes = publisher
        .publish(std::slice::from_ref(&first))
        .await
        .unwrap();
    assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    let pair = [first.clone(), second.clone()];
    let outcomes = publisher.publish(&pair).await.unwrap();
    assert!(goes_on(&outcomes[0]), "still runs: {outcomes:?}");
    assert!(
        matches!(&outcomes[1], PublishOutcome::Unavailable(f)
            if f.kind() == FailureKind::InProgress && f.message().contains("goes on")),
        "{outcomes:?}"
    );
    // The first's answer taken, the second sent then (its call going on in turn).
    let until = Instant::now() + Duration::from_secs(20);
    let outcomes = loop {
        let outcomes = publisher.publish(&pair).await.unwrap();
        if outcomes[0] == PublishOutcome::Published || Instant::now() > until {
            break outcomes;
        }
        assert!(goes_on(&outcomes[1]), "{outcomes:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(outcomes[0], PublishOutcome::Published, "{outcomes:?}");
    assert!(goes_on(&outcomes[1]), "{outcomes:?}");
    let (outcomes, _) = until_answered(&publisher, std::slice::from_ref(&second)).await;
    assert_eq!(outcomes, vec![PublishOutcome::Published]);
    let bodies: Vec<String> = fx
        .messages()
        .into_iter()
        .filter(|m| m.queue_name == "slow.fifo")
        .map(|m| m.body)
        .collect();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    assert!(
        bodies[0].contains("first") && bodies[1].contains("second"),
        "{bodies:?}"
    );
}

/// An event bound for the slow queue (`slow.logged`), of aggregate `order`/`order_id`.
#[derive(Debug, Clone, serde::Serialize)]
struct SlowEvent {
    order_id: String,
}

impl outbox_core::OutboxEvent for SlowEvent {
    fn aggregate_type(&self) -> &'static str {
        "order"
    }
    fn event_type(&self) -> &'static str {
        "slow.logged"
    }
    fn aggregate_id(&self) -> impl std::fmt::Display + '_ {
        &self.order_id
    }
}

/// Through the relay with per-aggregate order: a queue answering in 3 s holds the aggregate of
/// its event, in order, and no other. The batch waited for the call, and the next events of every
/// aggregate it held waited for the batch (black-box run: a topic answering in 2-12 s held
/// healthy queues' events as long).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_queue_holds_only_its_events_aggregate_through_the_relay() {
    use outbox_core::{Emitter, Relay};
    use outbox_tests::{HeldAggregate, RunningRelay, TestDb, TestEvent};

    let db = TestDb::new().await;
    let (fx, publisher) = fast_and_slow(Duration::from_secs(3), "slow", 8).await;
    let relay = Relay::builder(db.pool().clone(), publisher.clone())
        .listen(db.config().clone())
        .poll_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let emitter = Emitter::for_publisher(&publisher);
    let client = db.pool().get().await.unwrap();
    let warm = emitter
        .emit(&**client, &TestEvent::new("warm", 1))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), async || db
            .processed(&[warm])
            .await)
        .await
    );

    // `a` 1 (to the slow queue) and 2, `b` 1 to 4, interleaved in one transaction.
    let first = SlowEvent {
        order_id: "a".into(),
    };
    let held = HeldAggregate::emit(&db, &emitter, &first).await;
    held.published(&db, Duration::from_millis(2_500)).await;
    running.stop().await;
    let messages = fx.messages();
    let position = |queue: &str, order: &str| {
        messages.iter().position(|m| {
            m.queue_name == queue
                && serde_json::from_str::<serde_json::Value>(&m.body)
                    .is_ok_and(|v| v["order_id"] == order)
        })
    };
    let (first, second) = (position("slow", "a"), position("fast", "a"));
    assert!(first.is_some() && second.is_some(), "{messages:?}");
    assert!(first < second, "a 1 accepted before a 2");
    assert_eq!(
        messages.iter().filter(|m| m.queue_name == "slow").count(),
        1,
        "the slow queue's event sent once"
    );
}

/// A destination whose batch calls fail slowly as a whole while it answers its probes is not in
/// an outage: its failures count (the outage rule for calls going on asked only whether any batch
/// call of the publisher had an answer: such a destination, alone, had its events put back
/// uncounted for ever, without back-off: review).
#[tokio::test]
async fn a_destination_failing_slowly_while_it_answers_probes_counts_its_failures() {
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("q");
    let publisher = builder(&fx).await.default_queue(url).build().await.unwrap();
    publisher.check().await.unwrap();
    // Its batch calls fail after 2.5 s; its probes (`GetQueueAttributes`) answer at once.
    fx.slow_action("SendMessageBatch", Duration::from_millis(2_500));
    fx.fail_action_for(
        "SendMessageBatch",
        Duration::from_secs(60),
        CallFault::ServiceUnavailable,
    );
    let e = event("order.created", "order", "a", 1, json!("failing"));
    let outcomes = publisher.publish(std::slice::from_ref(&e)).await.unwrap();
    assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    let (outcomes, _) = until_answered(&publisher, std::slice::from_ref(&e)).await;
    assert!(
        matches!(&outcomes[0], PublishOutcome::Retry(_)),
        "{outcomes:?}"
    );
}
