//! `emit` issued together with the caller's own statement (`emit_with`, or `futures::try_join!`):
//! tokio-postgres pipelines both on the connection, and the outbox's guarantees hold — the event
//! commits with the business row, and a failure of either statement rolls both back.

use std::time::{Duration, Instant};

use futures::{TryFutureExt, try_join};
use outbox_core::{Emitter, ErrorKind, emit, emit_with};
use outbox_tests::{DelayProxy, TestDb, TestEvent};
use tokio_postgres::error::SqlState;

const CREATE_ORDERS: &str = "CREATE TABLE orders (id text PRIMARY KEY, total bigint NOT NULL)";
const INSERT_ORDER: &str = "INSERT INTO orders (id, total) VALUES ($1, $2)";

/// Orders and outbox events of aggregate `id`, committed.
async fn rows(db: &TestDb, id: &str) -> (i64, i64) {
    let c = db.connect().await;
    let count = |sql: &'static str| {
        let c = &c;
        async move { c.query_one(sql, &[&id]).await.unwrap().get::<_, i64>(0) }
    };
    let orders = count("SELECT count(*) FROM orders WHERE id = $1").await;
    let events = count("SELECT count(*) FROM outbox_events WHERE aggregate_id = $1").await;
    (orders, events)
}

async fn db_with_orders() -> TestDb {
    let db = TestDb::new().await;
    db.connect()
        .await
        .batch_execute(CREATE_ORDERS)
        .await
        .unwrap();
    db
}

/// The SQLSTATE of a database error `e` carries.
fn sqlstate(e: &outbox_core::Error) -> Option<SqlState> {
    let source = std::error::Error::source(e)?;
    source
        .downcast_ref::<tokio_postgres::Error>()?
        .code()
        .cloned()
}

#[tokio::test]
async fn a_pipelined_emit_commits_with_the_business_row() {
    let db = db_with_orders().await;
    // deadpool: the order's insert and emit through the pool's statement cache.
    let mut client = db.pool().get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let insert = tx.prepare_cached(INSERT_ORDER).await.unwrap();
    let event = TestEvent::new("o-1", 1);
    let (inserted, id) = emit_with(&tx, &event, tx.execute(&insert, &[&"o-1", &1999_i64]))
        .await
        .unwrap();
    assert_eq!(inserted, 1);
    assert!(!id.is_nil());
    tx.commit().await.unwrap();
    assert_eq!(rows(&db, "o-1").await, (1, 1));

    // tokio-postgres, with the macro: no statement cache, so emit prepares its insert first (the
    // prepare rides with the order's insert).
    let mut client = db.connect().await;
    let tx = client.transaction().await.unwrap();
    let (emitter, event) = (Emitter::new(), TestEvent::new("o-2", 1));
    try_join!(
        tx.execute(INSERT_ORDER, &[&"o-2", &1999_i64]).err_into(),
        emitter.emit(&tx, &event),
    )
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(rows(&db, "o-2").await, (1, 1));
}

#[tokio::test]
async fn a_failing_business_statement_rolls_back_the_pipelined_emit() {
    let db = db_with_orders().await;
    db.connect()
        .await
        .execute(INSERT_ORDER, &[&"o-1", &1_i64])
        .await
        .unwrap();
    let mut client = db.pool().get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let insert = tx.prepare_cached(INSERT_ORDER).await.unwrap();
    let event = TestEvent::new("o-1", 1);
    // The order exists: the insert fails, and the emit queued behind it runs in an aborted
    // transaction. The join reports the first error, the order's.
    let e = emit_with(&tx, &event, tx.execute(&insert, &[&"o-1", &2_i64]))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Database, "{e}");
    assert_eq!(sqlstate(&e), Some(SqlState::UNIQUE_VIOLATION), "{e}");
    drop(tx);
    assert_eq!(rows(&db, "o-1").await, (1, 0), "no event without its order");
}

#[tokio::test]
async fn a_failing_pipelined_emit_rolls_back_the_business_row() {
    let db = db_with_orders().await;
    // Another transaction holds the aggregate's lock (it emitted for it and is still open).
    let mut holder = db.connect().await;
    let held = holder.transaction().await.unwrap();
    emit(&held, &TestEvent::new("o-1", 1)).await.unwrap();

    let mut client = db.pool().get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    tx.batch_execute("SET LOCAL lock_timeout = '100ms'")
        .await
        .unwrap();
    let insert = tx.prepare_cached(INSERT_ORDER).await.unwrap();
    let event = TestEvent::new("o-1", 2);
    let e = try_join!(
        tx.execute(&insert, &[&"o-1", &2_i64]).err_into(),
        emit(&tx, &event),
    )
    .unwrap_err();
    assert_eq!(sqlstate(&e), Some(SqlState::LOCK_NOT_AVAILABLE), "{e}");
    // The transaction is aborted: committing it rolls it back.
    tx.commit().await.ok();
    held.rollback().await.unwrap();
    assert_eq!(rows(&db, "o-1").await, (0, 0), "no order without its event");
}

#[tokio::test]
async fn a_pipelined_emit_on_a_warm_deadpool_connection_adds_no_round_trip() {
    let db = db_with_orders().await;
    let delay = Duration::from_millis(150);
    let proxy = DelayProxy::start(db.server_addr(), delay).await;
    let pool = db.pool_via(proxy.addr(), 1);
    let mut client = pool.get().await.unwrap();
    // The connection's first emit prepares its insert (and the order's insert is prepared here):
    // both are in the connection's statement cache afterwards.
    let tx = client.transaction().await.unwrap();
    let insert = tx.prepare_cached(INSERT_ORDER).await.unwrap();
    emit(&tx, &TestEvent::new("o-0", 1)).await.unwrap();
    tx.rollback().await.unwrap();

    let tx = client.transaction().await.unwrap();
    let event = TestEvent::new("o-1", 1);
    let started = Instant::now();
    emit_with(&tx, &event, tx.execute(&insert, &[&"o-1", &1_i64]))
        .await
        .unwrap();
    let took = started.elapsed();
    tx.commit().await.unwrap();
    assert_eq!(rows(&db, "o-1").await, (1, 1));
    assert_eq!(rows(&db, "o-0").await, (0, 0));
    // One round trip for both statements; emit awaiting anything before its insert would make it
    // two.
    assert!(
        took < delay * 3 / 2,
        "the order's insert and emit took {took:?}, more than one round trip ({delay:?})"
    );
}

/// An event `emit` refuses fails `emit_with` before the caller's statement is sent: the statement
/// never runs and the transaction stays usable, as after a refused `emit`. Before, the statement
/// ran and the call then failed: committing (as a refused `emit` allows) wrote the row without its
/// event (black-box run).
#[tokio::test]
async fn a_refused_event_leaves_the_statement_unsent() {
    let db = db_with_orders().await;
    let mut client = db.pool().get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let insert = tx.prepare_cached(INSERT_ORDER).await.unwrap();
    let refused = TestEvent::new("", 1);
    let e = emit_with(&tx, &refused, tx.execute(&insert, &[&"o-9", &1_i64]))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EmptyAggregateId, "{e}");
    // Usable: a valid pair goes through and commits.
    emit_with(
        &tx,
        &TestEvent::new("o-10", 1),
        tx.execute(&insert, &[&"o-10", &1_i64]),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        rows(&db, "o-9").await,
        (0, 0),
        "the refused pair's statement ran"
    );
    assert_eq!(rows(&db, "o-10").await, (1, 1));
}
