//! Benchmark 10: write amplification (issue 18, goal 2). What one event costs the database in WAL
//! from emit to acknowledgement — the writers' inserts, then the relay's claim and mark — with the
//! schema as migration V5 leaves it (UUIDv7 ids from the emitter, no `seq` index, room on each page
//! for the mark) against the schema before it (random v4 ids from the column default, `seq` UNIQUE,
//! full pages), in the same run. Both tables first hold a history of published rows (what a
//! retention keeps), so that the primary key is larger than the pages a checkpoint cycle touches.
//!
//! WAL is counted per database with `pg_walinspect` (the records whose blocks belong to the
//! benchmark's database; commit records, the same for every schema, are left out), so other
//! databases' activity on the server does not count. Each phase starts right after a `CHECKPOINT`;
//! another checkpoint during a phase (any `DROP DATABASE` on the server requests one) makes that
//! phase write more full pages, most of all with random ids: run it on a quiet server.

use std::time::Duration;

use outbox_core::Emitter;
use outbox_tests::TestDb;
use tokio_postgres::types::Json;

use crate::common::{self, Result};
use crate::emit::OrderPlaced;
use crate::report::{Row, group};
use crate::{Opts, Report};

/// The schema before migration V5, recreated on top of the current one.
const BEFORE_V5: &str = "ALTER TABLE outbox_events ALTER COLUMN id SET DEFAULT gen_random_uuid();
     ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_seq_key UNIQUE (seq);
     ALTER TABLE outbox_events RESET (fillfactor);";

/// The row `emit` wrote before V5: the id from the column default.
const INSERT_BEFORE: &str =
    "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, metadata)
     VALUES ($1, $2, $3, $4, '{}') RETURNING id";

/// Published rows kept from the past (a retention's worth), with the table's default ids.
const HISTORY: &str = "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
     SELECT 'order', (g % 10000)::text, 'order.placed',
            jsonb_build_object('order_id', g, 'customer', 'customer-' || (g % 997), 'total_cents', 1000 + g % 9000),
            now()
       FROM generate_series(1, $1::bigint) AS g";

/// WAL bytes of this database's blocks between two LSNs.
const WAL_OF_THIS_DATABASE: &str = "SELECT coalesce(sum(record_length), 0)::bigint
       FROM pg_get_wal_records_info($1::text::pg_lsn, $2::text::pg_lsn)
      WHERE block_ref LIKE '% rel %/' || (SELECT oid FROM pg_database WHERE datname = current_database()) || '/%'";

/// The schema measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schema {
    /// Before migration V5.
    Before,
    /// As migrated now.
    Now,
    /// As migrated now, with a relay whose retention is zero: acknowledgements delete.
    NowDeleting,
}

/// What one schema cost.
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    /// WAL bytes of the writers' transactions.
    emit: u64,
    /// WAL bytes of the relay draining them (claim, mark).
    relay: u64,
    /// Rows updated and, of those, HOT updates (`pg_stat_user_tables`).
    updates: i64,
    hot: i64,
    /// Table + indexes after the run, bytes.
    size: i64,
}

impl Cost {
    fn per_event(bytes: u64, events: usize) -> f64 {
        bytes as f64 / events.max(1) as f64
    }
}

/// Runs benchmark 10: both schemas, one after the other, and adds its rows to `report`.
pub async fn run(opts: &Opts, report: &mut Report) -> Result<()> {
    let n = opts.wal_events;
    let before = measure(opts, Schema::Before).await?;
    let now = measure(opts, Schema::Now).await?;
    let deleting = measure(opts, Schema::NowDeleting).await?;
    eprintln!("[bench]   WAL: before {before:?}; now {now:?}; deleting {deleting:?}");
    let total = |c: &Cost| Cost::per_event(c.emit + c.relay, n);
    let bytes = |b: f64| format!("{} B/event", group(b.round() as u64));
    report.rows.push(Row::at_most(
        10,
        format!(
            "WAL per event, emit + claim + mark ({} events by {} writers, {} published rows kept)",
            group(n as u64),
            opts.emit_writers,
            group(opts.wal_history as u64)
        ),
        bytes(total(&now)),
        format!("{} before V5", bytes(total(&before))),
        total(&now) / total(&before),
        0.7,
    ));
    report.rows.push(Row::info(
        10,
        "WAL per event: the writers' inserts",
        bytes(Cost::per_event(now.emit, n)),
        format!("{} before V5", bytes(Cost::per_event(before.emit, n))),
        now.emit as f64 / before.emit.max(1) as f64,
    ));
    report.rows.push(Row::info(
        10,
        "WAL per event: the relay's claim and mark",
        bytes(Cost::per_event(now.relay, n)),
        format!("{} before V5", bytes(Cost::per_event(before.relay, n))),
        now.relay as f64 / before.relay.max(1) as f64,
    ));
    report.rows.push(Row::info(
        10,
        "WAL per event, emit + claim + delete (retention 0: acknowledgements delete; no history kept)",
        bytes(total(&deleting)),
        format!("{} before V5", bytes(total(&before))),
        total(&deleting) / total(&before),
    ));
    let hot = |c: &Cost| 100.0 * c.hot as f64 / c.updates.max(1) as f64;
    report.rows.push(Row::info(
        10,
        "HOT updates among the marks (pg_stat_user_tables)",
        format!("{:.0} % of {}", hot(&now), group(now.updates as u64)),
        format!("{:.0} % before V5", hot(&before)),
        hot(&now) / hot(&before).max(1.0),
    ));
    report.rows.push(Row::info(
        10,
        "table + indexes after the run",
        format!("{:.1} MB", now.size as f64 / 1e6),
        format!("{:.1} MB before V5", before.size as f64 / 1e6),
        now.size as f64 / before.size.max(1) as f64,
    ));
    Ok(())
}

