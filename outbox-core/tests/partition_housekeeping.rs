//! The relay's housekeeping across a change of layout.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::Relay;
use outbox_core::partition::Granularity;
use outbox_tests::{RecordingPublisher, RunningRelay, TestDb, eventually};

/// Relays started on the plain layout, which is then converted under them (`outbox migrate
/// --partitioned`, as the README allows), maintain the partitions: here they create the two more
/// partitions ahead that the setting asks for. Before, a relay that found the plain layout without
/// a retention stopped its housekeeping for good: nobody created partitions ahead, and within
/// `ahead` periods every new row went to the tail, drained later under an exclusive lock.
#[tokio::test]
async fn relays_started_before_the_conversion_maintain_the_partitions_after_it() {
    let db = TestDb::plain().await;
    let relay = Relay::builder(db.pool().clone(), Arc::new(RecordingPublisher::new()))
        .housekeeping_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    // The relay's first round finds the plain layout.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut client = db.connect().await;
    outbox_core::partition::migrate_partitioned(&mut client, Granularity::Hourly, None)
        .await
        .expect("the conversion applies");
    let before = db.partition_names().await;
    db.execute(&format!(
        "UPDATE outbox_partitioning SET ahead = {}",
        Granularity::Hourly.default_ahead() + 2
    ))
    .await;
    let grown = eventually(Duration::from_secs(10), async || {
        db.partition_names().await.len() == before.len() + 2
    })
    .await;
    running.stop().await;
    assert!(
        grown,
        "two more partitions ahead: {before:?} → {:?}",
        db.partition_names().await
    );
}
