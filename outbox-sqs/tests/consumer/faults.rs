//! Faults around a handler: a handler that panics, a database that goes away.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use deadpool_postgres::Transaction;
use outbox_sqs::consumer::{Consumer, Envelope, Handler, HandlerError, Outcome};
use outbox_tests::sqs::TestQueue;
use outbox_tests::{TestDb, eventually};

use crate::support::*;

/// How a handler fails the first delivery of each event.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// It panics.
    Panic,
    /// It hangs (a call without a time-out).
    Hang,
    /// It rolls the transaction back itself (a script with its own `BEGIN … ROLLBACK`, say) and
    /// returns `Ok`.
    RollBack,
    /// Its connection is lost under it (its session ended), and it returns the error.
    ConnectionLost,
}

/// Records each event (the tests' `Recorder`), then fails its first delivery as `fault` says.
struct FailsFirst {
    fault: Fault,
    recorder: Recorder,
}

impl Handler<AccountEvent> for FailsFirst {
    async fn handle(
        &self,
        event: AccountEvent,
        envelope: &Envelope,
        tx: &Transaction<'_>,
    ) -> Result<(), HandlerError> {
        self.recorder.handle(event, envelope, tx).await?;
        if envelope.receive_count == 1 {
            match self.fault {
                Fault::Panic => panic!("injected handler panic"),
                Fault::Hang => std::future::pending::<()>().await,
                Fault::RollBack => tx.batch_execute("ROLLBACK").await?,
                Fault::ConnectionLost => {
                    tx.batch_execute("SELECT pg_terminate_backend(pg_backend_pid())")
                        .await?
                }
            }
        }
        Ok(())
    }
}

/// Each of 3 events fails its first delivery as `fault` says: rolled back, counted, seen by the
/// observer as a failure, and delivered again after the retry delay — applied once each; and the
/// consumer stops.
async fn the_first_deliveries_fail_and_are_delivered_again(fault: Fault) {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    let ids = emit_credits(&db, 3, 1).await;
    let seen = Seen::default();
    let c = consumer(&db, &queue, "ledger")
        .await
        .observe(seen.observer())
        .handler_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let handler = Arc::new(FailsFirst {
        fault,
        recorder: Recorder::default(),
    });
    let running = Running::start(c, handler.clone());
    let done = eventually(Duration::from_secs(30), async || {
        effect_counts(&db).await.1 == ids.len() as i64
    })
    .await;
    let c = tokio::time::timeout(Duration::from_secs(10), running.stop())
        .await
        .unwrap_or_else(|_| panic!("{fault:?}: the consumer stops, no handler hangs on"));
    relay.stop().await;
    assert!(done, "{fault:?}: every event applied: {:?}", c.metrics());
    assert_eq!(effect_counts(&db).await, (3, 3), "{fault:?}: rolled back");
    let reason = match fault {
        Fault::ConnectionLost => "database",
        _ => "handler",
    };
    assert_eq!(
        c.metrics().failures(reason),
        3,
        "{fault:?}: {:?}",
        c.metrics()
    );
    assert_eq!(c.metrics().handled(), 3);
    let failed = seen
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|d| d.outcome == Outcome::Failed)
        .count();
    assert_eq!(failed, 3, "{fault:?}: the observer saw each as a failure");
    assert_eq!(handler.recorder.calls.load(Ordering::SeqCst), 6);
}

/// A handler that panics is a failed handler: rolled back, counted, seen by the observer, logged,
/// and delivered again after the retry delay. Before, the panic unwound the unit silently: no
/// count, no observer call, the message back only after its visibility time-out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_panic_is_a_counted_failure_and_the_event_is_applied_once() {
    the_first_deliveries_fail_and_are_delivered_again(Fault::Panic).await;
}

/// A handler that hangs is given up at the handler time-out, as a failed handler (its receive
/// count grows, so a redrive policy can act). Before, the heartbeat kept the message hidden for
/// as long as the handler hung — its group, its inbox row lock and shutdown waiting with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_hangs_is_given_up_at_the_handler_timeout() {
    the_first_deliveries_fail_and_are_delivered_again(Fault::Hang).await;
}

