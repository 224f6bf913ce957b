//! Benchmarks of the outbox: the relay against PostgreSQL's own limit and against a naive relay,
//! the cost of `emit` and of the NOTIFY trigger, commit-to-SQS latency, table growth and the cost of
//! per-aggregate ordering, scale-out over several relay instances, the typed consumer against a
//! hand-written receive loop, and retention on the partitioned layout against the plain table's
//! `cleanup` under sustained load.
//!
//! Run them with `scripts/bench` (release build; `--quick` for a smoke run; `--help` for the flags).
//! Every figure is a ratio against a baseline measured in the same run, on a fresh database per
//! benchmark, so that a shared, noisy machine moves both sides together. A missed target is reported
//! as MISS; the command still exits 0 (a benchmark is not a test).

pub mod common;
pub mod consumer;
pub mod emit;
pub mod growth;
pub mod latency;
pub mod naive;
pub mod ordering;
pub mod relay_limit;
pub mod report;
pub mod retention;
pub mod scale_out;
pub mod wal;

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use common::{BoxError, RelaySettings, Result};
pub use report::{Report, Row, Verdict};

/// Sizes and settings of a run. [`Opts::full`] is the default, [`Opts::quick`] a smoke run,
/// [`Opts::tiny`] what the test suite runs.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Which benchmarks to run (1–10); empty runs all.
    pub only: Vec<u8>,
    /// A label for the run's sizes (`full`, `quick`, `tiny`).
    pub mode: &'static str,
    /// Repetitions of the throughput comparisons; the median round counts (min and max shown).
    pub rounds: usize,
    /// The relay's settings in benchmarks 1, 2 and 6.
    pub relay: RelaySettings,
    /// pgbench `-j` (threads; its clients are the relay's concurrency).
    pub pgbench_threads: usize,
    /// Benchmark 1 and 6: backlog drained.
    pub backlog: usize,
    /// Benchmark 2: events the naive relay drains at zero latency.
    pub naive_events: usize,
    /// Benchmark 2: events the naive relay drains with SQS latency.
    pub naive_events_slow: usize,
    /// Benchmark 2: events the relay drains (at both latencies).
    pub relay_events: usize,
    /// Benchmark 2: the latency the fixture adds to every SQS call in the slow case.
    pub sqs_latency: Duration,
    /// Benchmark 3: transactions per variant on one connection.
    pub emit_txs: usize,
    /// Benchmark 3: concurrent writers.
    pub emit_writers: usize,
    /// Benchmark 3: transactions per writer per variant.
    pub emit_txs_per_writer: usize,
    /// Benchmark 4: events per second emitted.
    pub latency_rate: u32,
    /// Benchmark 4: how long events are emitted, per mode.
    pub latency_duration: Duration,
    /// Benchmark 4: the relay's poll interval.
    pub poll_interval: Duration,
    /// Benchmark 5: processed rows in the big table.
    pub growth_rows: usize,
    /// Benchmark 5: pending rows in both tables.
    pub growth_pending: usize,
    /// Benchmark 5: claims timed per table.
    pub growth_samples: usize,
    /// Benchmark 6: the longest a drain may run; the rate so far counts after it.
    pub ordering_cap: Duration,
    /// Benchmark 6: backlog over 10 aggregates drained with `sqs_latency` per SQS call.
    pub ordering_slow_backlog: usize,
    /// Benchmark 7: backlog drained by 1, 2 and 4 relay instances.
    pub scale_out_backlog: usize,
    /// Benchmark 8: messages drained by the consumer and by the hand-written loop.
    pub consumer_events: usize,
    /// Benchmark 9: events per second the writers emit (all writers together).
    pub retention_rate: u32,
    /// Benchmark 9: retention cycles per layout; cycle k retires k × `retention_rows` rows.
    pub retention_cycles: usize,
    /// Benchmark 9: old published rows retired in the first cycle.
    pub retention_rows: usize,
    /// Benchmark 9: load between cycles.
    pub retention_gap: Duration,
    /// Benchmark 10: published rows the table holds before the measured events (a retention's
    /// worth of history).
    pub wal_history: usize,
    /// Benchmark 10: events written and drained per schema.
    pub wal_events: usize,
    /// Where the table is written.
    pub out: PathBuf,
}

impl Opts {
    /// Full sizes: the default.
    pub fn full() -> Opts {
        Opts {
            only: Vec::new(),
            mode: "full",
            rounds: 3,
            relay: RelaySettings {
                batch_size: 100,
                concurrency: 4,
                max_in_flight: 40,
                retention: None,
            },
            pgbench_threads: 2,
            backlog: 100_000,
            naive_events: 20_000,
            naive_events_slow: 3_000,
            relay_events: 30_000,
            sqs_latency: Duration::from_millis(15),
            emit_txs: 2_000,
            emit_writers: 8,
            emit_txs_per_writer: 500,
            latency_rate: 200,
            latency_duration: Duration::from_secs(5),
            poll_interval: Duration::from_secs(1),
            growth_rows: 1_000_000,
            growth_pending: 1_000,
            growth_samples: 1_000,
            ordering_cap: Duration::from_secs(60),
            ordering_slow_backlog: 6_000,
            scale_out_backlog: 50_000,
            consumer_events: 10_000,
            retention_rate: 1_000,
            retention_cycles: 3,
            retention_rows: 200_000,
            retention_gap: Duration::from_secs(10),
            wal_history: 500_000,
            wal_events: 20_000,
            out: PathBuf::from("bench-results/latest.md"),
        }
    }

