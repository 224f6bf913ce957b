//! Benchmark 6: what per-aggregate ordering costs — relay throughput with it on and off, events
//! spread over many aggregates and over few.

use outbox_tests::TestDb;

use crate::common::{self, Drain, Rates, Sqs};
use crate::report::{Row, group};
use crate::{Opts, Report, Result};

fn describe(r: &Rates) -> String {
    let rate = r.describe("ev");
    let d = &r.drain;
    if d.capped {
        format!(
            "{rate} (capped: {} in {:.0} s)",
            group(d.events),
            d.elapsed.as_secs_f64()
        )
    } else {
        rate
    }
}

/// Runs benchmark 6 and adds its rows.
pub async fn run(opts: &Opts, report: &mut Report) -> Result<()> {
    let db = TestDb::new().await;
    let sqs = Sqs::start().await;
    let setup = db.connect().await;
    let n = opts.backlog;
    let mut calls = Vec::new();
    let mut cpu = Vec::new();
    for aggregates in [10_000, 10] {
        let (mut on, mut off): (Vec<Drain>, Vec<Drain>) = (Vec::new(), Vec::new());
        let mut batched: Vec<Drain> = Vec::new();
        for round in 0..opts.rounds {
            // Few hot aggregates: also order on with an aggregate's events in one FIFO call.
            if aggregates == 10 && !batched.iter().any(|d| d.capped) {
                common::backlog(&setup, n, aggregates).await?;
                let d =
                    common::drain_relay_fifo_batched(&db, &sqs, opts.relay, n, opts.ordering_cap)
                        .await?;
                eprintln!(
                    "[bench]   round {round}, {aggregates} aggregates: order on, FIFO, aggregates batched {:.0} ev/s{}",
                    d.rate(),
                    if d.capped { " (capped)" } else { "" }
                );
                batched.push(d);
            }
            // A capped drain is not repeated: the cap already says enough.
            if !on.iter().any(|d| d.capped) {
                common::backlog(&setup, n, aggregates).await?;
                let d =
                    common::drain_relay(&db, &sqs, opts.relay, true, n, opts.ordering_cap).await?;
                eprintln!(
                    "[bench]   round {round}, {aggregates} aggregates: order on {:.0} ev/s{}",
                    d.rate(),
                    if d.capped { " (capped)" } else { "" }
                );
                on.push(d);
            }
            if !off.iter().any(|d| d.capped) {
                common::backlog(&setup, n, aggregates).await?;
                let d =
                    common::drain_relay(&db, &sqs, opts.relay, false, n, opts.ordering_cap).await?;
                eprintln!(
                    "[bench]   round {round}, {aggregates} aggregates: order off {:.0} ev/s{}",
                    d.rate(),
                    if d.capped { " (capped)" } else { "" }
                );
                off.push(d);
            }
        }
        let (on, off) = (common::median_rate(&on), common::median_rate(&off));
        let most = |r: &Rates| {
            r.drain
                .max_batches
                .map_or("?".to_owned(), |n| n.to_string())
        };
        calls.push(format!(
            "{aggregates} aggregates: {} with order on, {} off",
            most(&on),
            most(&off)
        ));
        cpu.push(format!(
            "{aggregates} aggregates, order on: {}; off: {}",
            on.drain.cpu_split(),
            off.drain.cpu_split()
        ));
        report.rows.push(Row::info(
            6,
            format!(
                "ordering on vs off, {} events over {} aggregates",
                group(n as u64),
                group(aggregates as u64)
            ),
            format!("on: {}", describe(&on)),
            format!("off: {}", describe(&off)),
            on.median / off.median,
        ));
        if !batched.is_empty() {
            let batched = common::median_rate(&batched);
            report.rows.push(Row::at_least(
                6,
                format!(
                    "order on, FIFO queue, an aggregate's events in one call (`batch_aggregates`), {} events over {} aggregates",
                    group(n as u64),
                    group(aggregates as u64)
                ),
                format!("on: {}", describe(&batched)),
                format!("off: {}", describe(&off)),
                batched.median / off.median,
                0.4,
            ));
        }
    }
    slow_hot_aggregates(opts, report, &db, &sqs, &setup).await?;
    report.notes.push(format!(
        "6: zero SQS latency (but for the row that names a latency), relay settings as above; a drain stops after {:.0} s and its rate so \
         far counts (marked `capped`; a capped drain is not repeated). Most batches publishing at the same moment (relay \
         concurrency {}; median round): {}.",
        opts.ordering_cap.as_secs_f64(),
        opts.relay.concurrency,
        calls.join("; ")
    ));
    report.notes.push(format!(
        "6: CPU per event (median round; the relay's share is the bench process less the fixture's thread): {}.",
        cpu.join("; ")
    ));
    Ok(())
}

/// Order on vs off with 10 hot aggregates when every SQS call takes `sqs_latency` (as a real queue
/// answers): with order on each aggregate's events are sent one call after the other, so this is
/// bounded by aggregates / latency whatever the relay does; off, by the batches in flight.
async fn slow_hot_aggregates(
    opts: &Opts,
    report: &mut Report,
    db: &TestDb,
    sqs: &Sqs,
    setup: &tokio_postgres::Client,
) -> Result<()> {
    let (n, aggregates) = (opts.ordering_slow_backlog, 10);
    sqs.fixture.set_latency(opts.sqs_latency);
    let (mut on, mut off): (Vec<Drain>, Vec<Drain>) = (Vec::new(), Vec::new());
    for round in 0..opts.rounds {
        for ordered in [true, false] {
            common::backlog(setup, n, aggregates).await?;
            let d = common::drain_relay(db, sqs, opts.relay, ordered, n, opts.ordering_cap).await?;
            eprintln!(
                "[bench]   round {round}, {aggregates} aggregates, {} ms per SQS call: order {} {:.0} ev/s",
                opts.sqs_latency.as_millis(),
                if ordered { "on" } else { "off" },
                d.rate()
            );
            if ordered { &mut on } else { &mut off }.push(d);
        }
    }
    sqs.fixture.set_latency(std::time::Duration::ZERO);
    let (on, off) = (common::median_rate(&on), common::median_rate(&off));
    report.rows.push(Row::info(
        6,
        format!(
            "ordering on vs off, {} events over {aggregates} aggregates, {} ms per SQS call",
            group(n as u64),
            opts.sqs_latency.as_millis()
        ),
        format!("on: {}", describe(&on)),
        format!("off: {}", describe(&off)),
        on.median / off.median,
    ));
    Ok(())
}
