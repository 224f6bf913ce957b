//! Emit → relay → consume, every event applied exactly once despite forced redeliveries and a
//! consumer killed mid-handler.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::Transaction;
use outbox_core::CancellationToken;
use outbox_sqs::consumer::{Envelope, Handler, HandlerError};
use outbox_tests::sqs::TestQueue;
use outbox_tests::{TestDb, eventually};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_is_applied_once_despite_skipped_deletes_and_failures() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    let ids = emit_credits(&db, 6, 10).await;

    let seen = Seen::default();
    let consumer = consumer(&db, &queue, "ledger")
        .await
        .concurrency(4)
        .skip_delete_every(7)
        .observe(seen.observer())
        .build()
        .await
        .expect("consumer");
    let recorder = Arc::new(Recorder {
        // Every fifth credit fails on its first delivery: rolled back, delivered again.
        fail_first: Some(|e| e.n() % 5 == 0),
        ..Recorder::default()
    });
    let running = Running::start(consumer, recorder.clone());

    let done = eventually(Duration::from_secs(60), async || {
        let (_, distinct) = effect_counts(&db).await;
        let m = running.consumer.metrics();
        distinct == ids.len() as i64 && m.duplicates() >= seen.left_in_queue() as u64
    })
    .await;
    let consumer = running.stop().await;
    relay.stop().await;
    let m = consumer.metrics();
    assert!(done, "not every event was applied: {m:?}");

    let (rows, distinct) = effect_counts(&db).await;
    assert_eq!(
        (rows, distinct),
        (60, 60),
        "each event applied exactly once"
    );
    assert_eq!(seen.event_ids(), ids.iter().copied().collect());
    assert_eq!(m.handled(), 60);
    // 6 accounts × credits 5 and 10 failed once each.
    assert_eq!(m.failures("handler"), 12);
    assert!(seen.left_in_queue() >= 5, "{}", seen.left_in_queue());
    assert!(m.duplicates() >= seen.left_in_queue() as u64, "{m:?}");
    assert_eq!(
        recorder.calls.load(Ordering::SeqCst),
        60 + 12,
        "duplicates never reach the handler"
    );
    let text = consumer.encode_metrics();
    assert!(
        text.contains(r#"outbox_consumer_handled_total{consumer="ledger"} 60"#),
        "{text}"
    );
    assert!(
        text.contains(r#"outbox_consumer_failures_total{consumer="ledger",reason="handler"} 12"#),
        "{text}"
    );
    // Retried events carry a receive count above 1.
    assert!(
        recorder
            .envelopes
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.receive_count > 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_mid_handler_and_restarted_applies_the_event_once() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    let ids = emit_credits(&db, 1, 1).await;

    // The first consumer writes the effect, then hangs before committing; it is killed there.
    let stuck = Arc::new(Recorder {
        gate: Some(tokio::sync::Notify::new()),
        ..Recorder::default()
    });
    let first = consumer(&db, &queue, "ledger")
        .await
        .build()
        .await
        .expect("consumer");
    let task = tokio::spawn({
        let (first, stuck) = (first.clone(), stuck.clone());
        async move {
            first
                .run::<AccountEvent, _>(CancellationToken::new(), stuck)
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(30), stuck.started.notified())
        .await
        .expect("the handler starts");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(
        effect_counts(&db).await,
        (0, 0),
        "the killed transaction rolled back"
    );

    // A restarted consumer gets the message again once its visibility time-out ends.
    let recorder = Arc::new(Recorder::default());
    let second = consumer(&db, &queue, "ledger")
        .await
        .build()
        .await
        .expect("consumer");
    let running = Running::start(second, recorder.clone());
    let applied = eventually(Duration::from_secs(20), async || {
        effect_counts(&db).await.1 == 1
    })
    .await;
    // Give a second (wrong) application a chance to show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let second = running.stop().await;
    relay.stop().await;
    assert!(applied, "the event was applied after the restart");
    assert_eq!(effect_counts(&db).await, (1, 1));
    let envelopes = recorder.envelopes.lock().unwrap().clone();
    assert_eq!(envelopes.len(), 1);
    assert_eq!(envelopes[0].event_id, ids[0]);
    assert!(envelopes[0].receive_count >= 2, "{envelopes:?}");
    assert_eq!(second.metrics().handled(), 1);
    // The message was deleted: nothing comes back.
    assert!(
        queue
            .receive_all(1, Duration::from_secs(3))
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_context_and_envelope_reach_the_handler() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let id = outbox_core::trace::with_traceparent(TP, async {
        let client = db.pool().get().await.unwrap();
        outbox_core::emit(&client, &AccountEvent::credited("acc-9", 1))
            .await
            .unwrap()
    })
    .await;
    let recorder = Arc::new(Recorder::default());
    let c = consumer(&db, &queue, "ledger").await.build().await.unwrap();
    let forwarder = Forwarder(recorder.clone(), Arc::default());
    let running = Running::start(c, Forwarder(recorder.clone(), forwarder.1.clone()));
    assert!(
        eventually(Duration::from_secs(20), async || effect_counts(&db).await.1
            == 1)
        .await
    );
    running.stop().await;
    relay.stop().await;
    // The event the handler emitted continues the producer's trace.
    let forwarded: Vec<Option<String>> = db
        .connect()
        .await
        .query(
            "SELECT metadata->>'traceparent' FROM outbox_events WHERE event_type = 'account.closed'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(forwarded, [Some(TP.to_owned())]);
    // The handler ran with the producer's span as its OpenTelemetry context's remote parent
    // (outbox-core's `opentelemetry` feature is on in the tests).
    assert_eq!(
        *forwarder.1.lock().unwrap(),
        [(
            "0af7651916cd43dd8448eb211c80319c".to_owned(),
            "b7ad6b7169203331".to_owned(),
            true
        )]
    );
    let e = recorder.envelopes.lock().unwrap()[0].clone();
    assert_eq!(e.event_id, id);
    assert_eq!(e.event_type, "account.credited");
    assert_eq!(
        (e.aggregate_type.as_str(), e.aggregate_id.as_str()),
        ("account", "acc-9")
    );
    assert_eq!(e.traceparent.as_deref(), Some(TP));
    assert_eq!(e.receive_count, 1);
    assert!(!e.message_id.is_empty());
}

/// Records a credit, and emits `account.closed` for it in the same transaction. Records the
/// OpenTelemetry span context it runs in: trace id, span id, whether remote.
struct Forwarder(Arc<Recorder>, Arc<Mutex<Vec<(String, String, bool)>>>);

impl Handler<AccountEvent> for Forwarder {
    async fn handle(
        &self,
        event: AccountEvent,
        envelope: &Envelope,
        tx: &Transaction<'_>,
    ) -> Result<(), HandlerError> {
        if let AccountEvent::Credited { account, n, .. } = &event {
            let context = opentelemetry::Context::current();
            let span = opentelemetry::trace::TraceContextExt::span(&context);
            let sc = span.span_context();
            self.1.lock().unwrap().push((
                sc.trace_id().to_string(),
                sc.span_id().to_string(),
                sc.is_remote(),
            ));
            outbox_core::emit(
                tx,
                &AccountEvent::Closed {
                    account: account.clone(),
                    n: n + 1,
                },
            )
            .await?;
            self.0.handle(event, envelope, tx).await?;
        }
        Ok(())
    }
}

/// A handler that ignores a failed statement returns `Ok` with its transaction aborted, whose
/// COMMIT PostgreSQL answers with a rollback and no error. The consumer notices before committing:
/// the message is not deleted, and its next delivery is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_swallows_a_database_error_loses_no_event() {
    let db = TestDb::new().await;
    create_effects(&db).await;
    let queue = TestQueue::standard().await;
    let relay = start_relay(&db, &queue).await;
    let ids = emit_credits(&db, 2, 2).await;
    let consumer = consumer(&db, &queue, "careless")
        .await
        .build()
        .await
        .expect("consumer");
    let running = Running::start(consumer, Swallower(Arc::new(Recorder::default())));
    let applied = eventually(Duration::from_secs(30), async || {
        effect_counts(&db).await.1 == ids.len() as i64
    })
    .await;
    let consumer = running.stop().await;
    relay.stop().await;
    let m = consumer.metrics();
    assert!(
        applied,
        "events lost: {:?} of {} applied",
        effect_counts(&db).await,
        ids.len()
    );
    assert_eq!(effect_counts(&db).await, (4, 4), "each applied once");
    assert_eq!(
        m.failures("database"),
        4,
        "each first delivery failed: {m:?}"
    );
}

/// On a message's first delivery, runs a statement that fails and ignores the error, then records
/// the event as [`Recorder`] does (that insert fails too: the transaction is aborted) and returns
/// `Ok` all the same.
struct Swallower(Arc<Recorder>);

impl Handler<AccountEvent> for Swallower {
    async fn handle(
        &self,
        event: AccountEvent,
        envelope: &Envelope,
        tx: &Transaction<'_>,
    ) -> Result<(), HandlerError> {
        if envelope.receive_count == 1 {
            let _ = tx.execute("SELECT 1 / 0", &[]).await;
            let _ = self.0.handle(event, envelope, tx).await;
            return Ok(());
        }
        self.0.handle(event, envelope, tx).await
    }
}
