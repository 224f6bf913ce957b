//! What a slow destination's calls going on may hold: its share of the in-flight slots (half of
//! them with several destinations, all with one), and no slot for batches of a publish that went
//! on; a queue silent throughout is found down by a call going on.

mod common;

use std::time::{Duration, Instant};

use common::slow::{accepted, fast_and_slow, goes_on, slow_alone, slow_events, until_answered};
use common::{builder, event};
use outbox_core::{FailureKind, PublishOutcome, Publisher};
use outbox_sqs_fixture::SqsFixture;
use outbox_tests::eventually;
use serde_json::json;

/// With several destinations, one destination's calls hold at most half of the in-flight slots:
/// once its calls going on hold its share, its new events are put back without a call, and the
/// healthy destination's are sent.
#[tokio::test]
async fn a_slow_destinations_calls_going_on_hold_at_most_its_share_of_the_slots() {
    // Two slots: one for each destination.
    let (fx, publisher) = fast_and_slow(Duration::from_millis(2_500), "slow", 2).await;
    let a = event("slow.created", "order", "a", 1, json!("slow-a"));
    let outcomes = publisher.publish(std::slice::from_ref(&a)).await.unwrap();
    assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    let b = event("slow.created", "order", "b", 2, json!("slow-b"));
    let fast = event("order.created", "order", "f", 3, json!("fast"));
    let started = Instant::now();
    let outcomes = publisher.publish(&[b.clone(), fast.clone()]).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(1_000),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(&outcomes[0], PublishOutcome::Unavailable(f)
            if f.kind() == FailureKind::InProgress && f.message().contains("OUTBOX_SQS_MAX_IN_FLIGHT")),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[1], PublishOutcome::Published);
    assert_eq!(accepted(&fx, &fast), 1);
    // Once the call ended, `a`'s answer is taken and `b` is called (and goes on in turn).
    let (outcomes, _) = until_answered(&publisher, std::slice::from_ref(&a)).await;
    assert_eq!(outcomes, vec![PublishOutcome::Published]);
    let outcomes = publisher.publish(std::slice::from_ref(&b)).await.unwrap();
    assert!(goes_on(&outcomes[0]), "{outcomes:?}");
    assert!(eventually(Duration::from_secs(10), async || accepted(&fx, &b) == 1).await);
    assert_eq!(accepted(&fx, &a), 1);
}

/// A slow destination with many batches at once takes no more than its share of the slots: the
/// healthy destination's call goes out at once (before, the slow one's batches took every slot,
/// and the healthy one's events waited the call wait, then were put back, until they answered).
#[tokio::test]
async fn a_slow_destination_leaves_the_others_their_share_of_the_slots() {
    // Four slots, two per destination; five batches to the slow queue.
    let (fx, publisher) = fast_and_slow(Duration::from_millis(3_000), "slow", 4).await;
    let slow = slow_events(50);
    let fast = event("order.created", "order", "f", 100, json!("fast"));
    let (slow_outcomes, (fast_outcomes, fast_took)) =
        tokio::join!(async { publisher.publish(&slow).await.unwrap() }, async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let started = Instant::now();
            let outcomes = publisher
                .publish(std::slice::from_ref(&fast))
                .await
                .unwrap();
            (outcomes, started.elapsed())
        });
    assert!(slow_outcomes.iter().all(goes_on), "{slow_outcomes:?}");
    assert_eq!(fast_outcomes, vec![PublishOutcome::Published]);
    assert!(
        fast_took < Duration::from_millis(800),
        "the healthy call waited {fast_took:?}"
    );
    assert_eq!(accepted(&fx, &fast), 1);
}

/// Once its publish goes on, a chain ends with the call it is in: the batches still waiting for
/// an in-flight slot are not sent later (they held the slow destination's slots for as long as
/// it took to answer them all); their events are sent at their next claim.
#[tokio::test]
async fn chains_waiting_for_a_slot_when_their_publish_goes_on_start_no_call() {
    // Two slots for the slow queue: five batches of ten, two in a call, three waiting.
    let (fx, publisher) = fast_and_slow(Duration::from_millis(2_000), "slow", 4).await;
    let events = slow_events(50);
    let started = Instant::now();
    let outcomes = publisher.publish(&events).await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(1_900));
    assert!(outcomes.iter().all(goes_on), "{outcomes:?}");
    // Those waiting for a slot ended at once, unsent; not as calls going on.
    let unsent = outcomes
        .iter()
        .filter(|o| matches!(o, PublishOutcome::Unavailable(f) if f.message().contains("its publish went on")))
        .count();
    assert_eq!(unsent, 30, "{outcomes:?}");
    let slow_accepted = || {
        fx.messages()
            .iter()
            .filter(|m| m.queue_name == "slow")
            .count()
    };
    assert!(eventually(Duration::from_secs(10), async || slow_accepted() == 20).await);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(slow_accepted(), 20, "only the calls under way went on");
    // The next claim: the twenty taken, the thirty sent now.
    let outcomes = publisher.publish(&events).await.unwrap();
    let published = outcomes
        .iter()
        .filter(|o| **o == PublishOutcome::Published)
        .count();
    assert_eq!(published, 20, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .filter(|o| **o != PublishOutcome::Published)
            .all(goes_on)
    );
}

