//! Benchmark 8: the typed consumer ([`outbox_sqs::Consumer`]) against a hand-written receive /
//! handle / delete loop doing the same work, draining the same backlog from the same local SQS
//! server (fauxqs: the in-process fixture does not receive).
//!
//! The work per message is the same on both sides: read the envelope, decode the body into the
//! event type, and in one transaction of a deadpool pool record the event in the inbox
//! (`process_once`) and insert one effect row; then delete the message. The hand-written loop is
//! what a user would write first (and what the orders example used to do): `workers` tasks, each
//! receiving up to 10 messages, handling them one after the other, and deleting them with one
//! `DeleteMessageBatch`. The consumer runs with `concurrency` = `workers`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageAttributeValue, SendMessageBatchRequestEntry,
};
use deadpool_postgres::{Pool, Transaction};
use futures::StreamExt;
use outbox_core::{CancellationToken, DecodeEvent};
use outbox_sqs::consumer::{Consumer, Envelope, Handler, HandlerError};
use outbox_tests::TestDb;
use outbox_tests::sqs::TestQueue;
use uuid::Uuid;

use crate::common::{Drain, median_rate};
use crate::report::{Row, group};
use crate::{Opts, Report, Result};

/// Handlers (consumer) and loops (hand-written) at once.
const WORKERS: usize = 8;

/// The benchmark's event.
#[derive(serde::Serialize, serde::Deserialize, outbox_core::OutboxEvent)]
#[outbox(aggregate = "account", event_type = "account.credited")]
struct Credited {
    #[outbox(aggregate_id)]
    account: String,
    cents: i64,
}

const EFFECT: &str = "INSERT INTO bench_effects (event_id, account, cents) VALUES ($1, $2, $3)";

/// The consumer's handler: one effect row.
struct Effect;

impl Handler<Credited> for Effect {
    async fn handle(
        &self,
        event: Credited,
        envelope: &Envelope,
        tx: &Transaction<'_>,
    ) -> std::result::Result<(), HandlerError> {
        let stmt = tx.prepare_cached(EFFECT).await?;
        tx.execute(&stmt, &[&envelope.event_id, &event.account, &event.cents])
            .await?;
        Ok(())
    }
}

fn attribute(value: &str) -> Result<MessageAttributeValue> {
    Ok(MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()?)
}