/// A handler that rolls the consumer's transaction back itself and returns `Ok` has failed: the
/// message stays and is delivered again. Before, the check before COMMIT ran in a transaction of
/// its own and passed, and the message was deleted with nothing applied: the event lost without a
/// word (black-box run, 72 of 72 events).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_rolls_back_the_transaction_itself_has_failed() {
    the_first_deliveries_fail_and_are_delivered_again(Fault::RollBack).await;
}

/// A handler whose connection is lost under it (its session ended) has met the database's failure,
/// not its own: counted as such (which pauses receiving until the database answers). Before, it
/// was counted as the handler's (black-box run), and receiving went on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_under_the_handler_is_the_databases_failure() {
    the_first_deliveries_fail_and_are_delivered_again(Fault::ConnectionLost).await;
}

/// SQS stops answering (a partition: connections stay open, nothing comes back) while a handled
/// message's delete is on its way: the consumer still stops, within its call time-out, and the
/// message comes back later as a duplicate. Before, the delete (like every consumer call but the
/// heartbeat) had no time limit and `run` never returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_stops_within_its_call_timeout_when_sqs_stops_answering() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    emit_credits(&db, 1, 1).await;
    let upstream: std::net::SocketAddr = outbox_tests::sqs::endpoint()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("the SQS endpoint is host:port");
    let proxy = outbox_tests::BlackHoleProxy::start(upstream).await;
    let recorder = Arc::new(Recorder {
        delay: Some(Duration::from_millis(800)),
        ..Recorder::default()
    });
    let c = consumer(&db, &queue, "ledger")
        .await
        .endpoint_url(format!("http://{}", proxy.addr()))
        .call_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let running = Running::start(c, recorder.clone());
    tokio::time::timeout(Duration::from_secs(30), recorder.started.notified())
        .await
        .expect("the handler starts");
    proxy.black_hole(); // the handler commits, then its delete goes into the black hole
    assert!(
        eventually(Duration::from_secs(10), async || effect_counts(&db).await.0
            == 1)
        .await,
        "the handler committed"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let c = stops_within(running, relay, Duration::from_secs(5)).await;
    assert!(c.metrics().failures("delete") >= 1, "{:?}", c.metrics());
}

/// The database stops answering (a partition: the connection stays open, nothing comes back)
/// while a message is being handled: the statement is given up after the database time limit, as
/// a database failure, and the consumer stops when asked. Before, the unit waited on the silent
/// connection for ever (no consumer statement had a time limit), and so did `run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_stops_when_the_database_stops_answering_mid_message() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    let proxy = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    let recorder = Arc::new(Recorder {
        gate: Some(tokio::sync::Notify::new()),
        ..Recorder::default()
    });
    let c = consumer_on(db.pool_via(proxy.addr(), 4), &queue, "ledger")
        .await
        .handler_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    let running = Running::start(c, recorder.clone());
    emit_credits(&db, 1, 1).await;
    tokio::time::timeout(Duration::from_secs(30), recorder.started.notified())
        .await
        .expect("the handler starts");
    // The handler has written its effect and waits at its gate; then the database goes silent
    // and the handler returns: the transaction's check and commit go into the black hole.
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.black_hole();
    tokio::time::sleep(Duration::from_millis(100)).await;
    recorder.gate.as_ref().expect("a gate").notify_one();
    tokio::time::sleep(Duration::from_secs(1)).await;
    // At most one database time limit (10 s) for the step in flight.
    let c = stops_within(running, relay, Duration::from_secs(15)).await;
    assert!(c.metrics().failures("database") >= 1, "{:?}", c.metrics());
    assert_eq!(effect_counts(&db).await, (0, 0), "nothing committed");
}

/// Stops the consumer, which must return within `limit` despite calls nobody answers, then the
/// relay.
async fn stops_within(
    running: Running,
    relay: outbox_tests::RunningRelay,
    limit: Duration,
) -> outbox_sqs::consumer::Consumer {
    let stopping = std::time::Instant::now();
    let stopped = tokio::time::timeout(limit * 3, running.stop()).await;
    relay.stop().await;
    let c = stopped.expect("the consumer stopped despite the unanswered calls");
    assert!(stopping.elapsed() < limit, "{:?}", stopping.elapsed());
    c
}

/// Turns connections to a test database off (ending those open) and on, as a failover does.
struct Outage {
    admin: tokio_postgres::Client,
    name: String,
}

