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
    // The FIFO case: the SQS publisher keeps an aggregate's order within one call there, so the
    // relay hands over whole batches instead of waves.
    for (aggregates, fifo) in [(10_000, false), (10, false), (10, true)] {
        let (mut on, mut off): (Vec<Drain>, Vec<Drain>) = (Vec::new(), Vec::new());
        for round in 0..opts.rounds {
            // A capped drain is not repeated: the cap already says enough.
            if !on.iter().any(|d| d.capped) {
                common::backlog(&setup, n, aggregates).await?;
                let d = if fifo {
                    common::drain_relay_fifo(&db, &sqs, opts.relay, true, n, opts.ordering_cap)
                        .await?
                } else {
                    common::drain_relay(&db, &sqs, opts.relay, true, n, opts.ordering_cap).await?
                };
                eprintln!(
                    "[bench]   round {round}, {aggregates} aggregates{}: order on {:.0} ev/s{}",
                    if fifo { ", FIFO" } else { "" },
                    d.rate(),
                    if d.capped { " (capped)" } else { "" }
                );
                on.push(d);
            }
            if !off.iter().any(|d| d.capped) {
                common::backlog(&setup, n, aggregates).await?;
                let d = if fifo {
                    common::drain_relay_fifo(&db, &sqs, opts.relay, false, n, opts.ordering_cap)
                        .await?
                } else {
                    common::drain_relay(&db, &sqs, opts.relay, false, n, opts.ordering_cap).await?
                };
                eprintln!(
                    "[bench]   round {round}, {aggregates} aggregates{}: order off {:.0} ev/s{}",
                    if fifo { ", FIFO" } else { "" },
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
        let queue = if fifo { " (FIFO queue)" } else { "" };
        calls.push(format!(
            "{aggregates} aggregates{queue}: {} with order on, {} off",
            most(&on),
            most(&off)
        ));
        report.rows.push(Row::info(
            6,
            format!(
                "ordering on vs off, {} events over {} aggregates{}",
                group(n as u64),
                group(aggregates as u64),
                if fifo {
                    ", FIFO queue (whole batches per call: the publisher keeps each group's order)"
                } else {
                    ""
                }
            ),
            format!("on: {}", describe(&on)),
            format!("off: {}", describe(&off)),
            on.median / off.median,
        ));
    }
    report.notes.push(format!(
        "6: zero SQS latency, relay settings as above; a drain stops after {:.0} s and its rate so \
         far counts (marked `capped`; a capped drain is not repeated). Most batches publishing at the same moment (relay \
         concurrency {}; median round): {}.",
        opts.ordering_cap.as_secs_f64(),
        opts.relay.concurrency,
        calls.join("; ")
    ));
    Ok(())
}
