//! Benchmark 1: the relay draining a backlog into SQS (zero latency) against pgbench running the
//! relay's own claim-and-mark SQL on the same table shape, batch size and backlog — the rate the
//! database allows when nothing is published at all.

use std::time::Duration;

use outbox_sqs::SqsTransport;
use outbox_tests::TestDb;

use crate::common::{self, Rates, Sqs};
use crate::report::{Row, group};
use crate::{Opts, Report, Result};

/// Aggregates the backlog is spread over.
const AGGREGATES: usize = 10_000;

/// Issue 18's target for the relay's CPU per event with the real SQS client, in µs...
const CPU_TARGET_US: f64 = 10.0;
/// ...and what the relay took through aws-sdk-sqs when the issue was filed: the target as a ratio
/// to the SDK's drain in the same run is their quotient (0.54×).
const CPU_SDK_WHEN_FILED_US: f64 = 18.6;

/// Runs benchmark 1 and adds its rows.
pub async fn run(opts: &Opts, report: &mut Report) -> Result<()> {
    let db = TestDb::new().await;
    let sqs = Sqs::start().await;
    let setup = db.connect().await;
    let s = opts.relay;
    let n = opts.backlog;
    let no_cap = Duration::from_secs(3600);

    let (mut unordered, mut ordered, mut pgbench, mut noop, mut sdk) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..opts.rounds {
        common::backlog(&setup, n, AGGREGATES).await?;
        let d = common::drain_relay(&db, &sqs, s, false, n, no_cap).await?;
        eprintln!(
            "[bench]   round {round}: relay, ordering off: {:.0} ev/s",
            d.rate()
        );
        unordered.push(d);

        common::backlog(&setup, n, AGGREGATES).await?;
        let d =
            common::pgbench_claim_mark(&db, n, s.batch_size, s.concurrency, opts.pgbench_threads)
                .await?;
        eprintln!(
            "[bench]   round {round}: pgbench claim+mark: {:.0} rows/s",
            d.rate()
        );
        pgbench.push(d);

        common::backlog(&setup, n, AGGREGATES).await?;
        let d = common::drain_relay(&db, &sqs, s, true, n, no_cap).await?;
        eprintln!(
            "[bench]   round {round}: relay, ordering on: {:.0} ev/s",
            d.rate()
        );
        ordered.push(d);

        common::backlog(&setup, n, AGGREGATES).await?;
        let d = common::drain_noop(&db, s, false, n, no_cap).await?;
        eprintln!(
            "[bench]   round {round}: relay, no-op publisher: {:.0} ev/s",
            d.rate()
        );
        noop.push(d);

        common::backlog(&setup, n, AGGREGATES).await?;
        let d = common::drain_relay_via(&db, &sqs, s, false, n, no_cap, SqsTransport::Sdk).await?;
        eprintln!(
            "[bench]   round {round}: relay, ordering off, aws-sdk-sqs: {:.0} ev/s",
            d.rate()
        );
        sdk.push(d);
    }
    let split = split_rounds(opts, &db, &sqs, &setup).await?;
    let (unordered, ordered, pgbench, noop, sdk): (Rates, Rates, Rates, Rates, Rates) = (
        common::median_rate(&unordered),
        common::median_rate(&ordered),
        common::median_rate(&pgbench),
        common::median_rate(&noop),
        common::median_rate(&sdk),
    );
    let baseline = format!(
        "pgbench {} (claim+mark SQL, {} clients)",
        pgbench.describe("rows"),
        s.concurrency
    );
    let baseline_short = |r: &Rates| format!("pgbench {} rows/s", group(r.median as u64));
    report.rows.push(Row::at_least(
        1,
        format!(
            "relay drains {} events, per-aggregate order off (same claim SQL as pgbench)",
            group(n as u64)
        ),
        unordered.describe("ev"),
        baseline.clone(),
        unordered.median / pgbench.median,
        0.7,
    ));
    report.rows.push(Row::at_least(
        1,
        "same, per-aggregate order on (the default: heads + followers claim)",
        ordered.describe("ev"),
        baseline.clone(),
        ordered.median / pgbench.median,
        0.7,
    ));
    report.rows.push(Row::info(
        1,
        "diagnostic: relay with a no-op publisher, order off (the database path alone)",
        noop.describe("ev"),
        baseline,
        noop.median / pgbench.median,
    ));
    report.rows.push(Row::info(
        1,
        "diagnostic: order off, through aws-sdk-sqs (`SqsTransport::Sdk`) instead of the direct transport",
        sdk.describe("ev"),
        "the direct transport (first row)".to_owned(),
        sdk.median / unordered.median,
    ));
    let us = |v: Option<f64>| v.map_or("n/a".to_owned(), |us| format!("{us:.1} µs"));
    let (relay_cpu, fixture_cpu) = unordered.drain.cpu_us_per_event();
    if let (Some(direct), Some(via_sdk)) = (relay_cpu, sdk.drain.cpu_us_per_event().0) {
        // Issue 18 asks for ≤ 10 µs where the relay through aws-sdk-sqs took 18.6 µs. Microseconds
        // move with the machine (8–22 µs for the same code across this project's machines); the
        // same drain through aws-sdk-sqs in the same run is the baseline that moves with them.
        report.rows.push(Row::at_most(
            1,
            "CPU per event, relay + SQS client, order off: direct transport against the same \
             drain through aws-sdk-sqs (issue 18: ≤ 10 µs where the SDK took 18.6 µs)",
            format!("{direct:.1} µs"),
            format!("{via_sdk:.1} µs through aws-sdk-sqs"),
            direct / via_sdk,
            CPU_TARGET_US / CPU_SDK_WHEN_FILED_US,
        ));
    }
    // What each event costs PostgreSQL itself. In production the relay and SQS run on other hosts
    // than the database, so the database's capacity divided by this cost is the relay's limit
    // there; here the relay, its client and the fixture take their CPU from the same two cores.
    let db = |r: &Rates| r.drain.db_us_per_event();
    if let (Some(relay_db), Some(bare_db)) = (db(&unordered), db(&pgbench))
        && relay_db > 0.0
        && bare_db > 0.0
    {
        report.rows.push(Row::info(
            1,
            "database CPU per event (all PostgreSQL processes), relay order off vs pgbench's claim+mark",
            format!("{relay_db:.1} µs"),
            format!("{bare_db:.1} µs per row (pgbench)"),
            relay_db / bare_db,
        ));
        report.rows.push(Row::info(
            1,
            "estimate: order off with the database's cores to itself, from the shared-box rounds: \
             the pgbench limit × pgbench's database CPU per row / the relay's",
            format!(
                "{} ev/s",
                group((pgbench.median * bare_db / relay_db) as u64)
            ),
            baseline_short(&pgbench),
            bare_db / relay_db,
        ));
    }
    match split {
        Some(Split {
            relay,
            pgbench,
            cores,
        }) => {
            report.rows.push(Row::at_least(
                1,
                "order off with the database on its own cores (measured: the relay and SQS run \
                 elsewhere in production; here the other cores)",
                relay.describe("ev"),
                format!("pgbench {} on the same split", pgbench.describe("rows")),
                relay.median / pgbench.median,
                0.7,
            ));
            report.notes.push(format!(
                "1: the split-cores rounds pin with taskset: {cores}. Per event there: {}.",
                relay.drain.cpu_split()
            ));
        }
        None => report.notes.push(
            "1: the split-cores rounds did not run (one CPU, or PostgreSQL not on this machine)."
                .to_owned(),
        ),
    }
    if let Some(ordered_db) = db(&ordered) {
        report.notes.push(format!(
            "1: database CPU per event, order on: {ordered_db:.1} µs; no-op publisher, order off: {}.",
            us(db(&noop))
        ));
    }
    report.notes.push(format!(
        "1: CPU per event in the bench process (the median round), which shares the machine's cores with PostgreSQL: \
         relay + SQS client {} (direct transport), {} through aws-sdk-sqs; SQS fixture (the test \
         server, its own thread) {} when draining into the fixture; relay alone {} with the no-op \
         publisher. Target (issue 18): ≤ 10 µs with the real SQS client.",
        us(relay_cpu),
        us(sdk.drain.cpu_us_per_event().0),
        us(fixture_cpu),
        us(noop.drain.cpu_us_per_event().0)
    ));
    report.notes.push(format!(
        "1: backlog {} events over {AGGREGATES} aggregates, regenerated and VACUUM ANALYZEd before \
         every run; pgbench `-M prepared -c {} -j {} -t {}` with benches/claim_mark.sql, batch {}; \
         pgbench marked {} rows in {:.2} s (median round).",
        group(n as u64),
        s.concurrency,
        opts.pgbench_threads.min(s.concurrency),
        n.div_ceil(s.concurrency * s.batch_size),
        s.batch_size,
        group(pgbench.drain.events),
        pgbench.drain.elapsed.as_secs_f64()
    ));
    Ok(())
}