impl Outage {
    async fn of(db: &TestDb) -> Outage {
        let mut admin_config = db.config().clone();
        admin_config.dbname("postgres");
        Outage {
            admin: outbox_tests::db::connect(&admin_config).await,
            name: db.name().to_owned(),
        }
    }

    async fn set(&self, allow: bool) {
        let name = &self.name;
        self.admin
            .batch_execute(&format!(
                "ALTER DATABASE {name} ALLOW_CONNECTIONS {allow};
                 SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                  WHERE datname = '{name}' AND NOT {allow}"
            ))
            .await
            .unwrap();
    }

    /// Ends the outage; returns the consumer stopped once all `events` are applied (asserted
    /// within 30 s).
    async fn end(&self, db: &TestDb, running: Running, events: usize) -> Consumer {
        self.set(true).await;
        let done = eventually(Duration::from_secs(30), async || {
            effect_counts(db).await.1 == events as i64
        })
        .await;
        let c = running.stop().await;
        assert!(
            done,
            "every event applied once the database is back: {:?}",
            c.metrics()
        );
        c
    }
}

/// The database goes away while one message is handled and others wait for a handler (they
/// passed the open gate before): the waiting ones wait for the database again, without a permit,
/// instead of each failing a delivery. Before, each took the permit and failed on its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_waiting_for_a_handler_when_the_database_fails_wait_for_it() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    let ids = emit_credits(&db, 5, 1).await;
    assert!(eventually(Duration::from_secs(20), async || db.pending().await == 0).await);
    relay.stop().await;
    let recorder = Arc::new(Recorder {
        delay: Some(Duration::from_secs(2)),
        ..Recorder::default()
    });
    let c = consumer(&db, &queue, "ledger")
        .await
        .concurrency(1)
        .retry_backoff(Duration::from_millis(100), Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let running = Running::start(c, recorder.clone());
    tokio::time::timeout(Duration::from_secs(30), recorder.started.notified())
        .await
        .expect("the first handler starts");
    // The others are received meanwhile and wait for the one handler permit.
    assert!(
        eventually(Duration::from_secs(5), async || running
            .consumer
            .metrics()
            .received()
            >= ids.len() as u64)
        .await
    );
    let outage = Outage::of(&db).await;
    outage.set(false).await; // the first handler's commit fails
    tokio::time::sleep(Duration::from_secs(4)).await;
    let c = outage.end(&db, running, ids.len()).await;
    assert_eq!(
        c.metrics().failures("database"),
        1,
        "only the message in hand fails: {:?}",
        c.metrics()
    );
}

/// The database goes away for a while (connections refused, as in a failover): the messages in
/// hand fail once, then the consumer stops receiving until the database answers, so no message's
/// receive count climbs through the outage (each delivery counts towards the queue's
/// maxReceiveCount: before, every message was received and failed again on each retry delay, and
/// a half-minute outage dead-lettered the whole backlog).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_costs_each_message_one_delivery_at_most() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    let ids = emit_credits(&db, 6, 1).await;
    assert!(eventually(Duration::from_secs(20), async || db.pending().await == 0).await);
    relay.stop().await;

    let outage = Outage::of(&db).await;
    outage.set(false).await;
    let seen = Seen::default();
    let c = consumer(&db, &queue, "ledger")
        .await
        .retry_backoff(Duration::from_millis(100), Duration::from_millis(500))
        .observe(seen.observer())
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    tokio::time::sleep(Duration::from_secs(6)).await; // retry delays of 1 s: up to 6 deliveries
    let c = outage.end(&db, running, ids.len()).await;
    assert_eq!(effect_counts(&db).await, (6, 6));
    let most = seen.most_receive_count();
    assert!(
        most <= 2,
        "a message was delivered {most} times through the outage"
    );
    assert!(c.metrics().failures("database") <= 6, "{:?}", c.metrics());
}

