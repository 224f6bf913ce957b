//! A batch costs the database two round trips on a warm connection: `BEGIN` travels with the
//! claim, `COMMIT` with the acknowledgement. And a batch that ends with its transaction open (its
//! future dropped mid-publish) never hands that connection, or its row locks, to the next batch.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome, Publisher, Relay, emit};
use outbox_tests::{DelayProxy, FlakyPublisher, RecordingPublisher, TestDb, TestEvent, eventually};

/// A proxy in front of `db` that makes each round trip cost 40 ms.
async fn delay_proxy(db: &TestDb) -> DelayProxy {
    DelayProxy::start(db.server_addr(), Duration::from_millis(40)).await
}

/// A pool of one connection to `db` through `proxy`.
fn pool_through(db: &TestDb, proxy: &DelayProxy) -> deadpool_postgres::Pool {
    db.pool_via(proxy.addr(), 1)
}

#[tokio::test]
async fn a_batch_takes_two_round_trips_claim_with_begin_and_acknowledgement_with_commit() {
    for ordered in [false, true] {
        let db = TestDb::new().await;
        let proxy = delay_proxy(&db).await;
        let publisher = Arc::new(RecordingPublisher::new());
        let relay = Relay::builder(pool_through(&db, &proxy), Arc::clone(&publisher))
            .per_aggregate_order(ordered)
            .build()
            .unwrap();
        let writer = db.pool().get().await.unwrap();
        // The first batch connects and prepares the relay's statements.
        emit(&writer, &TestEvent::new("warm", 1)).await.unwrap();
        assert_eq!(relay.run_once().await.unwrap().published, 1);

        let id = emit(&writer, &TestEvent::new("o-1", 1)).await.unwrap();
        let before = proxy.turns();
        let report = relay.run_once().await.unwrap();
        let turns = proxy.turns() - before;
        assert_eq!(report.published, 1, "ordered: {ordered}");
        assert!(db.event(id).await.processed_at.is_some());
        assert!(publisher.ids().contains(&id));
        // BEGIN + limits + claim, then mark + COMMIT. Each waited for on its own was four.
        assert_eq!(
            turns, 2,
            "ordered: {ordered}: the batch took {turns} round trips"
        );

        // An empty claim: BEGIN + claim, then COMMIT. With per-aggregate order, a head search that
        // finds nothing also asks whether anything is pending beyond its window (prepared by the
        // first empty claim).
        relay.run_once().await.unwrap();
        let before = proxy.turns();
        assert_eq!(relay.run_once().await.unwrap().claimed, 0);
        let expected = if ordered { 3 } else { 2 };
        assert_eq!(
            proxy.turns() - before,
            expected,
            "ordered: {ordered}: an empty claim"
        );
    }
}

/// A relay (order off) on one connection through a delaying proxy, whose publisher refuses the
/// events of aggregate `bad` (for a retry), warmed up: one published and one failed event have
/// prepared both acknowledgement statements on its connection. With a writer's connection.
async fn warm_relay_failing_bad() -> (
    TestDb,
    DelayProxy,
    Relay<Arc<FlakyPublisher>>,
    deadpool_postgres::Object,
) {
    let db = TestDb::new().await;
    let proxy = delay_proxy(&db).await;
    let publisher = Arc::new(FlakyPublisher::new(|e: &ClaimedEvent| {
        (e.aggregate_id == "bad").then(|| PublishOutcome::retry(FailureKind::Other, "refused"))
    }));
    let relay = Relay::builder(pool_through(&db, &proxy), Arc::clone(&publisher))
        .per_aggregate_order(false)
        .build()
        .unwrap();
    let writer = db.pool().get().await.unwrap();
    // Warm: one published and one failed event prepare both acknowledgement statements.
    emit(&writer, &TestEvent::new("warm", 1)).await.unwrap();
    emit(&writer, &TestEvent::new("bad", 1)).await.unwrap();
    relay.run_once().await.unwrap();
    (db, proxy, relay, writer)
}

