//! The fan-out example against real services: a throwaway database, and an SNS FIFO topic with two
//! FIFO queues on the local AWS emulator (fauxqs serves SQS and SNS on one port; start it with
//! `bash scripts/services.sh`).

use std::time::Duration;

use orders_example::fanout::{self, FanOutConfig, Topology};
use outbox_tests::TestDb;
use outbox_tests::sqs::{endpoint, sdk_config};

/// Every committed event reaches both consumers through the topic, and each applies it once and
/// in order: the read model matches the orders, and every shipped order has one shipment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_delivers_every_event_to_both_consumers_once_each() {
    let db = TestDb::new().await;
    // SQS and SNS on the emulator's one port.
    let aws = sdk_config()
        .await
        .to_builder()
        .endpoint_url(endpoint())
        .build();
    let prefix = format!(
        "fanout-test-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let topology = Topology::create(&aws, &prefix).await.unwrap_or_else(|e| {
        panic!(
            "cannot create the topic and queues on {}: {e}\nStart the local AWS emulator with \
             `bash scripts/services.sh`.",
            endpoint()
        )
    });
    let mut config = FanOutConfig::new(db.config().clone(), aws.clone(), topology.clone());
    config.orders = 40;
    config.timeout = Duration::from_secs(60);

    let report = fanout::run(config).await;
    topology.delete(&aws).await;
    let report = report.expect("the fan-out runs");

    assert!(
        report.problems().is_empty(),
        "{report}\n{:?}",
        report.problems()
    );
    assert_eq!(report.orders_placed, 40);
    assert!(report.events_written > 80, "{report}");
    assert_eq!(report.events_published, report.events_written as i64);
    for consumer in [&report.summaries, &report.shipping] {
        assert_eq!(consumer.unapplied, 0, "{report}");
        assert!(consumer.received >= report.events_written, "{report}");
    }
    assert_eq!(report.stale_summaries, 0);
    assert_eq!(report.out_of_order, 0);
    // Every other order is shipped: 20 shipments, one each.
    assert_eq!(report.shipped_orders, 20);
    assert_eq!(report.shipments, 20);
}
