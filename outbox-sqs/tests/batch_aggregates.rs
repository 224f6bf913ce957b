//! `batch_aggregates`: with per-aggregate order and one FIFO queue, the relay hands a whole batch to
//! one publish and the publisher sends an aggregate's events together, in order, against the SQS
//! test fixture and a throwaway database.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::builder;
use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome, Publisher, Relay};
use outbox_sqs_fixture::SqsFixture;
use outbox_tests::{RunningRelay, TestDb, eventually};

/// Writes `events` (aggregate id, n, payload padding in bytes) in one statement, in this order.
async fn write(db: &TestDb, events: &[(&str, i64, i32)]) {
    let client = db.connect().await;
    for (aggregate, n, pad) in events {
        client
            .execute(
                "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
                 VALUES ('account', $1, 'account.changed',
                         jsonb_build_object('n', $2::bigint, 'pad', repeat('x', $3)))",
                &[aggregate, n, pad],
            )
            .await
            .unwrap();
    }
}

/// The `n`s the fixture accepted, per message group, in the order it accepted them.
fn accepted(fx: &SqsFixture) -> BTreeMap<String, Vec<i64>> {
    let mut groups: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for m in fx.messages() {
        let body: serde_json::Value = serde_json::from_str(&m.body).unwrap();
        groups
            .entry(m.group_id.unwrap_or_default())
            .or_default()
            .push(body["n"].as_i64().unwrap());
    }
    groups
}

fn relay(db: &TestDb, publisher: outbox_sqs::SqsPublisher) -> RunningRelay {
    let relay = Relay::builder(db.pool().clone(), publisher)
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    RunningRelay::start(&relay)
}

#[tokio::test]
async fn only_a_single_fifo_destination_keeps_aggregate_order() {
    let fx = SqsFixture::start().await;
    let fifo = fx.create_queue("a.fifo");
    let other_fifo = fx.create_queue("b.fifo");
    let standard = fx.create_queue("c");
    let keeps = async |on: bool, routes: &[(&str, &str)], default: &str| {
        let mut b = builder(&fx)
            .await
            .batch_aggregates(on)
            .default_queue(default);
        for (pattern, queue) in routes {
            b = b.route(*pattern, *queue);
        }
        b.build().await.unwrap().keeps_aggregate_order()
    };
    assert!(keeps(true, &[], &fifo).await);
    assert!(keeps(true, &[("account.*", &fifo)], &fifo).await);
    // Off by default and when asked.
    assert!(
        !builder(&fx)
            .await
            .default_queue(&fifo)
            .build()
            .await
            .unwrap()
            .keeps_aggregate_order()
    );
    assert!(!keeps(false, &[], &fifo).await);
    // A standard queue keeps no order; two destinations could race an aggregate's events.
    assert!(!keeps(true, &[], &standard).await);
    assert!(!keeps(true, &[("account.*", &other_fifo)], &fifo).await);
}

/// Three aggregates with 20 events each: in waves that is 20 calls one after the other; batched,
/// each aggregate's events go in two calls of 10, and every group still arrives in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregates_events_share_calls_and_keep_their_order() {
    let db = TestDb::new().await;
    let fx = SqsFixture::start().await;
    let queue = fx.create_queue("events.fifo");
    let mut events = Vec::new();
    for n in 1..=20 {
        for aggregate in ["a", "b", "c"] {
            events.push((aggregate, n, 10));
        }
    }
    write(&db, &events).await;
    let publisher = builder(&fx)
        .await
        .default_queue(&queue)
        .batch_aggregates(true)
        .build()
        .await
        .unwrap();
    let running = relay(&db, publisher);
    let drained = eventually(Duration::from_secs(20), async || db.pending().await == 0).await;
    running.stop().await;
    assert!(drained, "{} events left", db.pending().await);

    let groups = accepted(&fx);
    let in_order: Vec<i64> = (1..=20).collect();
    assert_eq!(groups.len(), 3, "{groups:?}");
    for (group, ns) in &groups {
        assert_eq!(ns, &in_order, "group {group}");
    }
    let calls = fx.calls_to("SendMessageBatch");
    assert!(
        calls <= 8,
        "{calls} SendMessageBatch calls for 60 events of 3 aggregates"
    );
}

