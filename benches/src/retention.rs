//! Benchmark 9: retention under sustained load — the plain table with `cleanup` (1 000-row DELETEs)
//! against the partitioned layout with partition drops (`partition::maintain`).
//!
//! For each layout: writers emit at a fixed rate (one event per transaction) and a relay with a no-op
//! publisher keeps up, while `retention_cycles` times a block of old, published rows is added — cycle
//! k adds k × `retention_rows`, in a partition of their own on the partitioned layout — and retention
//! retires it. Measured per cycle: the time retention takes, the WAL it writes (`pg_current_wal_lsn`
//! before and after; the writers' WAL in that window is included, at the fixed rate), and the size of
//! the table with its indexes afterwards; over the run: the writers' achieved rate and commit latency,
//! and the relay's rate.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use outbox_core::partition::{self, Granularity, MaintainOptions};
use outbox_core::{CancellationToken, Relay, emit};
use outbox_tests::{TestDb, TestEvent};

use crate::common::{NoopPublisher, Result, median, quantile};
use crate::report::{Row, fmt_ms, group};
use crate::{Opts, Report};

/// Concurrent writers sharing the fixed rate.
const WRITERS: usize = 4;
/// The retention both layouts run with: the old rows are older, the fresh ones are not.
const RETENTION: Duration = Duration::from_secs(600);

/// What one layout's run measured.
#[derive(Debug, Default)]
struct Run {
    /// Per cycle: rows retired, retention time (ms), WAL bytes, table + index bytes afterwards.
    cycles: Vec<(u64, f64, f64, i64)>,
    writer_rate: f64,
    writer_p99_ms: f64,
    writer_median_ms: f64,
    relay_rate: f64,
}

