//! Graceful shutdown finishes the handler in flight; the heartbeat keeps a slow handler's message.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use outbox_tests::sqs::TestQueue;
use outbox_tests::{TestDb, eventually};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_the_handler_in_flight_finish_and_deletes_its_message() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    emit_credits(&db, 1, 1).await;

    let recorder = Arc::new(Recorder {
        delay: Some(Duration::from_millis(1500)),
        ..Recorder::default()
    });
    let c = consumer(&db, &queue, "ledger").await.build().await.unwrap();
    let running = Running::start(c, recorder.clone());
    tokio::time::timeout(Duration::from_secs(30), recorder.started.notified())
        .await
        .expect("the handler starts");
    let asked = Instant::now();
    let c = running.stop().await;
    let took = asked.elapsed();
    relay.stop().await;
    assert!(
        took >= Duration::from_millis(1000),
        "run returned before the handler finished ({took:?})"
    );
    assert_eq!(
        effect_counts(&db).await,
        (1, 1),
        "the handler's work committed"
    );
    assert_eq!(c.metrics().handled(), 1);
    // Its delete was flushed: the message does not come back after the visibility time-out.
    assert!(
        queue
            .receive_all(1, Duration::from_secs(4))
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_keeps_its_message_hidden() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    emit_credits(&db, 1, 1).await;

    // Visibility time-out 1 s, handler 4 s: without the heartbeat SQS would hand the message out
    // again while the handler runs.
    let recorder = Arc::new(Recorder {
        delay: Some(Duration::from_secs(4)),
        ..Recorder::default()
    });
    let c = consumer(&db, &queue, "ledger")
        .await
        .visibility_timeout(Duration::from_secs(1))
        .concurrency(4)
        .build()
        .await
        .unwrap();
    let running = Running::start(c, recorder.clone());
    assert!(
        eventually(Duration::from_secs(30), async || effect_counts(&db).await.1
            == 1)
        .await
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let c = running.stop().await;
    relay.stop().await;
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 1);
    assert_eq!(c.metrics().received(), 1, "{:?}", c.metrics());
    assert_eq!(c.metrics().duplicates(), 0);
}

/// A message that reaches the queue as the consumer stops goes to the next consumer at once. The
/// stopping consumer's long poll is still open at SQS and takes it: cut short, its answer was
/// never read and the message stayed hidden for a whole visibility time-out (a black-box run of
/// rolling restarts: a third of the stops under traffic each delayed a message by 30 s). Now the
/// poll in flight finishes, briefly, and what it got is handed back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_arriving_as_the_consumer_stops_goes_to_the_next_consumer_at_once() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let c = consumer(&db, &queue, "ledger")
        .await
        .receivers(1)
        .wait(Duration::from_secs(5))
        .visibility_timeout(Duration::from_secs(20))
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    // Its poll waits on the empty queue.
    tokio::time::sleep(Duration::from_secs(1)).await;
    running.stop.cancel();
    send_credit(&queue, "acc-1", 1).await;
    let stopped = running.stop().await;
    assert_eq!(stopped.metrics().handled(), 0);
    assert_eq!(stopped.metrics().received(), 1);
    assert_eq!(stopped.metrics().released(), 1, "handed back, and counted");

    let seen = Seen::default();
    let c = consumer(&db, &queue, "ledger")
        .await
        .observe(seen.observer())
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    let done = eventually(Duration::from_secs(8), async || {
        effect_counts(&db).await.0 == 1
    })
    .await;
    let c = running.stop().await;
    assert!(
        done,
        "the message reaches the next consumer before its visibility time-out: {:?}",
        c.metrics()
    );
    assert_eq!(
        seen.most_receive_count(),
        2,
        "received by the stopping consumer's poll, handed back"
    );
}
