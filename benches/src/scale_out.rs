//! Benchmark 7: scale-out — 1, 2 and 4 relay instances (separate [`Relay`] values, each with its own
//! connection pool, all on the same table, per-aggregate order on) draining the same backlog into the
//! SQS fixture at zero latency. Reports throughput per instance count, the ratio against one
//! instance, and duplicates: events the fixture accepted more than once (by their `event_id`
//! attribute), which must be none.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use outbox_core::{CancellationToken, Relay};
use outbox_tests::TestDb;
use tokio_postgres::NoTls;

use crate::common::{self, Drain, Sqs};
use crate::report::{Row, fmt_rate, group};
use crate::{Opts, Report, Result};

/// Relay instance counts compared.
pub const INSTANCES: [usize; 3] = [1, 2, 4];
/// Aggregates the backlog is spread over.
const AGGREGATES: usize = 10_000;
/// Each instance's concurrency (batches in flight).
const CONCURRENCY: usize = 2;

/// A pool of its own for one relay instance, on `db`'s database.
fn own_pool(db: &TestDb, size: usize) -> Result<Pool> {
    let publish_timeout = outbox_core::RelayConfig::default().publish_timeout;
    let mut config = db.config().clone();
    outbox_core::connect::harden(&mut config, publish_timeout);
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Ok(
        outbox_core::connect::pool_timeouts(Pool::builder(manager).max_size(size), publish_timeout)
            .build()?,
    )
}

/// One drain by `instances` relays: the drain and the duplicates the fixture saw.
async fn drain(
    db: &TestDb,
    sqs: &Sqs,
    opts: &Opts,
    instances: usize,
    expected: usize,
    cap: Duration,
) -> Result<(Drain, u64)> {
    let s = opts.relay;
    let mut relays = Vec::new();
    for _ in 0..instances {
        let pool = own_pool(db, CONCURRENCY + 2)?;
        // Open the connections before the clock starts.
        let clients = futures::future::try_join_all((0..CONCURRENCY).map(|_| pool.get())).await?;
        drop(clients);
        let publisher = sqs.publisher(s.max_in_flight).await?;
        relays.push(
            Relay::builder(pool, publisher)
                .batch_size(s.batch_size)
                .concurrency(CONCURRENCY)
                .per_aggregate_order(true)
                .build()?,
        );
    }
    let check = db.connect().await;
    sqs.fixture.take_messages();
    sqs.fixture.reset_counters();
    let token = CancellationToken::new();
    let cpu_before = common::process_cpu();
    let started = Instant::now();
    let runs: Vec<_> = relays
        .iter()
        .map(|relay| {
            let (relay, token) = (relay.clone(), token.clone());
            tokio::spawn(async move { relay.run(token).await })
        })
        .collect();
    let capped = loop {
        // With duplicates the fixture may count `expected` before every event is marked: then
        // the database decides.
        if sqs.fixture.accepted() >= expected as u64
            && common::processed(&check).await? >= expected as u64
        {
            break false;
        }
        if started.elapsed() >= cap {
            break true;
        }
        if runs.iter().any(|r| r.is_finished()) {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let elapsed = started.elapsed();
    let cpu = common::process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    token.cancel();
    for run in runs {
        run.await??;
    }
    let messages = sqs.fixture.take_messages();
    let mut seen: HashMap<String, u64> = HashMap::with_capacity(messages.len());
    for m in &messages {
        let id = m
            .attributes
            .get("event_id")
            .cloned()
            .unwrap_or_else(|| m.message_id.clone());
        *seen.entry(id).or_default() += 1;
    }
    let duplicates: u64 = seen.values().map(|n| n.saturating_sub(1)).sum();
    let distinct = seen.len() as u64;
    if !capped {
        let marked = common::processed(&check).await?;
        if distinct < expected as u64 || marked != expected as u64 {
            return Err(format!(
                "scale-out drain ({instances} relays): expected {expected} events, {distinct} \
                 distinct published, {marked} marked"
            )
            .into());
        }
    }
    Ok((
        Drain {
            events: distinct,
            elapsed,
            capped,
            cpu,
            fixture_cpu: None,
            max_batches: None,
            db_cpu: None,
        },
        duplicates,
    ))
}

/// Runs benchmark 7 and adds its rows.
pub async fn run(opts: &Opts, report: &mut Report) -> Result<()> {
    let db = TestDb::new().await;
    let sqs = Sqs::start().await;
    // Duplicates are counted from the recorded messages.
    sqs.fixture.set_recording(true);
    let setup = db.connect().await;
    let n = opts.scale_out_backlog;
    let cap = Duration::from_secs(600);
    let mut runs: Vec<Vec<Drain>> = vec![Vec::new(); INSTANCES.len()];
    let mut dups = vec![0u64; INSTANCES.len()];
    for round in 0..opts.rounds {
        // Rotate the order so that no count always runs first (or last) in a round.
        for k in 0..INSTANCES.len() {
            let i = (k + round) % INSTANCES.len();
            let instances = INSTANCES[i];
            common::backlog(&setup, n, AGGREGATES).await?;
            let (d, dup) = drain(&db, &sqs, opts, instances, n, cap).await?;
            eprintln!(
                "[bench]   round {round}, {instances} relay(s): {:.0} ev/s, {dup} duplicates",
                d.rate()
            );
            runs[i].push(d);
            dups[i] += dup;
        }
    }
    let one = common::median_rate(&runs[0]);
    for (i, instances) in INSTANCES.iter().copied().enumerate() {
        let m = common::median_rate(&runs[i]);
        let measured = format!("{}; {} duplicates", m.describe("ev"), group(dups[i]));
        let name = format!(
            "{instances} relay instance(s) × concurrency {CONCURRENCY}, order on, drain {} events \
             over {} aggregates",
            group(n as u64),
            group(AGGREGATES as u64)
        );
        if instances == 1 {
            report.rows.push(Row::custom(
                7,
                name,
                measured,
                "—",
                "1.00×",
                "0 duplicates",
                dups[i] == 0,
            ));
        } else {
            report.rows.push(Row::custom(
                7,
                name,
                measured,
                format!("1 instance {}", fmt_rate(one.median, "ev")),
                crate::report::fmt_ratio(m.median / one.median),
                "0 duplicates (ratio reported)",
                dups[i] == 0,
            ));
        }
    }
    report.notes.push(format!(
        "7: each instance is its own `Relay` with its own pool (batch {}, concurrency \
         {CONCURRENCY}, SQS max_in_flight {}), all in the bench process and on the same table, \
         zero SQS latency, fixture recording on; duplicates are messages accepted more than once \
         for the same `event_id`, summed over the rounds.",
        opts.relay.batch_size, opts.relay.max_in_flight
    ));
    Ok(())
}
