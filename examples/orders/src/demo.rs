//! The demo: orders written by concurrent writers, relayed to an SQS FIFO queue by the in-process
//! relay while they are written, read back by the consumer, checked, and summed up in a
//! [`Report`].
//!
//! [`run`] is the whole flow on a database and a queue that exist already (the `demo` binary makes
//! a fresh database and queue first; the integration test uses throwaway ones).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::{IsTerminal, Write};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use outbox_core::{CancellationToken, OutboxStats, Relay};
use outbox_sqs::SqsPublisher;
use tokio::task::JoinSet;
use tokio_postgres::NoTls;
use uuid::Uuid;

use crate::Error;
use crate::consumer::{Consumer, Delivery, Outcome};
use crate::service::{self, NewLine, NewOrder};

/// The demo's settings. [`DemoConfig::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// The database to use: it must exist; [`run`] applies the outbox's and the example's
    /// migrations to it.
    pub database: tokio_postgres::Config,
    /// The SQS client (the relay's publisher and the consumer both use it).
    pub sqs: aws_sdk_sqs::Client,
    /// The queue the relay publishes the order events to: a FIFO queue, so that each order's
    /// events arrive in order.
    pub queue_url: String,
    /// Orders to place (default 3000).
    pub orders: u32,
    /// Concurrent writers placing orders (default 4).
    pub writers: usize,
    /// Concurrent consumers (default 3).
    pub consumers: usize,
    /// Fault injection: the consumer leaves every `n`th applied message in the queue after
    /// committing, as if it had crashed before deleting it, so it is delivered twice (default 50;
    /// 0 turns it off).
    pub redeliver_every: u64,
    /// How long to wait for the last events once every order was written (default 60 s).
    pub timeout: Duration,
    /// Print a progress line on stderr while running (default off).
    pub progress: bool,
}

impl DemoConfig {
    /// The defaults, for `database` and `queue_url` through `sqs`.
    pub fn new(
        database: tokio_postgres::Config,
        sqs: aws_sdk_sqs::Client,
        queue_url: impl Into<String>,
    ) -> Self {
        DemoConfig {
            database,
            sqs,
            queue_url: queue_url.into(),
            orders: 3000,
            writers: 4,
            consumers: 3,
            redeliver_every: 50,
            timeout: Duration::from_secs(60),
            progress: false,
        }
    }
}

/// What happened, and whether it was right.
#[derive(Debug, Clone)]
pub struct Report {
    /// Orders placed (committed).
    pub orders_placed: u64,
    /// Events written by committed transactions.
    pub events_written: u64,
    /// Events the relay marked published (from the outbox's stats).
    pub events_published: i64,
    /// Distinct events of this run received from the queue.
    pub events_received: u64,
    /// Messages received in all (first deliveries, redeliveries, foreign messages).
    pub messages_received: u64,
    /// Messages the inbox recognised as already processed, and skipped.
    pub duplicates: u64,
    /// Messages the consumer left in the queue on purpose (see [`DemoConfig::redeliver_every`]).
    pub redeliveries_injected: u64,
    /// Events written and never received.
    pub lost: u64,
    /// Events received before an earlier event of the same order (or after a gap).
    pub order_violations: u64,
    /// Messages that were not events of this run (left over in a queue used before), or that the
    /// consumer could not read.
    pub foreign_messages: u64,
    /// The order placed in a transaction that rolled back.
    pub rolled_back_order: Uuid,
    /// Whether its transaction was refused, as intended.
    pub rolled_back_refused: bool,
    /// Whether the rolled-back order's row exists (it must not).
    pub rolled_back_row_exists: bool,
    /// Whether any message about the rolled-back order arrived (none may).
    pub rolled_back_event_received: bool,
    /// Orders whose summary in the read model does not match the order.
    pub stale_summaries: i64,
    /// Commit-to-receive latency, median.
    pub latency_p50: Duration,
    /// Commit-to-receive latency, 99th percentile.
    pub latency_p99: Duration,
    /// Commit-to-receive latency, worst.
    pub latency_max: Duration,
    /// From the first order to the last commit.
    pub write_time: Duration,
    /// The whole run, schema included.
    pub total_time: Duration,
    /// Whether the run gave up waiting for events (see [`DemoConfig::timeout`]).
    pub timed_out: bool,
    /// Errors the consumers recovered from (e.g. a failed receive), and the last one.
    pub consumer_errors: (u64, Option<String>),
    /// The outbox's state at the end (what `outbox stats` prints).
    pub stats: OutboxStats,
}

