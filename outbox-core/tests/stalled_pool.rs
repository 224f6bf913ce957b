//! A pool connection that stalls (a middlebox holding its bytes, the sockets open): the batch gives
//! up at its bound, and the pool's other idle connections, opened the same way, are closed rather
//! than stalling the next batches one by one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_core::Relay;
use outbox_tests::{
    BlackHoleProxy, RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually,
};

/// Four idle pool connections black-holed together: one batch stalls (its bound: the publish
/// timeout and 5 s), the next connects anew. Before, each later batch took another stalled idle
/// connection and stalled again (black-box run: 35 s each time, with the defaults).
#[tokio::test]
async fn after_a_stall_the_pools_idle_connections_are_not_used_again() {
    let db = TestDb::new().await;
    let proxy = BlackHoleProxy::start(db.server_addr()).await;
    let pool = db.pool_via(proxy.addr(), 4);
    let held: Vec<_> = futures::future::join_all((0..4).map(|_| pool.get())).await;
    assert!(held.iter().all(Result::is_ok));
    drop(held);
    assert_eq!(pool.status().size, 4);
    // The four go silent; new connections pass.
    proxy.black_hole();
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.heal();
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(pool, Arc::clone(&publisher))
        .publish_timeout(Duration::from_secs(1))
        .poll_interval(Duration::from_millis(200))
        .concurrency(1)
        .build()
        .unwrap();
    let first = outbox_core::emit(&db.pool().get().await.unwrap(), &TestEvent::new("a", 1))
        .await
        .unwrap();
    let started = Instant::now();
    let running = RunningRelay::start(&relay);
    assert!(
        eventually(Duration::from_secs(30), async || publisher
            .ids()
            .contains(&first))
        .await
    );
    let took = started.elapsed();
    running.stop().await;
    // One stall (6 s), not one per stalled connection (a housekeeping round may take one).
    assert!(took < Duration::from_secs(11), "published after {took:?}");
}