/// A queue that does not answer at all, with the default wait: its events come back in progress
/// while their call runs, then, once that call found the queue down, put back as down without a
/// call; never counted, while the healthy queue's events go on throughout.
#[tokio::test]
async fn a_silent_queue_found_down_by_a_call_going_on_puts_its_events_back_uncounted() {
    let (fx, publisher) = fast_and_slow(Duration::ZERO, "slow", 8).await;
    publisher.check().await.unwrap();
    fx.silence_queue("slow");
    let started = Instant::now();
    let mut seen = Vec::new();
    let mut down = false;
    let mut seq = 0;
    while !down && started.elapsed() < Duration::from_secs(15) {
        seq += 2;
        let slow = event(
            "slow.created",
            "order",
            "s",
            seq,
            json!(format!("slow-{seq}")),
        );
        let fast = event(
            "order.created",
            "order",
            "f",
            seq + 1,
            json!(format!("fast-{seq}")),
        );
        let call = Instant::now();
        let outcomes = publisher.publish(&[slow, fast]).await.unwrap();
        assert!(
            call.elapsed() < Duration::from_millis(2_500),
            "{:?}",
            call.elapsed()
        );
        assert_eq!(outcomes[1], PublishOutcome::Published, "{outcomes:?}");
        match &outcomes[0] {
            PublishOutcome::Unavailable(f) => {
                down = f.message().contains("does not answer");
                seen.push(f.kind());
            }
            other => panic!("counted or dead-lettered: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(down, "never found down: {seen:?}");
    assert!(seen.contains(&FailureKind::InProgress), "{seen:?}");
}

/// With a single destination, calls going on may hold every in-flight slot: there is no other
/// destination to keep slots for.
#[tokio::test]
async fn a_single_destinations_calls_going_on_may_hold_every_slot() {
    let (fx, publisher) = slow_alone(Duration::from_millis(3_000), |b| b.max_in_flight(2)).await;
    let [one, two, three] = [1, 2, 3].map(|n| {
        event(
            "slow.created",
            "order",
            &format!("a{n}"),
            n,
            json!(format!("slow-{n}")),
        )
    });
    for e in [&one, &two] {
        let outcomes = publisher.publish(std::slice::from_ref(e)).await.unwrap();
        assert!(goes_on(&outcomes[0]), "a call of its own: {outcomes:?}");
    }
    let outcomes = publisher
        .publish(std::slice::from_ref(&three))
        .await
        .unwrap();
    assert!(
        matches!(&outcomes[0], PublishOutcome::Unavailable(f)
            if f.message().contains("all of it with one")),
        "{outcomes:?}"
    );
    assert!(eventually(Duration::from_secs(10), async || fx.messages().len() == 2).await);
    assert_eq!(accepted(&fx, &three), 0);
}

/// The calls going on to a slow destination share one probe: each call's watch asked it with a
/// probe of its own, as slow as the calls (black-box run: 290 probes for 175 calls to a topic
/// answering in 7 s).
#[tokio::test]
async fn the_calls_going_on_to_a_slow_destination_share_one_probe() {
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("slow");
    let publisher = builder(&fx)
        .await
        .default_queue(url)
        .max_in_flight(8)
        .build()
        .await
        .unwrap();
    fx.slow_queue("slow", Duration::from_millis(3_000));
    fx.reset_counters();
    // Eight batches of ten, each call watched, looked at after a second, and answered in 3 s.
    let events = slow_events(80);
    let outcomes = publisher.publish(&events).await.unwrap();
    assert!(outcomes.iter().all(goes_on), "{outcomes:?}");
    assert!(
        eventually(Duration::from_secs(10), async || fx.messages().len() == 80).await,
        "{} accepted",
        fx.messages().len()
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(fx.calls_to("SendMessageBatch"), 8);
    let probes = fx.calls_to("GetQueueAttributes");
    assert!(
        (1..=2).contains(&probes),
        "{probes} probes for 8 calls answered in 3 s"
    );
    let (outcomes, _) = until_answered(&publisher, &events).await;
    assert!(outcomes.iter().all(|o| *o == PublishOutcome::Published));
}