impl Report {
    /// What went wrong; empty when the run proved what it should.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.lost > 0 {
            problems.push(format!(
                "{} events were written but never received",
                self.lost
            ));
        }
        if self.order_violations > 0 {
            problems.push(format!(
                "{} events arrived out of order",
                self.order_violations
            ));
        }
        if !self.rolled_back_refused {
            problems.push("the order meant to roll back was committed".into());
        }
        if self.rolled_back_row_exists {
            problems.push("the rolled-back order's row exists".into());
        }
        if self.rolled_back_event_received {
            problems.push("an event of the rolled-back order arrived".into());
        }
        if self.stale_summaries > 0 {
            problems.push(format!(
                "{} orders' summaries do not match the orders",
                self.stale_summaries
            ));
        }
        if self.duplicates < self.redeliveries_injected {
            problems.push(format!(
                "{} messages were left in the queue but only {} came back as duplicates",
                self.redeliveries_injected, self.duplicates
            ));
        }
        if self.stats.pending > 0 || self.stats.dead_letters > 0 {
            problems.push(format!(
                "the outbox still has {} pending events and {} dead letters",
                self.stats.pending, self.stats.dead_letters
            ));
        }
        problems
    }

    /// Whether nothing went wrong.
    pub fn ok(&self) -> bool {
        self.problems().is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
        let secs = self.write_time.as_secs_f64().max(f64::EPSILON);
        writeln!(f, "orders placed          {:>8}", self.orders_placed)?;
        writeln!(
            f,
            "events written         {:>8}   ({:.0} events/s, {:.1} s)",
            self.events_written,
            self.events_written as f64 / secs,
            self.write_time.as_secs_f64()
        )?;
        writeln!(f, "events published       {:>8}", self.events_published)?;
        writeln!(
            f,
            "events received        {:>8}   ({} messages in all)",
            self.events_received, self.messages_received
        )?;
        writeln!(
            f,
            "duplicates             {:>8}   (redelivered on purpose: {}; each skipped by the inbox)",
            self.duplicates, self.redeliveries_injected
        )?;
        writeln!(f, "lost                   {:>8}", self.lost)?;
        writeln!(f, "order violations       {:>8}", self.order_violations)?;
        if self.foreign_messages > 0 {
            writeln!(f, "foreign messages       {:>8}", self.foreign_messages)?;
        }
        writeln!(
            f,
            "stale summaries        {:>8}   (read model vs. orders)",
            self.stale_summaries
        )?;
        let rolled_back = if self.rolled_back_refused
            && !self.rolled_back_row_exists
            && !self.rolled_back_event_received
        {
            "rolled back: no row, no event"
        } else {
            "WRONG"
        };
        writeln!(
            f,
            "rolled-back order      {rolled_back} ({})",
            self.rolled_back_order
        )?;
        writeln!(
            f,
            "latency commit→receive p50 {}   p99 {}   max {}",
            ms(self.latency_p50),
            ms(self.latency_p99),
            ms(self.latency_max)
        )?;
        write!(
            f,
            "time                   {:.1} s{}",
            self.total_time.as_secs_f64(),
            if self.timed_out {
                "   (gave up waiting)"
            } else {
                ""
            }
        )?;
        if self.consumer_errors.0 > 0 {
            write!(
                f,
                "\nconsumer errors        {:>8}   (last: {})",
                self.consumer_errors.0,
                self.consumer_errors.1.as_deref().unwrap_or("-")
            )?;
        }
        Ok(())
    }
}

