//! The NOTIFY trigger's condition (migration V11): while no relay waits, a writer's inserting
//! statement runs no trigger function. Apart from `wakeups.rs`, whose timing-sensitive tests it
//! would slow down by converting a table while they run.

use outbox_core::emit;
use outbox_tests::{TestDb, TestEvent, set_waiting};

/// Calls of the NOTIFY trigger's function counted by `client`'s session and not yet flushed to the
/// statistics (needs `track_functions`, which the caller sets). Nothing is flushed inside a
/// transaction: compare two readings of one transaction.
async fn notify_function_calls(client: &tokio_postgres::Transaction<'_>) -> i64 {
    client
        .query_one(
            "SELECT coalesce(pg_stat_get_xact_function_calls('outbox_events_notify'::regproc), 0)",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// While no relay waits, an inserting statement costs the writer the waiting lock's shared try and
/// nothing else: the trigger's condition fails and no trigger function runs (V11; before, the
/// function ran per statement to try the lock, 3–4 % of throughput at 8 writers). On the plain
/// table and after the conversion to the partitioned layout, which makes the trigger anew.
#[tokio::test]
async fn no_trigger_function_runs_while_no_relay_waits() {
    let db = TestDb::plain().await;
    let mut client = db.connect().await;
    for layout in ["plain", "partitioned"] {
        if layout == "partitioned" {
            outbox_core::partition::migrate_partitioned(
                &mut client,
                outbox_core::partition::Granularity::Daily,
                None,
            )
            .await
            .unwrap();
        }
        client
            .batch_execute("SET track_functions = 'pl'")
            .await
            .unwrap();
        let tx = client.transaction().await.unwrap();
        let before = notify_function_calls(&tx).await;
        for n in 0..5 {
            emit(&tx, &TestEvent::new("a", n)).await.unwrap();
        }
        let calls = notify_function_calls(&tx).await - before;
        assert_eq!(calls, 0, "{layout}: no relay waits");
        tx.commit().await.unwrap();

        // A relay waits: the condition holds and the function runs, once per statement.
        let waiting = db.connect().await;
        set_waiting(&waiting, true).await;
        let tx = client.transaction().await.unwrap();
        let before = notify_function_calls(&tx).await;
        emit(&tx, &TestEvent::new("b", 1)).await.unwrap();
        emit(&tx, &TestEvent::new("b", 2)).await.unwrap();
        let calls = notify_function_calls(&tx).await - before;
        assert_eq!(calls, 2, "{layout}: a relay waits");
        tx.commit().await.unwrap();
        set_waiting(&waiting, false).await;
    }
}