    /// A smoke run that checks every benchmark works, in well under a minute.
    pub fn quick() -> Opts {
        Opts {
            mode: "quick",
            rounds: 1,
            backlog: 10_000,
            naive_events: 2_000,
            naive_events_slow: 200,
            relay_events: 5_000,
            emit_txs: 300,
            emit_txs_per_writer: 60,
            latency_duration: Duration::from_secs(1),
            growth_rows: 50_000,
            growth_pending: 500,
            growth_samples: 200,
            ordering_cap: Duration::from_secs(5),
            ordering_slow_backlog: 1_000,
            scale_out_backlog: 5_000,
            consumer_events: 2_000,
            retention_rate: 500,
            retention_rows: 20_000,
            retention_gap: Duration::from_secs(3),
            wal_history: 100_000,
            wal_events: 4_000,
            ..Opts::full()
        }
    }

    /// The smallest sizes that still exercise every path (the test suite, debug builds).
    pub fn tiny() -> Opts {
        Opts {
            mode: "tiny",
            rounds: 1,
            backlog: 1_000,
            naive_events: 200,
            naive_events_slow: 40,
            relay_events: 1_000,
            emit_txs: 40,
            emit_writers: 4,
            emit_txs_per_writer: 10,
            latency_rate: 100,
            latency_duration: Duration::from_millis(300),
            growth_rows: 5_000,
            growth_pending: 200,
            growth_samples: 20,
            ordering_cap: Duration::from_secs(3),
            ordering_slow_backlog: 100,
            scale_out_backlog: 400,
            consumer_events: 100,
            retention_rate: 100,
            retention_cycles: 2,
            retention_rows: 1_000,
            retention_gap: Duration::from_millis(300),
            wal_history: 2_000,
            wal_events: 200,
            ..Opts::full()
        }
    }

    /// Whether benchmark `n` is selected.
    pub fn runs(&self, n: u8) -> bool {
        self.only.is_empty() || self.only.contains(&n)
    }
}

/// The benchmarks, by number.
pub const BENCHMARKS: [(u8, &str); 10] = [
    (1, "relay vs pgbench limit"),
    (2, "relay vs naive relay"),
    (3, "emit overhead"),
    (4, "latency"),
    (5, "table growth"),
    (6, "ordering cost"),
    (7, "scale-out"),
    (8, "typed consumer vs hand-written loop"),
    (9, "retention: partition drop vs cleanup"),
    (10, "write amplification: WAL per event"),
];

/// Runs the selected benchmarks and returns the report (printing progress to stderr).
pub async fn run(opts: &Opts) -> Result<Report> {
    let mut report = Report {
        context: context(opts).await,
        ..Report::default()
    };
    for (n, name) in BENCHMARKS {
        if !opts.runs(n) {
            continue;
        }
        eprintln!("[bench] {n}. {name} …");
        let started = Instant::now();
        match n {
            1 => relay_limit::run(opts, &mut report).await?,
            2 => naive::run(opts, &mut report).await?,
            3 => emit::run(opts, &mut report).await?,
            4 => latency::run(opts, &mut report).await?,
            5 => growth::run(opts, &mut report).await?,
            6 => ordering::run(opts, &mut report).await?,
            7 => scale_out::run(opts, &mut report).await?,
            8 => consumer::run(opts, &mut report).await?,
            9 => retention::run(opts, &mut report).await?,
            _ => wal::run(opts, &mut report).await?,
        }
        let took = started.elapsed();
        eprintln!("[bench] {n}. {name} done in {:.1} s", took.as_secs_f64());
        report.timings.push((n, name, took));
    }
    Ok(report)
}

/// Lines describing the machine and the run.
async fn context(opts: &Opts) -> Vec<String> {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let pg = match pg_version().await {
        Ok(v) => v,
        Err(e) => format!("unknown ({e})"),
    };
    let profile = if cfg!(debug_assertions) {
        "debug build (figures not representative)"
    } else {
        "release build"
    };
    vec![
        format!(
            "Run: {} (unix time), sizes `{}`, {profile}, {cores} CPU cores seen.",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            opts.mode
        ),
        format!("Server: {pg}. Code: {}.", code_version()),
        format!(
            "Relay settings (benchmarks 1, 2, 6): {}; SQS fixture in-process, zero added latency \
             unless stated.",
            opts.relay
        ),
        format!(
            "Throughput figures (and benchmark 3's latencies) are the median of {} round(s), min \
             and max in brackets, baselines measured interleaved with them; each benchmark uses its \
             own fresh database.",
            opts.rounds
        ),
    ]
}

/// The commit the benchmarks ran on (read-only git commands), and whether files differ from it.
fn code_version() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(commit) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("commit {commit} with local changes")
            } else {
                format!("commit {commit}")
            }
        }
        None => "unknown commit".into(),
    }
}

async fn pg_version() -> Result<String> {
    let config: tokio_postgres::Config = outbox_tests::db::database_url().parse()?;
    let client = outbox_tests::db::connect(&config).await;
    let v: String = client.query_one("SHOW server_version", &[]).await?.get(0);
    Ok(format!("PostgreSQL {v}"))
}