/// Runs benchmark 9 and adds its rows.
pub async fn run(opts: &Opts, report: &mut Report) -> Result<()> {
    let plain = one_layout(opts, false).await?;
    let parted = one_layout(opts, true).await?;
    let last = |r: &Run| *r.cycles.last().expect("at least one cycle");
    let (rows, t_plain, wal_plain, size_plain) = last(&plain);
    let (_, t_part, wal_part, size_part) = last(&parted);
    report.rows.push(Row::at_most(
        9,
        format!(
            "retention of {} rows: partition drop vs cleanup, time",
            group(rows)
        ),
        fmt_ms(t_part),
        format!("{} cleanup", fmt_ms(t_plain)),
        t_part / t_plain,
        0.1,
    ));
    report.rows.push(Row::at_most(
        9,
        format!("retention of {} rows: WAL written", group(rows)),
        format!("{:.1} MB", wal_part / 1e6),
        format!("{:.1} MB cleanup", wal_plain / 1e6),
        wal_part / wal_plain.max(1.0),
        0.1,
    ));
    let first_part = parted.cycles[0].1;
    report.rows.push(Row::at_most(
        9,
        format!(
            "partition drop: time for {}× the rows (flat in rows retired)",
            parted.cycles.len()
        ),
        fmt_ms(t_part),
        format!("{} for {}", fmt_ms(first_part), group(parted.cycles[0].0)),
        t_part / first_part,
        2.0,
    ));
    report.rows.push(Row::info(
        9,
        "table + indexes after the last retention",
        format!("{:.1} MB partitioned", size_part as f64 / 1e6),
        format!("{:.1} MB plain", size_plain as f64 / 1e6),
        size_part as f64 / size_plain as f64,
    ));
    report.rows.push(Row::at_least(
        9,
        format!(
            "writers at {} ev/s target: achieved rate",
            opts.retention_rate
        ),
        format!("{:.0} ev/s partitioned", parted.writer_rate),
        format!("{:.0} ev/s plain", plain.writer_rate),
        parted.writer_rate / plain.writer_rate,
        0.95,
    ));
    report.rows.push(Row::at_most(
        9,
        "writers: p99 emit + commit latency",
        fmt_ms(parted.writer_p99_ms),
        format!("{} plain", fmt_ms(plain.writer_p99_ms)),
        parted.writer_p99_ms / plain.writer_p99_ms,
        1.2,
    ));
    report.rows.push(Row::info(
        9,
        "relay rate (keeping up with the writers)",
        format!("{:.0} ev/s partitioned", parted.relay_rate),
        format!("{:.0} ev/s plain", plain.relay_rate),
        parted.relay_rate / plain.relay_rate,
    ));
    let describe = |r: &Run| {
        r.cycles
            .iter()
            .map(|(n, ms, wal, size)| {
                format!(
                    "{} rows {} {:.1} MB WAL → {:.1} MB",
                    group(*n),
                    fmt_ms(*ms),
                    wal / 1e6,
                    *size as f64 / 1e6
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    report.notes.push(format!(
        "9: {WRITERS} writers at {} ev/s in all (one event per transaction), a relay (no-op publisher, \
         concurrency 2) keeping up; {} retention cycles, cycle k retiring k × {} old published rows. \
         Per cycle (rows, retention time, WAL in that window incl. the writers', table + indexes \
         after) — plain: {}. Partitioned (hourly): {}. Writer commit latency median {} / {} \
         (plain / partitioned).",
        opts.retention_rate,
        opts.retention_cycles,
        group(opts.retention_rows as u64),
        describe(&plain),
        describe(&parted),
        fmt_ms(plain.writer_median_ms),
        fmt_ms(parted.writer_median_ms),
    ));
    Ok(())
}

async fn one_layout(opts: &Opts, partitioned: bool) -> Result<Run> {
    let db = if partitioned {
        let db = TestDb::partitioned(Granularity::Hourly).await;
        // The empty head partition ends where this hour starts: out of the way of the old hours.
        partition::maintain(
            &db.connect().await,
            &MaintainOptions::new().retention(Some(Duration::ZERO)),
        )
        .await?;
        db
    } else {
        TestDb::plain().await
    };
    let publisher = NoopPublisher::default();
    let relay = Relay::builder(db.pool().clone(), publisher.clone())
        .listen(db.config().clone())
        .concurrency(2)
        .build()?;
    let stop = CancellationToken::new();
    let relay_task = tokio::spawn({
        let (relay, stop) = (relay.clone(), stop.clone());
        async move { relay.run(stop).await }
    });
    let committed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (pool, stop, committed) = (db.pool().clone(), stop.clone(), committed.clone());
        let period = Duration::from_secs_f64(WRITERS as f64 / f64::from(opts.retention_rate));
        writers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut client = pool.get().await?;
            let mut n = 0u64;
            while !stop.is_cancelled() {
                tick.tick().await;
                let t = Instant::now();
                let tx = client.transaction().await?;
                emit(&tx, &TestEvent::new(format!("w{w}-{}", n % 50), n)).await?;
                tx.commit().await?;
                latencies.push(t.elapsed().as_secs_f64() * 1e3);
                committed.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
            Ok::<_, crate::BoxError>(latencies)
        }));
    }
    let mut run = Run::default();
    let c = db.connect().await;
    for k in 1..=opts.retention_cycles {
        tokio::time::sleep(opts.retention_gap).await;
        let rows = (k * opts.retention_rows) as i64;
        let hours_ago = (k + 1) as i32;
        if partitioned {
            c.execute(
                "SELECT outbox_partition_add(outbox_partition_name(lo, 'hourly'), lo, lo + interval '1 hour')
                   FROM (SELECT date_trunc('hour', now(), 'UTC') - make_interval(hours => $1) AS lo) t",
                &[&hours_ago],
            )
            .await?;
        }
        c.execute(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
             SELECT 'old', (g % 1000)::text, 'old.event', jsonb_build_object('n', g, 'pad', repeat('x', 200)),
                    date_trunc('hour', now(), 'UTC') - make_interval(hours => $1) + interval '1 minute',
                    now() - interval '1 hour'
               FROM generate_series(1, $2::bigint) g",
            &[&hours_ago, &rows],
        )
        .await?;
        let lsn: String = c
            .query_one("SELECT pg_current_wal_lsn()::text", &[])
            .await?
            .get(0);
        let t = Instant::now();
        if partitioned {
            loop {
                let options = MaintainOptions::new().retention(Some(RETENTION));
                let r = partition::maintain(&c, &options).await?;
                if !r.skipped {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        } else {
            outbox_core::cleanup(&c, RETENTION).await?;
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let row = c
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)::float8,
                        (pg_total_relation_size('outbox_events')
                         + (SELECT coalesce(sum(pg_total_relation_size(relid)), 0)
                              FROM pg_partition_tree('outbox_events')
                             WHERE relid <> 'outbox_events'::regclass))::int8",
                &[&lsn],
            )
            .await?;
        run.cycles.push((rows as u64, ms, row.get(0), row.get(1)));
    }
    tokio::time::sleep(opts.retention_gap).await;
    stop.cancel();
    let elapsed = started.elapsed();
    let mut latencies = Vec::new();
    for w in writers {
        latencies.extend(w.await??);
    }
    relay_task.await??;
    run.writer_rate = committed.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64();
    run.relay_rate = publisher.published() as f64 / elapsed.as_secs_f64();
    run.writer_p99_ms = quantile(&mut latencies, 0.99);
    run.writer_median_ms = median(&mut latencies);
    Ok(run)
}
