//! Benchmark 4: latency from commit to "accepted by SQS", with NOTIFY wake-ups and with polling only.
//!
//! Events are emitted at a steady rate, one per transaction; the commit time is taken when `COMMIT`
//! returns to the client. A wrapper around the product's SQS publisher takes the time at which the
//! `SendMessageBatch` carrying the event returned successfully — the moment SQS accepted it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outbox_core::{CancellationToken, ClaimedEvent, OutboxEvent, PublishOutcome, Publisher, Relay};
use outbox_sqs::SqsPublisher;
use outbox_tests::TestDb;
use uuid::Uuid;

use crate::common::{self, Result, Sqs};
use crate::emit::OrderPlaced;
use crate::report::{Row, fmt_ms, fmt_ratio};
use crate::{Opts, Report};

/// When each event was accepted.
type Seen = Arc<Mutex<HashMap<Uuid, Instant>>>;

/// The product's SQS publisher, noting when each published event's call returned.
pub struct Timed {
    inner: SqsPublisher,
    seen: Seen,
}

impl Publisher for Timed {
    type Error = outbox_sqs::Error;

    async fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> std::result::Result<Vec<PublishOutcome>, Self::Error> {
        let outcomes = self.inner.publish(events).await?;
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        for (event, outcome) in events.iter().zip(&outcomes) {
            if *outcome == PublishOutcome::Published {
                seen.entry(event.id).or_insert(now);
            }
        }
        Ok(outcomes)
    }

    async fn check(&self) -> std::result::Result<(), Self::Error> {
        self.inner.check().await
    }
}

/// Latencies (ms) of one mode; events never seen count as infinite.
async fn measure(opts: &Opts, notify: bool) -> Result<(Vec<f64>, usize)> {
    let db = TestDb::new().await;
    let sqs = Sqs::start().await;
    let seen: Seen = Arc::default();
    let publisher = Timed {
        inner: sqs.publisher(opts.relay.max_in_flight).await?,
        seen: seen.clone(),
    };
    let mut builder = Relay::builder(db.pool().clone(), publisher)
        .batch_size(opts.relay.batch_size)
        .concurrency(opts.relay.concurrency)
        .poll_interval(opts.poll_interval);
    if notify {
        builder = builder.listen(db.config().clone());
    }
    let relay = builder.build()?;
    common::warm_pool(&db, opts.relay.concurrency + 1).await?;

    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (relay, token) = (relay.clone(), token.clone());
        async move { relay.run(token).await }
    });
    // Let the listener connect and the workers go idle.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let n = ((opts.latency_rate as f64) * opts.latency_duration.as_secs_f64()).ceil() as usize;
    let mut commits: Vec<(Uuid, Instant)> = Vec::with_capacity(n);
    let mut client = db.pool().get().await?;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / opts.latency_rate as f64));
    for i in 0..n {
        tick.tick().await;
        let tx = client.transaction().await?;
        let id = OrderPlaced {
            order_id: i as i64,
            customer: format!("customer-{}", i % 997),
            total_cents: 1000 + (i % 9000) as i64,
        }
        .emit(&tx)
        .await?;
        tx.commit().await?;
        commits.push((id, Instant::now()));
    }
    let deadline = Instant::now() + opts.poll_interval * 2 + Duration::from_secs(5);
    while seen.lock().unwrap_or_else(|e| e.into_inner()).len() < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    token.cancel();
    run.await??;

    let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    let mut missing = 0;
    let latencies = commits
        .iter()
        .map(|(id, committed)| match seen.get(id) {
            Some(at) if at >= committed => at.duration_since(*committed).as_secs_f64() * 1e3,
            Some(at) => -(committed.duration_since(*at).as_secs_f64() * 1e3),
            None => {
                missing += 1;
                f64::INFINITY
            }
        })
        .collect();
    Ok((latencies, missing))
}

/// Runs benchmark 4 and adds its rows.
pub async fn run(opts: &Opts, report: &mut Report) -> Result<()> {
    let (mut notify, notify_missing) = measure(opts, true).await?;
    let (mut poll, poll_missing) = measure(opts, false).await?;
    let (n50, n99) = (
        common::quantile(&mut notify, 0.5),
        common::quantile(&mut notify, 0.99),
    );
    let (p50, p99) = (
        common::quantile(&mut poll, 0.5),
        common::quantile(&mut poll, 0.99),
    );
    let poll_label = format!("{} ms poll", opts.poll_interval.as_millis());
    report.rows.push(Row::custom(
        4,
        "commit → accepted by SQS, NOTIFY wake-ups: p50",
        fmt_ms(n50),
        format!("{} with {poll_label} only", fmt_ms(p50)),
        fmt_ratio(n50 / p50),
        "p50 ≤ 5 ms",
        n50 <= 5.0,
    ));
    report.rows.push(Row::custom(
        4,
        "commit → accepted by SQS, NOTIFY wake-ups: p99",
        fmt_ms(n99),
        format!("{} with {poll_label} only", fmt_ms(p99)),
        fmt_ratio(n99 / p99),
        "p99 ≤ 50 ms",
        n99 <= 50.0,
    ));
    report.notes.push(format!(
        "4: {} events/s for {:.1} s per mode, one event per transaction on one connection; \
         accepted = the SendMessageBatch carrying the event returned; relay concurrency {}, \
         batch {}; events never accepted: {notify_missing} with NOTIFY, {poll_missing} polling \
         (counted as infinitely late). A negative latency would mean SQS accepted the event before \
         COMMIT returned to the emitting client.",
        opts.latency_rate,
        opts.latency_duration.as_secs_f64(),
        opts.relay.concurrency,
        opts.relay.batch_size
    ));
    Ok(())
}
