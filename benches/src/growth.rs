//! Benchmark 5: the relay's claim with a million processed rows in the table against the same pending
//! events in an otherwise empty table — the partial indexes at work. The claim is timed through the
//! product (`Relay::run_once` with a publisher that refuses the batch), not a copy of its SQL, so it
//! follows whatever statements the relay uses.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use outbox_core::{ClaimedEvent, PublishOutcome, Publisher, Relay};
use outbox_tests::TestDb;

use crate::common::{self, Result};
use crate::report::{Row, fmt_ms, group};
use crate::{Opts, Report};

/// Aggregates the pending events are spread over.
const AGGREGATES: usize = 10_000;
/// The few aggregates of the last mode (heads found by the slow path, batches filled by followers).
const FEW: usize = 10;
/// Claims timed on one table before switching to the other.
const CHUNK: usize = 50;

/// Processed rows, old, inserted in one statement.
const INSERT_PROCESSED: &str = "INSERT INTO outbox_events
        (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
    SELECT 'order', (g % 10000)::text, 'order.placed',
           jsonb_build_object('order_id', g, 'customer', 'customer-' || (g % 997),
                              'total_cents', 1000 + g % 9000),
           now() - interval '1 day', now() - interval '1 day'
      FROM generate_series(1, $1::bigint) AS g";

/// A publisher that fails every call as a whole: the relay then releases the batch without
/// counting an attempt and commits, so the pending events stay as they were. Remembers how many
/// events the last call held (the first wave of the batch).
#[derive(Debug, Clone, Default)]
struct Refuse {
    last: Arc<AtomicUsize>,
}

impl Publisher for Refuse {
    type Error = std::io::Error;

    async fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> std::result::Result<Vec<PublishOutcome>, Self::Error> {
        self.last.store(events.len(), Ordering::Relaxed);
        Err(std::io::Error::other("refused by the benchmark"))
    }
}

/// Times one batch of the product relay (`Relay::run_once`: claim, hand to the refusing publisher,
/// commit with nothing marked). Returns milliseconds and the size of the first wave handed over.
async fn timed_claim(relay: &Relay<Refuse>) -> Result<(f64, usize)> {
    relay.publisher().last.store(0, Ordering::Relaxed);
    let started = Instant::now();
    let outcome = relay.run_once().await;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    match outcome {
        Err(e) if e.kind() == outbox_core::ErrorKind::Publish => {}
        Err(e) => return Err(e.into()),
        Ok(report) => {
            return Err(format!("the claim found nothing to hand over: {report:?}").into());
        }
    }
    Ok((ms, relay.publisher().last.load(Ordering::Relaxed)))
}

/// Replaces the pending events of `db` with `events` over `aggregates` aggregates.
async fn reset_pending(db: &TestDb, events: usize, aggregates: usize) -> Result<()> {
    let c = db.connect().await;
    c.batch_execute("DELETE FROM outbox_events WHERE processed_at IS NULL")
        .await?;
    common::add_pending(&c, events, aggregates).await?;
    c.batch_execute("VACUUM ANALYZE outbox_events").await?;
    Ok(())
}

/// Runs benchmark 5 and adds its rows.
pub async fn run(opts: &Opts, report: &mut Report) -> Result<()> {
    let batch = opts.relay.batch_size;
    let small = TestDb::new().await;
    let big = TestDb::new().await;
    let fill_started = Instant::now();
    {
        let c = big.connect().await;
        c.execute(INSERT_PROCESSED, &[&(opts.growth_rows as i64)])
            .await?;
        common::add_pending(&c, opts.growth_pending, AGGREGATES).await?;
        c.batch_execute("VACUUM ANALYZE outbox_events").await?;
        let c = small.connect().await;
        common::add_pending(&c, opts.growth_pending, AGGREGATES).await?;
        c.batch_execute("VACUUM ANALYZE outbox_events").await?;
    }
    let fill = fill_started.elapsed();

    let relay = |db: &TestDb, ordered: bool| {
        Relay::builder(db.pool().clone(), Refuse::default())
            .batch_size(batch)
            .per_aggregate_order(ordered)
            .build()
    };
    let mut handed = Vec::new();
    for (ordered, aggregates) in [(false, AGGREGATES), (true, AGGREGATES), (true, FEW)] {
        if aggregates != AGGREGATES {
            reset_pending(&small, opts.growth_pending, aggregates).await?;
            reset_pending(&big, opts.growth_pending, aggregates).await?;
        }
        let (on_small, on_big) = (relay(&small, ordered)?, relay(&big, ordered)?);
        // Warm-up: statements prepared, pages cached.
        for _ in 0..CHUNK.min(opts.growth_samples) {
            timed_claim(&on_small).await?;
            timed_claim(&on_big).await?;
        }
        let (mut t_small, mut t_big) = (Vec::new(), Vec::new());
        let mut seen = (0, 0);
        while t_small.len() < opts.growth_samples {
            for _ in 0..CHUNK {
                let (ms, n) = timed_claim(&on_small).await?;
                t_small.push(ms);
                seen.0 = n;
            }
            for _ in 0..CHUNK {
                let (ms, n) = timed_claim(&on_big).await?;
                t_big.push(ms);
                seen.1 = n;
            }
        }
        handed.push(seen);
        let (s, b) = (common::median(&mut t_small), common::median(&mut t_big));
        let what = if ordered {
            format!(
                "order on, pending over {} aggregates",
                group(aggregates as u64)
            )
        } else {
            "order off".to_owned()
        };
        report.rows.push(Row::at_most(
            5,
            format!(
                "relay batch ({what}) with {} processed rows in the table: median",
                group(opts.growth_rows as u64)
            ),
            fmt_ms(b),
            format!("{} without them", fmt_ms(s)),
            b / s,
            1.2,
        ));
    }
    report.notes.push(format!(
        "5: both tables hold {} pending events (over {AGGREGATES}, then {FEW} aggregates); the big \
         one also {} processed rows (filled and VACUUM ANALYZEd in {:.1} s). Each sample is one \
         `Relay::run_once` of the product (claim, hand over, commit) with a publisher that refuses \
         the batch, so nothing is marked and the claim repeats on the same rows; {} samples per \
         table and mode, alternating tables every {CHUNK}. First wave handed over (small / big \
         table): {}.",
        group(opts.growth_pending as u64),
        group(opts.growth_rows as u64),
        fill.as_secs_f64(),
        opts.growth_samples.div_ceil(CHUNK) * CHUNK,
        handed
            .iter()
            .map(|(s, b)| format!("{s} / {b}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(())
}
