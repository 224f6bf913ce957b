//! A pending event locked by someone else than a relay (an operator's `SELECT … FOR UPDATE`, a
//! retry or purge under way): its aggregate waits, from that event on; nothing else does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_core::{Relay, emit};
use outbox_tests::{RecordingPublisher, TestDb, TestEvent};

/// Black-box run: a foreign lock on a follower (not the head) of one aggregate held the whole
/// batch at the follower claim's `FOR UPDATE` until the statement timeout, rolled it back, and
/// did so again at every claim: the other aggregates claimed with it waited as long as the lock.
#[tokio::test]
async fn a_follower_locked_elsewhere_holds_back_only_its_aggregate_from_it_on() {
    let db = TestDb::new().await;
    let mut writer = db.connect().await;
    let mut ids = Vec::new();
    for (order, n) in [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2)] {
        let tx = writer.transaction().await.unwrap();
        ids.push(emit(&tx, &TestEvent::new(order, n)).await.unwrap());
        tx.commit().await.unwrap();
    }
    let (a1, a2, a3, b1, b2) = (ids[0], ids[1], ids[2], ids[3], ids[4]);

    let mut locker = db.connect().await;
    let lock = locker.transaction().await.unwrap();
    lock.execute(
        "SELECT 1 FROM outbox_events WHERE id = $1 FOR UPDATE",
        &[&a2],
    )
    .await
    .unwrap();

    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .publish_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let started = Instant::now();
    let report = relay
        .run_once()
        .await
        .expect("the claim does not wait for the lock");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(report.published, 3, "{report:?}");
    let mut first = publisher.ids();
    first.sort();
    let mut expected = vec![a1, b1, b2];
    expected.sort();
    assert_eq!(
        first, expected,
        "a2 is locked elsewhere, and a3 waits behind it"
    );

    lock.rollback().await.unwrap();
    while relay.run_once().await.unwrap().published > 0 {}
    let all = publisher.ids();
    assert_eq!(&all[3..], &[a2, a3], "then the rest of a, in order");
    assert_eq!(db.pending().await, 0);
}