/// The split-cores rounds: the relay (order off) and pgbench with PostgreSQL on its own CPUs.
struct Split {
    relay: Rates,
    pgbench: Rates,
    cores: String,
}

/// Runs the relay (order off) and pgbench, alternating, with the CPUs split between PostgreSQL and
/// this process ([`common::SplitCores`]); `None` when they cannot be split here.
async fn split_rounds(
    opts: &Opts,
    db: &TestDb,
    sqs: &Sqs,
    setup: &tokio_postgres::Client,
) -> Result<Option<Split>> {
    let (s, n) = (opts.relay, opts.backlog);
    let Some(split) = common::SplitCores::apply(setup).await? else {
        return Ok(None);
    };
    let cores = split.describe();
    let (mut relay, mut pgbench) = (Vec::new(), Vec::new());
    for round in 0..opts.rounds {
        common::backlog(setup, n, AGGREGATES).await?;
        let d = common::drain_relay(db, sqs, s, false, n, Duration::from_secs(3600)).await?;
        eprintln!(
            "[bench]   round {round}: split cores, relay, ordering off: {:.0} ev/s",
            d.rate()
        );
        relay.push(d);
        common::backlog(setup, n, AGGREGATES).await?;
        let d =
            common::pgbench_claim_mark(db, n, s.batch_size, s.concurrency, opts.pgbench_threads)
                .await?;
        eprintln!(
            "[bench]   round {round}: split cores, pgbench claim+mark: {:.0} rows/s",
            d.rate()
        );
        pgbench.push(d);
    }
    drop(split);
    Ok(Some(Split {
        relay: common::median_rate(&relay),
        pgbench: common::median_rate(&pgbench),
        cores,
    }))
}