/// Short polling (`wait` 0) on an empty queue pauses between receives instead of asking again as
/// fast as the network allows (each call is billed); the queue here is the SQS fixture, which
/// answers every receive at once, empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_polling_an_empty_queue_is_not_a_busy_loop() {
    let db = TestDb::new().await;
    let fx = outbox_sqs_fixture::SqsFixture::start().await;
    let queue = fx.create_queue("empty");
    let c = outbox_sqs::Consumer::builder(db.pool().clone(), queue)
        .sdk_config(outbox_tests::sqs::sdk_config_for(&fx.endpoint_url()).await)
        .name("ledger")
        .wait(Duration::ZERO)
        .receivers(2)
        .build()
        .await
        .unwrap();
    let running = Running::start(c, Arc::new(Recorder::default()));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    running.stop().await;
    let receives = fx.calls_to("ReceiveMessage");
    // Two receivers, a pause of a second after each empty answer: 6 at most in 2.5 s.
    assert!((1..=8).contains(&receives), "{receives} receives in 2.5 s");
}

/// A consumer is not built on a database without its inbox, or on one that does not exist:
/// refused as a configuration error naming the table and what to run, or the database. (Built on a
/// database never migrated, it started, failed every delivery, and its queue's redrive policy moved
/// the messages to the dead-letter queue one by one: black-box run.) A database that does not
/// answer is an outage the run waits for (see the next tests): built all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_is_not_built_on_a_database_without_its_inbox() {
    let queue = TestQueue::standard().await;
    let unmigrated = TestDb::empty().await;
    let e = consumer(&unmigrated, &queue, "ledger")
        .await
        .build()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), outbox_sqs::ErrorKind::Config, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("no processed_events table") && text.contains("outbox migrate"),
        "{text}"
    );
    let mut missing = unmigrated.config().clone();
    missing.dbname("outbox_test_no_such_database");
    let pool = deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(
        missing,
        tokio_postgres::NoTls,
    ))
    .max_size(1)
    .build()
    .unwrap();
    let e = consumer_on(pool, &queue, "ledger")
        .await
        .build()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), outbox_sqs::ErrorKind::Config, "{e}");
    assert!(e.to_string().contains("does not exist"), "{e}");
    let nowhere: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
    consumer_on(unmigrated.pool_via(nowhere, 1), &queue, "ledger")
        .await
        .build()
        .await
        .expect("built: the run waits for the database");
}

/// A queue argument that names no queue is refused before any call, as the relay's are: `not a
/// url` was sent to `GetQueueUrl` as a queue name and came back as a missing queue (black-box
/// run); a topic's ARN is no queue to read.
#[tokio::test]
async fn a_queue_argument_that_names_no_queue_is_refused_before_any_call() {
    let db = TestDb::new().await;
    for (queue, says) in [
        ("not a url", "is neither an SQS queue URL"),
        ("htp:/oops", "is neither an SQS queue URL"),
        (
            "https://sqs.eu-west-1.amazonaws.com/",
            "must end in the queue's name",
        ),
        (
            "arn:aws:sns:us-east-1:000000000000:orders",
            "is an SNS topic",
        ),
        ("  ", "the consumer's queue is empty"),
    ] {
        let e = Consumer::builder(db.pool().clone(), queue)
            .sdk_config(outbox_tests::sqs::sdk_config().await)
            .name("ledger")
            .build()
            .await
            .unwrap_err();
        assert_eq!(e.kind(), outbox_sqs::ErrorKind::Config, "{queue}: {e}");
        assert!(e.to_string().contains(says), "{queue}: {e}");
    }
}

/// The inbox table gone while the consumer runs (renamed here; dropped, or its rights revoked, in
/// life): receiving pauses until it is back, and the message is handled then. The database's
/// probe asked `SELECT 1`, which answered: the gate opened again at once, and the message was
/// received again on every retry — each receive counting towards the redrive policy's
/// `maxReceiveCount` (black-box run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiving_pauses_while_the_inbox_table_is_gone() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let c = consumer(&db, &queue, "ledger").await.build().await.unwrap();
    db.execute("ALTER TABLE processed_events RENAME TO processed_events_away")
        .await;
    let running = Running::start(c, Arc::new(Recorder::default()));
    send_credit(&queue, "acc-1", 1).await;
    // Retries every second at most (the tests' back-off): received 8 times in 8 s before.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let received = running.consumer.metrics().received();
    db.execute("ALTER TABLE processed_events_away RENAME TO processed_events")
        .await;
    let handled = eventually(Duration::from_secs(30), async || {
        effect_counts(&db).await.1 == 1
    })
    .await;
    let c = running.stop().await;
    assert!(
        received <= 2,
        "received {received} times: {:?}",
        c.metrics()
    );
    assert!(handled, "{:?}", c.metrics());
}