/// One schema: history, checkpoint, the writers' events, the relay's drain; WAL for each.
async fn measure(opts: &Opts, schema: Schema) -> Result<Cost> {
    let db = TestDb::plain().await;
    let setup = db.connect().await;
    setup
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        .await
        .map_err(|e| format!("benchmark 10 needs pg_walinspect (PostgreSQL ≥ 15 contrib): {e}"))?;
    // Keeps the WAL from here on until `setup` closes (a checkpoint, e.g. any DROP DATABASE on the
    // server, would otherwise recycle it before it is read).
    setup
        .execute(
            "SELECT pg_create_physical_replication_slot(current_database(), true, true)",
            &[],
        )
        .await?;
    if schema == Schema::Before {
        setup.batch_execute(BEFORE_V5).await?;
    }
    let mut settings = opts.relay;
    if schema == Schema::NowDeleting {
        settings.retention = Some(Duration::ZERO);
    }
    // A zero retention keeps no history: its relay would delete one at start.
    if schema != Schema::NowDeleting {
        setup
            .execute(HISTORY, &[&(opts.wal_history as i64)])
            .await?;
    }
    setup.batch_execute("VACUUM ANALYZE outbox_events").await?;
    common::warm_pool(&db, opts.emit_writers).await?;
    setup.batch_execute("CHECKPOINT").await?;

    let start = flushed(&setup).await?;
    let per_writer = opts.wal_events / opts.emit_writers;
    let mut tasks = Vec::new();
    for w in 0..opts.emit_writers {
        let pool = db.pool().clone();
        tasks.push(tokio::spawn(async move {
            write(&pool, schema, w * per_writer, per_writer).await
        }));
    }
    for t in tasks {
        t.await?
            .map_err(|e| format!("{schema:?}: a writer failed: {e:?}"))?;
    }
    // Each phase starts after a checkpoint, as in a steady state where checkpoints come every few
    // minutes: the first change to a page after one writes the whole page to the WAL.
    setup.batch_execute("CHECKPOINT").await?;
    let emitted = flushed(&setup).await?;
    let events = per_writer * opts.emit_writers;
    common::drain_noop(&db, settings, true, events, Duration::from_secs(600))
        .await
        .map_err(|e| format!("{schema:?}: {e:?}"))?;
    let drained = flushed(&setup).await?;

    let (updates, hot) = if schema == Schema::NowDeleting {
        (0, 0)
    } else {
        marks(&setup, events as i64).await?
    };
    let size: i64 = setup
        .query_one("SELECT pg_total_relation_size('outbox_events')", &[])
        .await?
        .get(0);
    Ok(Cost {
        emit: wal_between(&setup, &start, &emitted).await?,
        relay: wal_between(&setup, &emitted, &drained).await?,
        updates,
        hot,
        size,
    })
}

/// `n` business-sized transactions, one event each, as the product writes them with `schema`.
async fn write(
    pool: &deadpool_postgres::Pool,
    schema: Schema,
    offset: usize,
    n: usize,
) -> Result<()> {
    let emitter = Emitter::new();
    let mut client = pool.get().await?;
    for i in offset..offset + n {
        let event = OrderPlaced {
            order_id: i as i64,
            customer: format!("customer-{}", i % 997),
            total_cents: 1000 + (i % 9000) as i64,
        };
        let tx = client.transaction().await?;
        match schema {
            Schema::Now | Schema::NowDeleting => {
                emitter.emit(&tx, &event).await?;
            }
            Schema::Before => {
                let statement = tx.prepare_cached(INSERT_BEFORE).await?;
                let aggregate_id = event.order_id.to_string();
                tx.query_one(
                    &statement,
                    &[&"order", &aggregate_id, &"order.placed", &Json(&event)],
                )
                .await?;
            }
        }
        tx.commit().await?;
    }
    Ok(())
}

async fn flushed(client: &tokio_postgres::Client) -> Result<String> {
    Ok(client
        .query_one("SELECT pg_current_wal_flush_lsn()::text", &[])
        .await?
        .get(0))
}

async fn wal_between(client: &tokio_postgres::Client, from: &str, to: &str) -> Result<u64> {
    let bytes: i64 = client
        .query_one(WAL_OF_THIS_DATABASE, &[&from, &to])
        .await
        .map_err(|e| format!("reading the WAL from {from} to {to}: {e:?}"))?
        .get(0);
    Ok(bytes.max(0) as u64)
}

/// Updates and HOT updates of `outbox_events`, once the relay's sessions reported at least
/// `expected` updates (statistics reach the view up to a few seconds late).
async fn marks(client: &tokio_postgres::Client, expected: i64) -> Result<(i64, i64)> {
    let mut last = (0, 0);
    for _ in 0..60 {
        client
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await?;
        let row = client
            .query_one(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'outbox_events'",
                &[],
            )
            .await?;
        last = (row.get(0), row.get(1));
        if last.0 >= expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(last)
}