/// Formats `stats` the way `outbox stats` does.
pub fn format_stats(s: &OutboxStats) -> String {
    let age = s
        .oldest_pending_age_secs
        .map_or_else(|| "-".to_string(), |a| format!("{a:.1}s"));
    format!(
        "pending                  {:>10}\n  due now                {:>10}\n  waiting for retry      {:>10}\n\
         dead letters             {:>10}\noldest pending age       {age:>10}\n\
         blocked aggregates       {:>10}\npublished (last hour)    {:>10}",
        s.pending,
        s.due_now,
        s.waiting_retry,
        s.dead_letters,
        s.blocked_aggregates,
        s.published_last_hour
    )
}

/// Drops and creates database `name` on the server of `admin_url` (a connection string naming a
/// database the user may connect to, e.g. `postgres://postgres@127.0.0.1:5432/postgres`), and
/// returns the settings to connect to the new database. `name` may hold lower-case ASCII letters,
/// digits and `_`.
pub async fn recreate_database(
    admin_url: &str,
    name: &str,
) -> Result<tokio_postgres::Config, Error> {
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        return Err(format!("`{name}` is not a plain lower-case database name").into());
    }
    let admin_config = tokio_postgres::Config::from_str(admin_url)?;
    let admin = connect(&admin_config).await?;
    // Database names cannot be bind parameters; `name` was checked above.
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await?;
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await?;
    let mut config = admin_config;
    config.dbname(name);
    Ok(config)
}

/// Creates a FIFO queue named `name` (which must end in `.fifo`) and returns its URL. The relay
/// sets each message's deduplication id (the event id), so content-based deduplication is off.
pub async fn create_fifo_queue(sqs: &aws_sdk_sqs::Client, name: &str) -> Result<String, Error> {
    let out = sqs
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .send()
        .await?;
    Ok(out
        .queue_url()
        .ok_or("CreateQueue returned no queue URL")?
        .to_owned())
}

/// Connects with `config`, driving the connection on a task.
async fn connect(config: &tokio_postgres::Config) -> Result<tokio_postgres::Client, Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// What the order with number `i` goes through: placed with 1–3 lines, then 0–2 lines added, a line
/// removed from every fourth order, every other order shipped.
fn order_plan(i: u32) -> (NewOrder, Vec<NewLine>, bool, bool) {
    let line = |j: u32| NewLine {
        sku: format!("SKU-{:03}", (i * 7 + j) % 200),
        quantity: 1 + ((i + j) % 4) as i32,
        unit_price_cents: 199 + i64::from((i * 31 + j * 17) % 5000),
    };
    let order = NewOrder {
        id: Uuid::new_v4(),
        customer: format!("customer-{:02}", i % 97),
        lines: (0..1 + i % 3).map(line).collect(),
    };
    let added = (10..10 + i % 3).map(line).collect();
    (order, added, i % 4 == 1, i % 2 == 0)
}

/// Commit and receive times of the events, by id.
#[derive(Default)]
struct Times {
    /// Event id → when its transaction committed.
    committed: HashMap<Uuid, Instant>,
    /// Event id → when it was first received.
    received: HashMap<Uuid, Instant>,
    /// Events both committed and received.
    matched: u64,
}

/// What the writers and consumers share.
#[derive(Default)]
struct Tally {
    times: Mutex<Times>,
    orders_placed: AtomicU64,
    messages: AtomicU64,
    duplicates: AtomicU64,
    left_in_queue: AtomicU64,
    unreadable: AtomicU64,
    out_of_order: Mutex<HashSet<Uuid>>,
    rolled_back_order: Mutex<String>,
    rolled_back_event_received: AtomicBool,
    consumer_errors: AtomicU64,
    last_consumer_error: Mutex<Option<String>>,
}

impl Tally {
    fn committed(&self, event_id: Uuid) {
        let now = Instant::now();
        let mut times = self.times.lock().unwrap();
        times.committed.insert(event_id, now);
        // The message may have been received before this writer got here.
        if times.received.contains_key(&event_id) {
            times.matched += 1;
        }
    }

