//! Draining a backlog with the relay (SQS or no-op publisher) and measuring it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use outbox_core::{CancellationToken, ClaimedEvent, PublishOutcome, Publisher, Relay};
use outbox_sqs::SqsTransport;
use outbox_tests::TestDb;

use super::*;

/// What draining a backlog did.
#[derive(Debug, Clone, Copy)]
pub struct Drain {
    /// Events delivered (accepted by the SQS fixture, or marked by pgbench / the naive relay).
    pub events: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Whether the time cap stopped the run before the backlog was empty.
    pub capped: bool,
    /// CPU time this process used meanwhile (relay, SQS client and fixture), when known.
    pub cpu: Option<Duration>,
    /// CPU time of that spent by the SQS fixture's thread, when known.
    pub fixture_cpu: Option<Duration>,
    /// The most batches the relay was publishing at the same moment, when known.
    pub max_batches: Option<usize>,
    /// CPU time the PostgreSQL server used meanwhile (all its processes), when it runs on this
    /// machine.
    pub db_cpu: Option<Duration>,
}

impl Drain {
    /// Events per second.
    pub fn rate(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// CPU microseconds per event: the relay's side (this process without the fixture's thread)
    /// and the fixture's, when known.
    pub fn cpu_us_per_event(&self) -> (Option<f64>, Option<f64>) {
        let per = |d: Duration| d.as_secs_f64() * 1e6 / (self.events.max(1) as f64);
        let fixture = self.fixture_cpu.unwrap_or_default();
        (
            self.cpu.map(|c| per(c.saturating_sub(fixture))),
            self.fixture_cpu.map(per),
        )
    }

    /// Where the CPU of each event went: `relay R µs, fixture F µs, PostgreSQL D µs` (what is known).
    pub fn cpu_split(&self) -> String {
        let us = |v: Option<f64>| v.map_or("?".to_owned(), |us| format!("{us:.1} µs"));
        let (relay, fixture) = self.cpu_us_per_event();
        format!(
            "relay {}, fixture {}, PostgreSQL {}",
            us(relay),
            us(fixture),
            us(self.db_us_per_event())
        )
    }

    /// The PostgreSQL server's CPU microseconds per event, when known.
    pub fn db_us_per_event(&self) -> Option<f64> {
        self.db_cpu
            .map(|c| c.as_secs_f64() * 1e6 / (self.events.max(1) as f64))
    }
}

/// A publisher that accepts everything at once and counts: the relay's database path alone.
#[derive(Debug, Clone, Default)]
pub struct NoopPublisher {
    published: Arc<AtomicU64>,
}

impl NoopPublisher {
    /// Events "published" so far.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }
}

impl Publisher for NoopPublisher {
    type Error = std::convert::Infallible;

    async fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> std::result::Result<Vec<PublishOutcome>, Self::Error> {
        self.published
            .fetch_add(events.len() as u64, Ordering::Relaxed);
        Ok(vec![PublishOutcome::Published; events.len()])
    }
}

/// Runs the product relay over `db` into the fixture until `expected` events were accepted (or
/// `cap` elapsed), then shuts it down and checks that the database agrees.
pub async fn drain_relay(
    db: &TestDb,
    sqs: &Sqs,
    settings: RelaySettings,
    ordered: bool,
    expected: usize,
    cap: Duration,
) -> Result<Drain> {
    drain_relay_via(
        db,
        sqs,
        settings,
        ordered,
        expected,
        cap,
        SqsTransport::Direct,
    )
    .await
}

/// [`drain_relay`] with the publisher sending through `transport`.
pub async fn drain_relay_via(
    db: &TestDb,
    sqs: &Sqs,
    settings: RelaySettings,
    ordered: bool,
    expected: usize,
    cap: Duration,
    transport: SqsTransport,
) -> Result<Drain> {
    let publisher = sqs.publisher_via(settings.max_in_flight, transport).await?;
    sqs.fixture.reset_counters();
    let before = sqs.fixture_cpu();
    let mut drain = drain_with(db, publisher, settings, ordered, expected, cap, || {
        sqs.fixture.accepted()
    })
    .await?;
    drain.fixture_cpu = sqs
        .fixture_cpu()
        .zip(before)
        .map(|(after, before)| after.saturating_sub(before));
    Ok(drain)
}

/// Like [`drain_relay`] with per-aggregate order on, into the fixture's FIFO queue with an
/// aggregate's events batched in one call (`SqsConfig::batch_aggregates`).
pub async fn drain_relay_fifo_batched(
    db: &TestDb,
    sqs: &Sqs,
    settings: RelaySettings,
    expected: usize,
    cap: Duration,
) -> Result<Drain> {
    let publisher = sqs.fifo_batching_publisher(settings.max_in_flight).await?;
    if !publisher.keeps_aggregate_order() {
        return Err("the FIFO batching publisher does not keep aggregate order".into());
    }
    sqs.fixture.reset_counters();
    drain_with(db, publisher, settings, true, expected, cap, || {
        sqs.fixture.accepted()
    })
    .await
}

/// Like [`drain_relay`], through a [`NoopPublisher`] instead of SQS.
pub async fn drain_noop(
    db: &TestDb,
    settings: RelaySettings,
    ordered: bool,
    expected: usize,
    cap: Duration,
) -> Result<Drain> {
    let publisher = NoopPublisher::default();
    let counter = publisher.clone();
    drain_with(db, publisher, settings, ordered, expected, cap, move || {
        counter.published()
    })
    .await
}

/// Runs the relay with `publisher` until `accepted()` reaches `expected` (or `cap` elapsed).
async fn drain_with<P: Publisher>(
    db: &TestDb,
    publisher: P,
    settings: RelaySettings,
    ordered: bool,
    expected: usize,
    cap: Duration,
    accepted: impl Fn() -> u64,
) -> Result<Drain> {
    let publisher = Counting::new(publisher);
    let most = publisher.most();
    let relay = Relay::builder(db.pool().clone(), publisher)
        .batch_size(settings.batch_size)
        .concurrency(settings.concurrency)
        .per_aggregate_order(ordered)
        .retention(settings.retention)
        .build()?;
    warm_pool(db, settings.concurrency).await?;
    // Rows already processed (a history kept by a benchmark) do not count.
    let marked_before = processed(&db.connect().await).await?;
    let server = ServerCpu::find(&db.connect().await).await;
    let token = CancellationToken::new();
    let db_before = server.and_then(|s| s.total());
    let cpu_before = process_cpu();
    let started = Instant::now();
    let run = tokio::spawn({
        let (relay, token) = (relay.clone(), token.clone());
        async move { relay.run(token).await }
    });
    let capped = loop {
        if accepted() >= expected as u64 {
            break false;
        }
        if started.elapsed() >= cap {
            break true;
        }
        if run.is_finished() {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let elapsed = started.elapsed();
    let cpu = process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    let db_cpu = used_since(server.and_then(|s| s.total()), db_before);
    let events = accepted();
    token.cancel();
    run.await??;
    if !capped {
        let marked = if settings.retention == Some(Duration::ZERO) {
            // Deleted as they were acknowledged: what is gone was marked.
            expected as u64 - remaining(&db.connect().await).await?
        } else {
            processed(&db.connect().await).await? - marked_before
        };
        if events < expected as u64 || marked != expected as u64 {
            return Err(format!(
                "relay drain: expected {expected} events, {events} published, {marked} marked"
            )
            .into());
        }
    }
    Ok(Drain {
        events,
        elapsed,
        capped,
        cpu,
        fixture_cpu: None,
        max_batches: Some(most.load(Ordering::Relaxed)),
        db_cpu,
    })
}
