//! A destination answering slowly costs the database no more than it must: an event whose call
//! goes on is put back until the call is likely answered, and a publisher whose calls hold every
//! in-flight slot is handed no batch it could only put back.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::builder;
use common::slow::until_answered;
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

/// The fixture with a queue `slow` answering every call `latency` late, and a publisher sending
/// everything there with `max_in_flight` calls at once.
async fn slow_only(latency: Duration, max_in_flight: usize) -> (SqsFixture, SqsPublisher) {
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("slow");
    fx.slow_queue("slow", latency);
    let publisher = builder(&fx)
        .await
        .default_queue(url)
        .max_in_flight(max_in_flight)
        .build()
        .await
        .unwrap();
    (fx, publisher)
}

/// Once the destination has answered a call in 2.5 s, an event whose call goes on after the
/// publish's 1 s wait is put back for about the 1.5 s left, and claimed again while its call
/// runs, for half the answer time. Before, both were put back for a second whatever the
/// destination: claimed again and again until the call ended, and sent again by another relay
/// after a second (black-box run: 23 put-backs per event published; 112 duplicates of 1 062
/// with two relays).
#[tokio::test]
async fn an_event_whose_call_goes_on_is_put_back_until_its_call_is_likely_answered() {
    let (_fx, publisher) = slow_only(Duration::from_millis(2_500), 8).await;
    let first = common::event("order.created", "order", "a", 1, json!("first"));
    let outcomes = publisher
        .publish(std::slice::from_ref(&first))
        .await
        .unwrap();
    assert_eq!(
        in_progress_for(&outcomes[0]),
        Some(Duration::from_secs(1)),
        "no answer seen yet: a second; {outcomes:?}"
    );
    let (outcomes, _) = until_answered(&publisher, std::slice::from_ref(&first)).await;
    assert_eq!(outcomes, vec![PublishOutcome::Published]);

    let second = common::event("order.created", "order", "b", 2, json!("second"));
    let outcomes = publisher
        .publish(std::slice::from_ref(&second))
        .await
        .unwrap();
    let put_back = in_progress_for(&outcomes[0]).expect("its call goes on");
    assert!(
        put_back >= Duration::from_millis(1_300) && put_back <= Duration::from_millis(2_500),
        "put back until the call is likely answered (about 1.5 s): {put_back:?}"
    );
    let outcomes = publisher
        .publish(std::slice::from_ref(&second))
        .await
        .unwrap();
    let put_back = in_progress_for(&outcomes[0]).expect("its call still runs");
    assert!(
        put_back >= Duration::from_millis(1_200),
        "claimed again while its call runs: half the answer time; {put_back:?}"
    );
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
    let (fx, publisher) = slow_only(Duration::from_millis(1_500), 1).await;
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