    fn record(&self, d: &Delivery) {
        self.messages.fetch_add(1, Ordering::Relaxed);
        if d.aggregate_id == *self.rolled_back_order.lock().unwrap() {
            self.rolled_back_event_received
                .store(true, Ordering::Relaxed);
        }
        if d.left_in_queue {
            self.left_in_queue.fetch_add(1, Ordering::Relaxed);
        }
        match d.outcome {
            Outcome::Duplicate => {
                self.duplicates.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Malformed | Outcome::Ignored => {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::OutOfOrder | Outcome::Applied => {}
        }
        if let Some(id) = d.event_id {
            if d.outcome == Outcome::OutOfOrder {
                self.out_of_order.lock().unwrap().insert(id);
            }
            let mut times = self.times.lock().unwrap();
            let Times {
                committed,
                received,
                matched,
            } = &mut *times;
            match received.entry(id) {
                Entry::Vacant(entry) => {
                    entry.insert(d.received_at);
                    if committed.contains_key(&id) {
                        *matched += 1;
                    }
                }
                // Keep the first delivery's time.
                Entry::Occupied(mut entry) => {
                    let first = (*entry.get()).min(d.received_at);
                    entry.insert(first);
                }
            }
        }
    }

    /// (events written, events of this run received)
    fn progress(&self) -> (u64, u64) {
        let times = self.times.lock().unwrap();
        (times.committed.len() as u64, times.matched)
    }
}

/// Runs the demo on `config.database` and `config.queue_url` and reports what happened.
///
/// 1. Applies the outbox's schema ([`outbox_core::migrate`]) and the example's ([`crate::migrate()`]).
/// 2. Starts the relay (with LISTEN wake-ups) publishing `order.*` events to the queue, and the
///    consumers.
/// 3. Places `config.orders` orders on `config.writers` concurrent writers — each order is several
///    transactions, each emitting one event — plus one order whose transaction rolls back.
/// 4. Waits until every committed event was received (or `config.timeout` after the last write),
///    lets the consumers drain for a moment, stops everything, and checks the read model.
///
/// `Err` when the demo could not run at all (schema, relay start-up, an unexpected write failure);
/// what it found is in the [`Report`] ([`Report::ok`]).
pub async fn run(config: DemoConfig) -> Result<Report, Error> {
    let started = Instant::now();
    let mut client = connect(&config.database).await?;
    outbox_core::migrate(&mut client).await?;
    crate::migrate(&mut client).await?;

    let pool_size = config.writers + config.consumers + 4 + 2;
    // TCP keepalives, a TCP user timeout and pool time-outs sized to the relay's publish timeout.
    let publish_timeout = outbox_core::RelayConfig::default().publish_timeout;
    let mut database = config.database.clone();
    outbox_core::connection::harden(&mut database, publish_timeout);
    let pool = outbox_core::connection::pool_timeouts(
        Pool::builder(Manager::from_config(
            database,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        ))
        .max_size(pool_size),
        publish_timeout,
    )
    .build()?;

    // The relay: in-process, woken by NOTIFY, publishing every `order.*` event to the FIFO queue.
    let publisher = SqsPublisher::builder()
        .client(config.sqs.clone())
        .route("order.*", &config.queue_url)
        .build()
        .await?;
    let relay = Relay::builder(pool.clone(), publisher)
        .listen(config.database.clone())
        .build()?;
    let relay_stop = CancellationToken::new();
    let mut relay_task = tokio::spawn({
        let stop = relay_stop.clone();
        async move { relay.run(stop).await }
    });

    let tally = Arc::new(Tally::default());
    let rolled_back_order = Uuid::new_v4();
    *tally.rolled_back_order.lock().unwrap() = rolled_back_order.to_string();

    // The consumers.
    let consumers_stop = CancellationToken::new();
    let consumer = Arc::new(
        Consumer::new(config.sqs.clone(), &config.queue_url, pool.clone())
            .skip_delete_every(config.redeliver_every),
    );
    let mut consumers = JoinSet::new();
    for _ in 0..config.consumers.max(1) {
        let (consumer, tally, stop) = (consumer.clone(), tally.clone(), consumers_stop.clone());
        consumers.spawn(async move {
            while !stop.is_cancelled() {
                match consumer.poll().await {
                    Ok(deliveries) => deliveries.iter().for_each(|d| tally.record(d)),
                    Err(e) => {
                        tally.consumer_errors.fetch_add(1, Ordering::Relaxed);
                        *tally.last_consumer_error.lock().unwrap() = Some(crate::error_chain(&*e));
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        });
    }

    // The writers.
    let writes_started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let rolled_back_refused = Arc::new(AtomicBool::new(false));
    let mut writers = JoinSet::new();
    for _ in 0..config.writers.max(1) {
        let (pool, tally, next, refused) = (
            pool.clone(),
            tally.clone(),
            next.clone(),
            rolled_back_refused.clone(),
        );
        let orders = config.orders;
        writers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Ok(i) = u32::try_from(i) else { break };
                if i == orders / 2 {
                    // Halfway: an order whose second line is invalid. `place_order` has emitted
                    // `OrderPlaced` when the line is refused; the rollback takes the event away.
                    let bad = NewOrder {
                        id: rolled_back_order,
                        customer: "customer-rollback".into(),
                        lines: vec![
                            NewLine {
                                sku: "SKU-001".into(),
                                quantity: 1,
                                unit_price_cents: 100,
                            },
                            NewLine {
                                sku: "SKU-002".into(),
                                quantity: 0,
                                unit_price_cents: 100,
                            },
                        ],
                    };
                    if service::place_order(&pool, &bad).await.is_err() {
                        refused.store(true, Ordering::Relaxed);
                    }
                }
                if i >= orders {
                    break;
                }
                let (order, added, remove_first, ship) = order_plan(i);
                tally.committed(service::place_order(&pool, &order).await?);
                tally.orders_placed.fetch_add(1, Ordering::Relaxed);
                for line in &added {
                    tally.committed(service::add_line(&pool, order.id, line).await?);
                }
                if remove_first {
                    tally.committed(service::remove_line(&pool, order.id, 1).await?);
                }
                if ship {
                    tally.committed(service::ship_order(&pool, order.id, "DHL").await?);
                }
            }
            Ok::<(), Error>(())
        });
    }

    // Watch: progress, completion, failures.
    let progress = Progress::new(config.progress, config.orders);
    let mut writes_done: Option<Instant> = None;
    let mut timed_out = false;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            relay_result = &mut relay_task => {
                consumers_stop.cancel();
                writers.abort_all();
                return Err(match relay_result {
                    Ok(Err(e)) => format!("the relay stopped: {}", crate::error_chain(&e)).into(),
                    Ok(Ok(())) => "the relay stopped".into(),
                    Err(e) => format!("the relay panicked: {e}").into(),
                });
            }
        }
        while let Some(result) = writers.try_join_next() {
            if let Err(e) = result.map_err(Error::from).and_then(|r| r) {
                relay_stop.cancel();
                consumers_stop.cancel();
                writers.abort_all();
                return Err(format!("a writer failed: {}", crate::error_chain(&*e)).into());
            }
        }
        let (written, received) = tally.progress();
        if writes_done.is_none() && writers.is_empty() {
            writes_done = Some(Instant::now());
        }
        let published = match progress.due() {
            true => outbox_core::stats(&client)
                .await
                .map(|s| s.published_last_hour)
                .ok(),
            false => None,
        };
        progress.show(
            tally.orders_placed.load(Ordering::Relaxed),
            written,
            published,
            received,
        );
        let Some(done_at) = writes_done else { continue };
        let redelivered =
            tally.duplicates.load(Ordering::Relaxed) >= tally.left_in_queue.load(Ordering::Relaxed);
        if received >= written && redelivered {
            break;
        }
        if done_at.elapsed() > config.timeout {
            timed_out = true;
            break;
        }
    }
    let write_time = writes_done.unwrap_or_else(Instant::now) - writes_started;
    // A last moment for anything still on its way (nothing should be).
    tokio::time::sleep(Duration::from_millis(500)).await;
    consumers_stop.cancel();
    while consumers.join_next().await.is_some() {}
    relay_stop.cancel();
    relay_task.await??;
    progress.finish();

