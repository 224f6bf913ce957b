//! Benchmark 2: the relay against the classic, naive relay — claim a batch with `SKIP LOCKED`, then
//! for each event one `SendMessage` and one `UPDATE`, all in one transaction per batch — on the same
//! fixture and table, at zero latency and with the fixture adding a realistic latency to every call.

use std::time::{Duration, Instant};

use aws_sdk_sqs::types::MessageAttributeValue;
use outbox_tests::TestDb;
use uuid::Uuid;

use crate::common::{self, Drain, Sqs};
use crate::report::{Row, group};
use crate::{Opts, Report, Result};

/// Aggregates the backlogs are spread over.
const AGGREGATES: usize = 10_000;

/// The naive relay's claim: the same predicate as the product's (so it gets the same index).
const CLAIM: &str = "SELECT id, aggregate_type, aggregate_id, event_type, payload
                       FROM outbox_events
                      WHERE processed_at IS NULL AND dead_lettered_at IS NULL
                      ORDER BY seq
                      LIMIT $1
                        FOR UPDATE SKIP LOCKED";
/// The naive relay's acknowledgement: one row at a time.
const MARK: &str = "UPDATE outbox_events SET processed_at = now() WHERE id = $1";

fn attribute(value: String) -> Result<MessageAttributeValue> {
    Ok(MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()?)
}

/// One naive worker: batches until the claim comes back empty. Returns the events it published.
async fn naive_worker(
    db: &TestDb,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    batch: i64,
) -> Result<u64> {
    let mut client = db.connect().await;
    let claim = client.prepare(CLAIM).await?;
    let mark = client.prepare(MARK).await?;
    let mut published = 0;
    loop {
        let tx = client.transaction().await?;
        let rows = tx.query(&claim, &[&batch]).await?;
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(published);
        }
        for row in rows {
            let id: Uuid = row.get("id");
            let payload: serde_json::Value = row.get("payload");
            sqs.send_message()
                .queue_url(&queue_url)
                .message_body(payload.to_string())
                .message_attributes("event_id", attribute(id.to_string())?)
                .message_attributes("event_type", attribute(row.get("event_type"))?)
                .message_attributes("aggregate_type", attribute(row.get("aggregate_type"))?)
                .message_attributes("aggregate_id", attribute(row.get("aggregate_id"))?)
                .send()
                .await?;
            tx.execute(&mark, &[&id]).await?;
            published += 1;
        }
        tx.commit().await?;
    }
}

/// Drains the backlog with `workers` naive workers.
pub async fn drain_naive(
    db: &TestDb,
    sqs: &Sqs,
    workers: usize,
    batch: usize,
    expected: usize,
) -> Result<Drain> {
    let client = sqs.client();
    let cpu_before = common::process_cpu();
    let fixture_before = sqs.fixture_cpu();
    let started = Instant::now();
    let counts = futures::future::try_join_all(
        (0..workers).map(|_| naive_worker(db, client.clone(), sqs.queue_url.clone(), batch as i64)),
    )
    .await?;
    let elapsed = started.elapsed();
    let cpu = common::process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    let events: u64 = counts.iter().sum();
    if events != expected as u64 {
        return Err(format!("naive relay: expected {expected} events, published {events}").into());
    }
    Ok(Drain {
        events,
        elapsed,
        capped: false,
        cpu,
        fixture_cpu: sqs
            .fixture_cpu()
            .zip(fixture_before)
            .map(|(after, before)| after.saturating_sub(before)),
        max_batches: None,
        db_cpu: None,
    })
}

/// Runs benchmark 2 and adds its rows.
pub async fn run(opts: &Opts, report: &mut Report) -> Result<()> {
    let db = TestDb::new().await;
    let sqs = Sqs::start().await;
    let setup = db.connect().await;
    let s = opts.relay;
    let no_cap = Duration::from_secs(3600);
    let latency_ms = opts.sqs_latency.as_millis();

    for (latency, naive_n) in [
        (Duration::ZERO, opts.naive_events),
        (opts.sqs_latency, opts.naive_events_slow),
    ] {
        sqs.fixture.set_latency(latency);
        let (mut naive, mut relay) = (Vec::new(), Vec::new());
        for round in 0..opts.rounds {
            common::backlog(&setup, naive_n, AGGREGATES).await?;
            let d = drain_naive(&db, &sqs, s.concurrency, s.batch_size, naive_n).await?;
            eprintln!(
                "[bench]   round {round}, SQS latency {latency:?}: naive {:.0} ev/s",
                d.rate()
            );
            naive.push(d);
            common::backlog(&setup, opts.relay_events, AGGREGATES).await?;
            let d = common::drain_relay(&db, &sqs, s, true, opts.relay_events, no_cap).await?;
            eprintln!(
                "[bench]   round {round}, SQS latency {latency:?}: relay {:.0} ev/s",
                d.rate()
            );
            relay.push(d);
        }
        let (naive, relay) = (common::median_rate(&naive), common::median_rate(&relay));
        let what = if latency.is_zero() {
            "zero SQS latency".to_owned()
        } else {
            format!("{} ms per SQS call", latency.as_millis())
        };
        report.rows.push(Row::at_least(
            2,
            format!(
                "relay vs naive relay, {what} ({} vs {} events)",
                group(opts.relay_events as u64),
                group(naive_n as u64)
            ),
            relay.describe("ev"),
            format!("naive {}", naive.describe("ev")),
            relay.median / naive.median,
            20.0,
        ));
    }
    sqs.fixture.set_latency(Duration::ZERO);
    report.notes.push(format!(
        "2: naive relay = {} workers (the relay's concurrency), each: BEGIN; claim {} with SKIP \
         LOCKED; per event one SendMessage (aws-sdk-sqs) and one prepared UPDATE; COMMIT. The relay \
         runs with its defaults' ordering (per-aggregate order on). Slow case: the fixture delays \
         every call by {latency_ms} ms.",
        s.concurrency, s.batch_size
    ));
    Ok(())
}
