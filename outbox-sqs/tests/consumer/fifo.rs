//! FIFO queues: each aggregate's events applied in order, even with 4 consumers and failures.

use std::sync::Arc;
use std::time::Duration;

use outbox_tests::sqs::TestQueue;
use outbox_tests::{TestDb, eventually};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_consumers_keep_each_aggregates_order_on_a_fifo_queue() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::fifo().await;
    let relay = start_relay(&db, &queue).await;
    const ACCOUNTS: usize = 8;
    const PER_ACCOUNT: i64 = 12;
    let ids = emit_credits(&db, ACCOUNTS, PER_ACCOUNT).await;

    let recorder = Arc::new(Recorder {
        // Some events fail once: the group's later messages must wait for them.
        fail_first: Some(|e| e.n() % 4 == 2),
        // Handlers take different times: a group handled concurrently would come out of order.
        jitter: true,
        ..Recorder::default()
    });
    let seen = Seen::default();
    let mut running = Vec::new();
    for _ in 0..4 {
        let c = consumer(&db, &queue, "ledger")
            .await
            .concurrency(4)
            .skip_delete_every(9)
            .observe(seen.observer())
            .build()
            .await
            .expect("consumer");
        running.push(Running::start(c, recorder.clone()));
    }
    let done = eventually(Duration::from_secs(90), async || {
        effect_counts(&db).await.1 == ids.len() as i64
    })
    .await;
    let mut handled = 0;
    let mut failed = 0;
    for r in running {
        let c = r.stop().await;
        handled += c.metrics().handled();
        failed += c.metrics().failures("handler");
    }
    relay.stop().await;
    assert!(done, "every event applied: {:?}", effect_counts(&db).await);
    assert_eq!(
        effect_counts(&db).await,
        (ids.len() as i64, ids.len() as i64)
    );
    assert_eq!(handled, ids.len() as u64);
    assert_eq!(
        failed,
        (ACCOUNTS * 3) as u64,
        "n = 2, 6, 10 fail once per account"
    );
    let expected: Vec<i64> = (1..=PER_ACCOUNT).collect();
    let order = applied_order(&db).await;
    assert_eq!(order.len(), ACCOUNTS);
    for (account, ns) in order {
        assert_eq!(ns, expected, "{account}'s events applied in order");
    }
    // fauxqs hands out one message per group at a time, so here order is kept across receives
    // and consumers; sequencing several messages of one group within a batch (as AWS SQS returns
    // them) is covered by the unit tests of `receive::in_sequence` and `split_into_units`.
}