    // Check the end state.
    let stats = outbox_core::stats(&client).await?;
    let stale_summaries = crate::consumer::count_stale_summaries(&pool).await?;
    let rolled_back_row_exists = service::find_order(&pool, rolled_back_order)
        .await?
        .is_some();

    let times = tally.times.lock().unwrap();
    let (committed, received) = (&times.committed, &times.received);
    let mut latencies: Vec<Duration> = committed
        .iter()
        .filter_map(|(id, at)| received.get(id).map(|r| r.saturating_duration_since(*at)))
        .collect();
    latencies.sort_unstable();
    let percentile = |p: usize| {
        latencies
            .get((latencies.len() * p).div_ceil(100).saturating_sub(1))
            .copied()
            .unwrap_or_default()
    };
    let events_received = latencies.len() as u64;
    let foreign = received
        .keys()
        .filter(|id| !committed.contains_key(id))
        .count() as u64;
    let order_violations = tally
        .out_of_order
        .lock()
        .unwrap()
        .iter()
        .filter(|id| committed.contains_key(id))
        .count() as u64;

    Ok(Report {
        orders_placed: tally.orders_placed.load(Ordering::Relaxed),
        events_written: committed.len() as u64,
        events_published: stats.published_last_hour,
        events_received,
        messages_received: tally.messages.load(Ordering::Relaxed),
        duplicates: tally.duplicates.load(Ordering::Relaxed),
        redeliveries_injected: tally.left_in_queue.load(Ordering::Relaxed),
        lost: committed.len() as u64 - events_received,
        order_violations,
        foreign_messages: foreign + tally.unreadable.load(Ordering::Relaxed),
        rolled_back_order,
        rolled_back_refused: rolled_back_refused.load(Ordering::Relaxed),
        rolled_back_row_exists,
        rolled_back_event_received: tally.rolled_back_event_received.load(Ordering::Relaxed),
        stale_summaries,
        latency_p50: percentile(50),
        latency_p99: percentile(99),
        latency_max: latencies.last().copied().unwrap_or_default(),
        write_time,
        total_time: started.elapsed(),
        timed_out,
        consumer_errors: (
            tally.consumer_errors.load(Ordering::Relaxed),
            tally.last_consumer_error.lock().unwrap().clone(),
        ),
        stats,
    })
}