/// An event the publisher refuses before sending (too large for the queue) is dead-lettered, and
/// its aggregate's later events in the same publish are not sent — neither then nor later, as a
/// dead letter blocks its aggregate — while the other aggregate's all go through, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_event_holds_back_the_rest_of_its_aggregate_only() {
    let db = TestDb::new().await;
    let fx = SqsFixture::start().await;
    let queue = fx.create_queue("events.fifo");
    let mut events = Vec::new();
    for n in 1..=6 {
        // a3 is over SQS's 1 MiB.
        let pad = if n == 3 { 1_100_000 } else { 10 };
        events.push(("a", n, pad));
        events.push(("b", n, 10));
    }
    write(&db, &events).await;
    let publisher = builder(&fx)
        .await
        .default_queue(&queue)
        .batch_aggregates(true)
        .build()
        .await
        .unwrap();
    let running = relay(&db, publisher);
    let settled = eventually(Duration::from_secs(20), async || {
        accepted(&fx).values().map(Vec::len).sum::<usize>() >= 8 && db.pending().await == 3
    })
    .await;
    // Time for a wrong send of a4..a6 to show.
    tokio::time::sleep(Duration::from_millis(500)).await;
    running.stop().await;
    assert!(
        settled,
        "pending {}, accepted {:?}",
        db.pending().await,
        accepted(&fx)
    );

    let groups: Vec<Vec<i64>> = accepted(&fx).into_values().collect();
    assert_eq!(groups, [vec![1, 2], vec![1, 2, 3, 4, 5, 6]]);
    let client = db.connect().await;
    let rows = client
        .query(
            "SELECT (payload->>'n')::bigint, attempts, dead_lettered_at IS NOT NULL
               FROM outbox_events WHERE aggregate_id = 'a' AND processed_at IS NULL ORDER BY seq",
            &[],
        )
        .await
        .unwrap();
    let left: Vec<(i64, i32, bool)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    // a3 dead (one attempt), a4..a6 waiting behind it, never tried.
    assert_eq!(
        left,
        [(3, 1, true), (4, 0, false), (5, 0, false), (6, 0, false)]
    );
}

/// An event with no route fails before anything is sent: its aggregate's later events in the same
/// publish are held back as well (not sent ahead of it), while another aggregate's go through.
#[tokio::test]
async fn an_event_without_a_route_holds_back_the_rest_of_its_aggregate() {
    let fx = SqsFixture::start().await;
    let queue = fx.create_queue("events.fifo");
    let publisher = builder(&fx)
        .await
        .route("account.changed", &queue)
        .batch_aggregates(true)
        .build()
        .await
        .unwrap();
    assert!(publisher.keeps_aggregate_order());
    let event = |seq: i64, aggregate: &str, event_type: &str| {
        ClaimedEvent::for_test(
            uuid::Uuid::new_v4(),
            seq,
            "account",
            aggregate,
            event_type,
            format!(r#"{{"n": {seq}}}"#),
            "{}",
            0,
        )
    };
    let events = [
        event(1, "a", "account.archived"),
        event(2, "a", "account.changed"),
        event(3, "b", "account.changed"),
    ];
    let outcomes = publisher.publish(&events).await.unwrap();
    assert!(
        matches!(&outcomes[0], PublishOutcome::Permanent(r) if r.kind() == FailureKind::NoRoute),
        "{:?}",
        outcomes[0]
    );
    assert_ne!(
        outcomes[1],
        PublishOutcome::Published,
        "sent ahead of the failed event of its aggregate"
    );
    assert_eq!(outcomes[2], PublishOutcome::Published);
    let groups = accepted(&fx);
    assert_eq!(groups.into_values().collect::<Vec<_>>(), [vec![3]]);
}
