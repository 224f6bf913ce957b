//! A destination answering slower than a service is given before it counts as silent (5 s), but
//! within the call time-out, is slow, not down: its calls run to their answer.

mod common;

use std::time::{Duration, Instant};

use common::event;
use common::slow::{accepted, fast_and_slow, goes_on, slow_alone, until_answered};
use outbox_core::{PublishOutcome, Publisher};
use serde_json::json;

/// A destination that answers every call slower than a service is given before it counts as
/// silent (5 s), but within the call time-out, is slow, not down, once it has answered so: its
/// calls run to their answer (a queue or topic answering every request in 6-7 s was taken for
/// down 5 s into each call, the call given up and its events sent again — 119 messages for 99
/// events — and back up at the next probe: black-box run).
#[tokio::test]
async fn a_destination_answering_every_call_in_6_s_is_slow_not_down() {
    let (fx, publisher) = fast_and_slow(Duration::from_millis(4_500), "slow", 8).await;
    // Heard answering in 4.5 s.
    let first = event("slow.created", "order", "s0", 1, json!("slow-0"));
    let (outcomes, _) = until_answered(&publisher, std::slice::from_ref(&first)).await;
    assert_eq!(outcomes, vec![PublishOutcome::Published]);
    // Then in 6 s, every call and probe.
    fx.slow_queue("slow", Duration::from_millis(6_000));
    for n in 1..=2 {
        let e = event(
            "slow.created",
            "order",
            &format!("s{n}"),
            n + 1,
            json!(format!("slow-{n}")),
        );
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let outcomes = publisher.publish(std::slice::from_ref(&e)).await.unwrap();
            match &outcomes[0] {
                PublishOutcome::Published => break,
                o if goes_on(o) => {}
                other => panic!("event {n}: {other:?}"),
            }
            assert!(Instant::now() < until, "event {n} not answered in 20 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(accepted(&fx, &e), 1, "event {n} sent once");
    }
}

/// A destination answering every request in 6 s from the start is slow, not down, at its very
/// first call: the start-up check's answer gives its pace (without it, the first call, with no
/// answer heard yet, was given up as silent after 5 s and its events sent again).
#[tokio::test]
async fn a_destination_answering_in_6_s_from_the_start_is_slow_not_down_at_its_first_call() {
    let (fx, publisher) = slow_alone(Duration::from_millis(6_000), |b| {
        b.call_wait(Duration::from_secs(3600))
    })
    .await;
    publisher.check().await.unwrap();
    let e = event("order.created", "order", "a", 1, json!("first"));
    let outcomes = publisher.publish(std::slice::from_ref(&e)).await.unwrap();
    assert_eq!(outcomes, vec![PublishOutcome::Published]);
    assert_eq!(accepted(&fx, &e), 1, "sent once");
}

/// A queue that answered at once and then answers in 7 s — carrying out each call at once, its
/// answer late — has its calls run to their answer: each event is sent once. The destination
/// counts as silent 5 s after its last fast answer, and is down then; the call it found so was
/// given up, its events sent again once a probe was answered, and the queue had carried out both
/// calls (black-box run: 15 duplicates).
#[tokio::test]
async fn a_call_running_when_its_fast_queue_turns_slow_is_not_sent_again() {
    let (fx, publisher) = slow_alone(Duration::ZERO, |b| b).await;
    let first = event("order.created", "order", "a", 1, json!("fast"));
    let outcomes = publisher
        .publish(std::slice::from_ref(&first))
        .await
        .unwrap();
    assert_eq!(outcomes, vec![PublishOutcome::Published]);
    fx.late_answers("slow", Duration::from_secs(7));
    let e = event("order.created", "order", "b", 2, json!("late"));
    let until = Instant::now() + Duration::from_secs(40);
    loop {
        // (An `Err`: the queue is down, an outage of the publish as a whole; the relay backs off.)
        let outcomes = publisher.publish(std::slice::from_ref(&e)).await;
        if matches!(&outcomes, Ok(o) if *o == vec![PublishOutcome::Published]) {
            break;
        }
        assert!(
            Instant::now() < until,
            "not published in 40 s: {outcomes:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(accepted(&fx, &e), 1, "sent once");
}