/// The progress line: rewritten in place on a terminal, a line every 2 s otherwise.
struct Progress {
    enabled: bool,
    terminal: bool,
    orders: u32,
    last: Mutex<Option<Instant>>,
    published: Mutex<i64>,
}

impl Progress {
    fn new(enabled: bool, orders: u32) -> Self {
        Progress {
            enabled,
            terminal: std::io::stderr().is_terminal(),
            orders,
            last: Mutex::new(None),
            published: Mutex::new(0),
        }
    }

    fn interval(&self) -> Duration {
        if self.terminal {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(2)
        }
    }

    /// Whether a line is due now.
    fn due(&self) -> bool {
        self.enabled
            && self
                .last
                .lock()
                .unwrap()
                .is_none_or(|at| at.elapsed() >= self.interval())
    }

    fn show(&self, orders: u64, written: u64, published: Option<i64>, received: u64) {
        if !self.due() {
            return;
        }
        *self.last.lock().unwrap() = Some(Instant::now());
        let mut last_published = self.published.lock().unwrap();
        if let Some(p) = published {
            *last_published = p;
        }
        let line = format!(
            "orders {orders:>6}/{}   events written {written:>7}   published {:>7}   received {received:>7}",
            self.orders, *last_published
        );
        let mut err = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(err, "\r{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }

    fn finish(&self) {
        if self.enabled && self.terminal {
            eprintln!();
        }
    }
}