#[tokio::test]
async fn marks_and_failures_are_committed_together_in_the_acknowledgements_round_trip() {
    let (db, proxy, relay, writer) = warm_relay_failing_bad().await;

    let good = emit(&writer, &TestEvent::new("good", 1)).await.unwrap();
    let bad = emit(&writer, &TestEvent::new("bad", 2)).await.unwrap();
    let before = proxy.turns();
    let report = relay.run_once().await.unwrap();
    let turns = proxy.turns() - before;
    assert_eq!((report.published, report.retried), (1, 1), "{report:?}");
    assert_eq!(turns, 2, "the batch took {turns} round trips");
    // Both statements ran inside the claim's transaction, not after its COMMIT: the rows' new
    // versions carry one transaction id (statements run on their own would carry one each).
    let xmins: Vec<String> = writer
        .query(
            "SELECT xmin::text FROM outbox_events WHERE id = ANY($1)",
            &[&vec![good, bad]],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(xmins.len(), 2);
    assert_eq!(
        xmins[0], xmins[1],
        "the mark and the failure in one transaction"
    );
    let good = db.event(good).await;
    let bad = db.event(bad).await;
    assert!(good.processed_at.is_some());
    assert!(bad.processed_at.is_none());
    assert_eq!(bad.attempts, 1);
    assert!(
        bad.last_error
            .as_deref()
            .is_some_and(|e| e.contains("refused")),
        "{:?}",
        bad.last_error
    );
    assert!(bad.retry_after.is_some());
}

#[tokio::test]
async fn a_failing_mark_commits_nothing_and_the_connection_serves_the_next_batch() {
    let (db, _proxy, relay, writer) = warm_relay_failing_bad().await;
    // The mark of aggregate "refused" fails on the server.
    writer
        .batch_execute(
            "CREATE FUNCTION refuse_mark() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
               IF NEW.aggregate_id = 'refused' AND NEW.processed_at IS NOT NULL THEN \
                 RAISE EXCEPTION 'mark refused'; END IF; RETURN NEW; END $$; \
             CREATE TRIGGER refuse_mark BEFORE UPDATE ON outbox_events \
               FOR EACH ROW EXECUTE FUNCTION refuse_mark()",
        )
        .await
        .unwrap();
    let refused = emit(&writer, &TestEvent::new("refused", 1)).await.unwrap();
    let bad = emit(&writer, &TestEvent::new("bad", 2)).await.unwrap();
    let e = relay.run_once().await.unwrap_err();
    assert!(format!("{e:?}").contains("mark refused"), "{e:?}");
    // Neither the mark nor the failure recorded behind it was committed.
    assert!(db.event(refused).await.processed_at.is_none());
    let bad_row = db.event(bad).await;
    assert_eq!((bad_row.attempts, bad_row.retry_after), (0, None));

    writer
        .batch_execute("DROP TRIGGER refuse_mark ON outbox_events")
        .await
        .unwrap();
    // The same (only) connection serves the next batch, outside any leftover transaction.
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.published, report.retried), (1, 1), "{report:?}");
    assert!(db.event(refused).await.processed_at.is_some());
    assert_eq!(db.event(bad).await.attempts, 1);
}

/// Never answers.
struct Hanging;

impl Publisher for Hanging {
    type Error = std::io::Error;

    async fn publish(&self, _: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_batch_dropped_mid_publish_leaves_no_transaction_open_and_no_row_locked() {
    let db = TestDb::new().await;
    let pool = db.pool().clone();
    let relay = Relay::builder(pool.clone(), Hanging).build().unwrap();
    let writer = db.pool().get().await.unwrap();
    let id = emit(&writer, &TestEvent::new("o-1", 1)).await.unwrap();
    // Claimed, then dropped while the publisher hangs: the claim's transaction is open.
    let dropped = tokio::time::timeout(Duration::from_millis(300), relay.run_once()).await;
    assert!(
        dropped.is_err(),
        "the batch should still have been publishing"
    );
    drop(relay);

    // No session is left idle in a transaction (the server ends it when the connection closes).
    let open = || async {
        let c = db.connect().await;
        c.query_one(
            "SELECT count(*) FROM pg_stat_activity \
              WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
    };
    assert!(
        eventually(Duration::from_secs(5), async || open().await == 0).await,
        "a session was left idle in a transaction"
    );
    // The event is free for the next relay at once (not after an idle-in-transaction timeout).
    let publisher = Arc::new(RecordingPublisher::new());
    let next = Relay::builder(pool, Arc::clone(&publisher))
        .build()
        .unwrap();
    let report = next.run_once().await.unwrap();
    assert_eq!(report.published, 1, "{report:?}");
    assert_eq!(publisher.ids(), vec![id]);
}
