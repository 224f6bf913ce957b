//! A destination answering slowly costs the database no more than it must: an event whose call
//! goes on is put back until the call is likely answered, and a publisher whose calls hold every
//! in-flight slot is handed no batch it could only put back.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::builder;
use common::slow::slow_alone;
use outbox_core::{ClaimedEvent, Emitter, FailureKind, PublishOutcome, Publisher, Relay};
use outbox_sqs::SqsPublisher;
use outbox_sqs_fixture::SqsFixture;
use outbox_tests::{RunningRelay, TestDb, TestEvent, eventually};
use serde_json::json;

/// How long `outcome` puts its event back, if it is put back uncounted while its work goes on.
fn in_progress_for(outcome: &PublishOutcome) -> Option<Duration> {
    match outcome {
        PublishOutcome::Unavailable(f) if f.kind() == FailureKind::InProgress => f.put_back(),
        _ => None,
    }
}

/// An event whose call goes on after the publish's 1 s wait is put back until the call cannot be
/// running any more (the rest of its 4 s time-out), and once the call got it accepted, the
/// publisher reports it settled, once, for the relay to mark. Before, it was put back for a
/// second (later, for as long as the destination's last call took): claimed again and again until
/// its call ended, and sent again by another relay claiming it meanwhile (black-box run: 23
/// put-backs per event published; 686 duplicates of 2 000 events with two relays).
#[tokio::test]
async fn an_event_whose_call_goes_on_is_put_back_until_the_call_has_ended_and_reported_settled() {
    let (fx, publisher) = slow_alone(Duration::from_millis(2_000), |b| {
        b.call_timeout(Duration::from_secs(4))
    })
    .await;
    let first = common::event("order.created", "order", "a", 1, json!("first"));
    let outcomes = publisher
        .publish(std::slice::from_ref(&first))
        .await
        .unwrap();
    let put_back = in_progress_for(&outcomes[0]).expect("its call goes on");
    assert!(
        put_back >= Duration::from_millis(2_500) && put_back <= Duration::from_millis(3_100),
        "put back for the rest of the call's time-out (about 3 s): {put_back:?}"
    );
    assert!(publisher.settled().is_empty(), "its call still runs");
    assert!(
        eventually(Duration::from_secs(5), async || fx.messages().len() == 1).await,
        "accepted"
    );
    let settled = eventually_settled(&publisher).await;
    assert_eq!(settled, vec![first.id], "reported settled once accepted");
    assert!(publisher.settled().is_empty(), "and only once");
}

/// What `publisher` reports settled within 2 s.
async fn eventually_settled(publisher: &SqsPublisher) -> Vec<uuid::Uuid> {
    let until = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let settled = publisher.settled();
        if !settled.is_empty() || std::time::Instant::now() > until {
            return settled;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A publisher that counts the events it is handed.
#[derive(Clone)]
struct Counting {
    inner: SqsPublisher,
    handed: Arc<AtomicUsize>,
}

impl Publisher for Counting {
    type Error = outbox_sqs::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        self.handed.fetch_add(events.len(), Ordering::Relaxed);
        self.inner.publish(events).await
    }

    async fn publish_within(
        &self,
        events: &[ClaimedEvent],
        deadline: tokio::time::Instant,
    ) -> Result<Vec<PublishOutcome>, Self::Error> {
        self.handed.fetch_add(events.len(), Ordering::Relaxed);
        self.inner.publish_within(events, deadline).await
    }

    fn min_publish_timeout(&self, events: usize) -> Duration {
        self.inner.min_publish_timeout(events)
    }

    async fn settle(&self, within: Duration) -> Vec<uuid::Uuid> {
        self.inner.settle(within).await
    }

    async fn room(&self) -> Option<usize> {
        self.inner.room().await
    }

    fn settled(&self) -> Vec<uuid::Uuid> {
        self.inner.settled()
    }
}

/// Through the relay, a backlog bound for a queue answering every call in 1.5 s, one call at a
/// time: each event is handed to the publisher a few times at most (its call, and the claim that
/// takes its answer; about 3 times on average here, 6.5 before), and every one is accepted once. Before, the workers claimed the
/// backlog and put it back, uncounted, as fast as they could while the calls going on held
/// both slots (black-box run: 23 put-backs per event, 16 KB of WAL per event published).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_whose_calls_hold_every_slot_is_handed_no_batch_to_put_back() {
    const EVENTS: usize = 100;
    let db = TestDb::new().await;
    let (fx, publisher) = slow_alone(Duration::from_millis(1_500), |b| b.max_in_flight(1)).await;
    let emitter = Emitter::for_publisher(&publisher);
    let mut ids = Vec::new();
    let client = db.pool().get().await.unwrap();
    for n in 0..EVENTS {
        let event = TestEvent::new(format!("order-{n}"), 1);
        ids.push(emitter.emit(&**client, &event).await.unwrap());
    }
    let counting = Counting {
        inner: publisher,
        handed: Arc::default(),
    };
    let relay = Relay::builder(db.pool().clone(), counting.clone())
        .batch_size(50)
        .concurrency(2)
        .poll_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let all_published =
        eventually(Duration::from_secs(60), async || db.processed(&ids).await).await;
    running.stop().await;
    assert!(all_published, "{} still pending", db.pending().await);
    let handed = counting.handed.load(Ordering::Relaxed);
    assert!(
        handed <= 4 * EVENTS,
        "{handed} events handed to the publisher for {EVENTS} published"
    );
    assert_eq!(fx.messages().len(), EVENTS, "each event accepted once");
}

/// Two relays, each with its own publisher, drain one backlog bound for a queue answering every
/// call in 1.5 s: every event is accepted once. An event whose call goes on is put back until the
/// call cannot be running any more and marked as soon as it is accepted; put back for a guess of
/// the call's time, the other relay claimed it while the call ran and sent it again (black-box
/// run: 686 duplicates of 2 000 events with two relays and a queue answering in 4-7 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_draining_a_backlog_to_a_slow_queue_send_each_event_once() {
    const EVENTS: usize = 80;
    let db = TestDb::new().await;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("slow");
    fx.slow_queue("slow", Duration::from_millis(1_500));
    let publisher = || async {
        builder(&fx)
            .await
            .default_queue(url.clone())
            .max_in_flight(2)
            .build()
            .await
            .unwrap()
    };
    let emitter = Emitter::for_publisher(&publisher().await);
    let client = db.pool().get().await.unwrap();
    let mut ids = Vec::new();
    for n in 0..EVENTS {
        let event = TestEvent::new(format!("order-{n}"), 1);
        ids.push(emitter.emit(&**client, &event).await.unwrap());
    }
    let mut running = Vec::new();
    for _ in 0..2 {
        let relay = Relay::builder(db.pool().clone(), publisher().await)
            .batch_size(20)
            .concurrency(2)
            .poll_interval(Duration::from_millis(100))
            .build()
            .unwrap();
        running.push(RunningRelay::start(&relay));
    }
    let all_published =
        eventually(Duration::from_secs(60), async || db.processed(&ids).await).await;
    for relay in running {
        relay.stop().await;
    }
    assert!(all_published, "{} still pending", db.pending().await);
    let messages = fx.messages();
    let mut sent: Vec<&str> = messages.iter().map(|m| m.body.as_str()).collect();
    sent.sort_unstable();
    sent.dedup();
    assert_eq!(sent.len(), EVENTS, "every event accepted");
    assert_eq!(messages.len(), EVENTS, "each once");
}
