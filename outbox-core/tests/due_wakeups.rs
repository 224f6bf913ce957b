//! An idle relay claims the events it put back when they are due, not at its next poll.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outbox_core::{
    DeadLetterFilter, FailureKind, PublishFailure, PublishOutcome, Relay, emit, purge_dead_letters,
    retry_dead_letters,
};
use outbox_tests::{FlakyPublisher, RunningRelay, TestDb, TestEvent, eventually};

/// A relay over `publisher` that listens and polls every 10 minutes: an event claimed again
/// within the test's time came by a wake-up, not the poll.
fn idle_relay(db: &TestDb, publisher: &Arc<FlakyPublisher>) -> RunningRelay {
    let relay = Relay::builder(db.pool().clone(), Arc::clone(publisher))
        .listen(db.config().clone())
        .poll_interval(Duration::from_secs(600))
        .build()
        .unwrap();
    RunningRelay::start(&relay)
}

/// Each event fails its first publish: put back for a few seconds (its destination unavailable)
/// or backing off after a retryable failure (1 s at the first attempt). The relay polls every
/// 10 minutes and nothing else is written, so only a wake-up of its own brings the claim. Black-box
/// run: with `--poll-interval 60s`, an event put back "retry in 5 s" went out 55 s later, at the
/// poll; `dead-letters retry` and a hand-written `retry_after` waited for it too.
#[tokio::test]
async fn events_put_back_are_claimed_when_due_not_at_the_next_poll() {
    let db = TestDb::new().await;
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let first_time = Arc::clone(&seen);
    let publisher = Arc::new(FlakyPublisher::new(move |e| {
        if !first_time.lock().unwrap().insert(e.id) {
            return None;
        }
        Some(if e.aggregate_id == "unavailable" {
            PublishOutcome::Unavailable(PublishFailure::new(
                FailureKind::Destination,
                "the queue does not exist",
            ))
        } else {
            PublishOutcome::Retry(PublishFailure::new(FailureKind::Throttled, "slow down"))
        })
    }));
    let running = idle_relay(&db, &publisher);
    let client = db.pool().get().await.unwrap();
    let started = Instant::now();
    emit(&client, &TestEvent::new("unavailable", 1))
        .await
        .unwrap();
    emit(&client, &TestEvent::new("retried", 1)).await.unwrap();
    let published = eventually(Duration::from_secs(30), async || {
        publisher.published().len() == 2
    })
    .await;
    assert!(
        published,
        "both events are published once due (about 5 s), not at the 10-minute poll; published: {:?}",
        publisher.published()
    );
    assert_eq!(seen.lock().unwrap().len(), 2, "each failed once first");
    eprintln!("both published {:?} after their commit", started.elapsed());
    running.stop().await;
}

/// A dead letter retried, or purged so that the events it held back go, is claimed at once by an
/// idle relay: the retry and the purge notify (an update or a delete fires no insert trigger).
/// Black-box run: `outbox dead-letters retry --all` was published at the next 60 s poll.
#[tokio::test]
async fn a_retried_or_purged_dead_letter_wakes_an_idle_relay() {
    let db = TestDb::new().await;
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let first_time = Arc::clone(&seen);
    // The first event of each aggregate is refused the first time it is published.
    let publisher = Arc::new(FlakyPublisher::new(move |e| {
        let n = e
            .payload_json::<serde_json::Value>()
            .ok()
            .map(|v| v["n"].clone());
        (n == Some(serde_json::json!(1)) && first_time.lock().unwrap().insert(e.id)).then(|| {
            PublishOutcome::Permanent(PublishFailure::new(FailureKind::InvalidContent, "refused"))
        })
    }));
    let running = idle_relay(&db, &publisher);
    let client = db.pool().get().await.unwrap();
    for aggregate in ["retried", "purged"] {
        emit(&client, &TestEvent::new(aggregate, 1)).await.unwrap();
        emit(&client, &TestEvent::new(aggregate, 2)).await.unwrap();
    }
    let dead = eventually(Duration::from_secs(10), async || {
        seen.lock().unwrap().len() == 2
    })
    .await;
    assert!(dead, "the first events are dead-lettered");
    // Their followers are held back behind them; the relay goes idle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(publisher.published().is_empty());

    let filter = |aggregate: &str| DeadLetterFilter {
        aggregate_id: Some(aggregate.into()),
        ..DeadLetterFilter::default()
    };
    // Within 10 s: long before the 10-minute poll.
    let published = async |n: usize| {
        eventually(Duration::from_secs(10), async || {
            publisher.published().len() == n
        })
        .await
    };
    assert_eq!(
        retry_dead_letters(&client, &filter("retried"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        published(2).await,
        "the retried event and its follower go at once, not at the 10-minute poll"
    );
    assert_eq!(
        purge_dead_letters(&client, &filter("purged"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        published(3).await,
        "the purged event's follower goes at once"
    );
    running.stop().await;
}