/// Puts `n` events on the queue (as the relay would), 10 per call, 8 calls at once.
async fn fill(queue: &TestQueue, n: usize) -> Result<()> {
    let mut entries = Vec::with_capacity(n);
    for i in 0..n {
        let body = format!(r#"{{"account": "acc-{}", "cents": {i}}}"#, i % 100);
        entries.push(
            SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(body)
                .message_attributes("event_id", attribute(&Uuid::new_v4().to_string())?)
                .message_attributes("event_type", attribute("account.credited")?)
                .message_attributes("aggregate_type", attribute("account")?)
                .message_attributes("aggregate_id", attribute(&format!("acc-{}", i % 100))?)
                .build()?,
        );
    }
    let calls: Vec<Vec<SendMessageBatchRequestEntry>> =
        entries.chunks(10).map(<[_]>::to_vec).collect();
    let mut calls = futures::stream::iter(calls.into_iter().map(|batch| {
        queue
            .client()
            .send_message_batch()
            .queue_url(queue.url())
            .set_entries(Some(batch))
            .send()
    }))
    .buffer_unordered(8);
    while let Some(out) = calls.next().await {
        let out = out?;
        if !out.failed().is_empty() {
            return Err(format!("{} entries refused while filling", out.failed().len()).into());
        }
    }
    Ok(())
}

/// Drains `n` messages with the consumer.
async fn drain_consumer(db: &TestDb, queue: &TestQueue, n: usize) -> Result<Drain> {
    let consumer = Consumer::builder(db.pool().clone(), queue.url())
        .client(queue.client().clone())
        .name(format!("bench-{}", Uuid::new_v4().simple()))
        .concurrency(WORKERS)
        .wait(Duration::from_secs(1))
        .build()
        .await?;
    let stop = CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn({
        let (consumer, stop) = (consumer.clone(), stop.clone());
        async move { consumer.run(stop, Effect).await }
    });
    let deadline = started + Duration::from_secs(600);
    while consumer.metrics().handled() < n as u64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed();
    stop.cancel();
    task.await??;
    let handled = consumer.metrics().handled();
    if handled < n as u64 {
        return Err(format!("the consumer handled {handled} of {n} messages").into());
    }
    Ok(drain(n, elapsed))
}

fn drain(n: usize, elapsed: Duration) -> Drain {
    Drain {
        events: n as u64,
        elapsed,
        capped: false,
        cpu: None,
        fixture_cpu: None,
        max_batches: None,
        db_cpu: None,
    }
}

/// One hand-written loop: receive up to 10, handle each in its own transaction, delete the batch.
async fn hand_written_loop(
    pool: Pool,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    inbox: String,
    done: Arc<AtomicU64>,
    n: u64,
) -> Result<()> {
    while done.load(Ordering::Relaxed) < n {
        let out = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_attribute_names("All")
            .send()
            .await?;
        let mut entries = Vec::new();
        for (i, m) in out.messages().iter().enumerate() {
            let attr = |name: &str| {
                m.message_attributes()
                    .and_then(|a| a.get(name))
                    .and_then(|v| v.string_value())
                    .unwrap_or_default()
            };
            let event_id = Uuid::parse_str(attr("event_id"))?;
            let event = Credited::decode(attr("event_type"), m.body().unwrap_or_default())?;
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            if outbox_core::process_once(&tx, &inbox, event_id).await? {
                let stmt = tx.prepare_cached(EFFECT).await?;
                tx.execute(&stmt, &[&event_id, &event.account, &event.cents])
                    .await?;
            }
            tx.commit().await?;
            done.fetch_add(1, Ordering::Relaxed);
            entries.push(
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()?,
            );
        }
        if !entries.is_empty() {
            sqs.delete_message_batch()
                .queue_url(&queue_url)
                .set_entries(Some(entries))
                .send()
                .await?;
        }
    }
    Ok(())
}

/// Drains `n` messages with `WORKERS` hand-written loops.
async fn drain_hand_written(db: &TestDb, queue: &TestQueue, n: usize) -> Result<Drain> {
    let done = Arc::new(AtomicU64::new(0));
    let inbox = format!("bench-{}", Uuid::new_v4().simple());
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..WORKERS {
        tasks.spawn(hand_written_loop(
            db.pool().clone(),
            queue.client().clone(),
            queue.url().to_owned(),
            inbox.clone(),
            done.clone(),
            n as u64,
        ));
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(drain(n, started.elapsed()))
}

/// Runs benchmark 8 and adds its row.
pub async fn run(opts: &Opts, report: &mut Report) -> Result<()> {
    let db = TestDb::new().await;
    db.connect()
        .await
        .batch_execute(
            "CREATE TABLE bench_effects (event_id uuid NOT NULL, account text NOT NULL, cents bigint NOT NULL)",
        )
        .await?;
    let n = opts.consumer_events;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 0..opts.rounds {
        // Alternate which side goes first, each on a fresh queue.
        for side in [round % 2, 1 - round % 2] {
            let queue = TestQueue::standard().await;
            fill(&queue, n).await?;
            if side == 0 {
                let d = drain_consumer(&db, &queue, n).await?;
                eprintln!("[bench]   round {round}: consumer {:.0} msg/s", d.rate());
                ours.push(d);
            } else {
                let d = drain_hand_written(&db, &queue, n).await?;
                eprintln!(
                    "[bench]   round {round}: hand-written {:.0} msg/s",
                    d.rate()
                );
                theirs.push(d);
            }
        }
    }
    let (ours, theirs) = (median_rate(&ours), median_rate(&theirs));
    report.rows.push(Row::at_least(
        8,
        format!(
            "typed consumer drains {} messages (decode, inbox, effect row, batched delete)",
            group(n as u64)
        ),
        ours.describe("msg"),
        format!("hand-written loop {}", theirs.describe("msg")),
        ours.median / theirs.median,
        0.9,
    ));
    report.notes.push(format!(
        "8: local SQS server fauxqs (not the in-process fixture, which does not receive), a \
         standard queue filled before each drain; consumer concurrency {WORKERS} vs {WORKERS} \
         hand-written loops (each: ReceiveMessage up to 10, wait 1 s; per message one transaction \
         with process_once and one effect INSERT; one DeleteMessageBatch per batch); same pool, \
         same work; sides alternate which runs first."
    ));
    Ok(())
}
