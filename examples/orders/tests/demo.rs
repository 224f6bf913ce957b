//! The orders example against real services: a throwaway database (the outbox's schema applied by
//! `outbox_tests::TestDb`, the example's on top) and a throwaway FIFO queue on the local SQS server.
//! Start them with `bash scripts/services.sh`.

use std::time::Duration;

use orders_example::consumer::find_summary;
use orders_example::demo::{self, DemoConfig};
use orders_example::service::{self, NewLine, NewOrder, Refused};
use outbox_tests::TestDb;
use outbox_tests::sqs::TestQueue;
use uuid::Uuid;

fn line(sku: &str, quantity: i32, unit_price_cents: i64) -> NewLine {
    NewLine {
        sku: sku.into(),
        quantity,
        unit_price_cents,
    }
}

async fn pending_events(db: &TestDb) -> i64 {
    outbox_core::stats(&db.connect().await)
        .await
        .expect("stats")
        .pending
}

/// The demo's whole flow with 50 orders: nothing lost, order kept, the rolled-back order absent,
/// the redelivered messages recognised by the inbox and applied once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_with_50_orders_delivers_every_event_once_and_in_order() {
    let db = TestDb::new().await;
    let queue = TestQueue::fifo().await;
    let mut config = DemoConfig::new(db.config().clone(), queue.client().clone(), queue.url());
    config.orders = 50;
    config.redeliver_every = 10;
    config.timeout = Duration::from_secs(60);

    let report = demo::run(config).await.expect("the demo runs");

    assert!(report.ok(), "{report}\nproblems: {:?}", report.problems());
    assert_eq!(report.orders_placed, 50);
    assert!(
        report.events_written > 2 * report.orders_placed,
        "several events per order: {report}"
    );
    // Nothing lost: every committed event was published and received.
    assert_eq!(report.events_published, report.events_written as i64);
    assert_eq!(report.events_received, report.events_written);
    assert_eq!(report.lost, 0);
    assert_eq!(report.stats.pending, 0);
    assert_eq!(report.stats.dead_letters, 0);
    // Per-aggregate order kept.
    assert_eq!(report.order_violations, 0);
    // The rolled-back order: refused, no row, no event.
    assert!(report.rolled_back_refused);
    assert!(!report.rolled_back_row_exists);
    assert!(!report.rolled_back_event_received);
    // Duplicates: every message left in the queue came back and was skipped by the inbox; each
    // event was applied exactly once (the read model matches the orders).
    assert!(report.redeliveries_injected > 0, "{report}");
    assert!(
        report.duplicates >= report.redeliveries_injected,
        "{report}"
    );
    assert_eq!(
        report.messages_received,
        report.events_written + report.duplicates
    );
    assert_eq!(report.stale_summaries, 0);
    assert_eq!(report.foreign_messages, 0);
    assert!(report.latency_p50 > Duration::ZERO && report.latency_p50 <= report.latency_p99);
}

/// A transaction that emitted an event and then failed leaves neither the order nor the event;
/// the committed changes each leave one event.
#[tokio::test]
async fn service_writes_rows_and_events_together_or_not_at_all() {
    let db = TestDb::new().await;
    let applied = orders_example::migrate(&mut db.connect().await)
        .await
        .expect("the example's migrations apply");
    assert_eq!(applied, ["V1__orders", "V2__shipments"]);
    assert!(
        orders_example::migrate(&mut db.connect().await)
            .await
            .unwrap()
            .is_empty(),
        "a second run applies nothing"
    );
    let pool = db.pool();

    // OrderPlaced is emitted before the second line is refused by the database: all rolled back.
    let bad = NewOrder {
        id: Uuid::new_v4(),
        customer: "c".into(),
        lines: vec![line("A", 1, 100), line("B", 0, 100)],
    };
    let err = service::place_order(pool, &service::sqs_emitter(), &bad)
        .await
        .unwrap_err();
    let constraint = err
        .downcast_ref::<tokio_postgres::Error>()
        .and_then(|e| e.as_db_error())
        .and_then(|e| e.constraint());
    assert_eq!(constraint, Some("order_lines_quantity_check"), "{err:?}");
    assert!(service::find_order(pool, bad.id).await.unwrap().is_none());
    assert_eq!(pending_events(&db).await, 0);

    // Through an emitter for an SNS topic (the fan-out's), an order whose event is larger than
    // SNS takes is refused in its transaction: nothing written, nothing for the relay to
    // dead-letter.
    let large = NewOrder {
        id: Uuid::new_v4(),
        customer: "c".repeat(300 * 1024),
        lines: vec![line("A", 1, 100)],
    };
    let sns = outbox_core::Emitter::with_limits(outbox_sqs::SNS_LIMITS);
    let err = service::place_order(pool, &sns, &large).await.unwrap_err();
    let kind = err.downcast_ref::<outbox_core::Error>().map(|e| e.kind());
    assert_eq!(kind, Some(outbox_core::ErrorKind::TooLarge), "{err:?}");
    assert!(service::find_order(pool, large.id).await.unwrap().is_none());
    assert_eq!(pending_events(&db).await, 0);

    let order = NewOrder {
        id: Uuid::new_v4(),
        customer: "c".into(),
        lines: vec![line("A", 2, 150), line("B", 1, 1000)],
    };
    service::place_order(pool, &service::sqs_emitter(), &order)
        .await
        .unwrap();
    service::add_line(pool, &service::sqs_emitter(), order.id, &line("C", 3, 10))
        .await
        .unwrap();
    service::remove_line(pool, &service::sqs_emitter(), order.id, 1)
        .await
        .unwrap();
    service::ship_order(pool, &service::sqs_emitter(), order.id, "DHL")
        .await
        .unwrap();
    let row = service::find_order(pool, order.id).await.unwrap().unwrap();
    assert_eq!(
        (row.status.as_str(), row.total_cents, row.version),
        ("shipped", 1030, 4)
    );
    assert!(row.shipped_at.is_some());
    assert_eq!(pending_events(&db).await, 4);

    // A shipped order refuses changes, and no event is written.
    let refused = service::add_line(pool, &service::sqs_emitter(), order.id, &line("D", 1, 1))
        .await
        .unwrap_err();
    assert!(refused.downcast_ref::<Refused>().is_some(), "{refused}");
    let refused = service::ship_order(pool, &service::sqs_emitter(), order.id, "DHL")
        .await
        .unwrap_err();
    assert!(refused.downcast_ref::<Refused>().is_some(), "{refused}");
    assert_eq!(pending_events(&db).await, 4);
    // The consumer's read model is untouched until events are consumed.
    assert!(find_summary(pool, order.id).await.unwrap().is_none());
}
