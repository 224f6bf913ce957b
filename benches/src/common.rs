//! Shared pieces: the SQS fixture and publisher, backlogs, relay drains, pgbench, statistics.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use outbox_core::{CancellationToken, ClaimedEvent, PublishOutcome, Publisher, Relay};
use outbox_sqs::SqsPublisher;
use outbox_sqs_fixture::SqsFixture;
use outbox_tests::TestDb;

/// The benchmarks' error type: anything, with its message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The benchmarks' result type.
pub type Result<T> = std::result::Result<T, BoxError>;

/// The queue every benchmark publishes to (a standard queue).
pub const QUEUE: &str = "bench-events";

/// The relay settings of the throughput benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelaySettings {
    /// Events claimed per transaction.
    pub batch_size: usize,
    /// Batches in flight (relay workers).
    pub concurrency: usize,
    /// `SendMessageBatch` calls in flight at once (the SQS publisher's limit).
    pub max_in_flight: usize,
}

impl std::fmt::Display for RelaySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "batch_size {}, concurrency {}, SQS max_in_flight {}",
            self.batch_size, self.concurrency, self.max_in_flight
        )
    }
}

/// The SQS test fixture with one queue, recording switched off (it still counts).
///
/// The fixture runs on a thread (and runtime) of its own, so that the CPU it uses can be told apart
/// from the relay's: in production SQS runs elsewhere, here it shares the machine.
pub struct Sqs {
    /// The fixture server.
    pub fixture: SqsFixture,
    /// The URL of [`QUEUE`].
    pub queue_url: String,
    sdk: aws_config::SdkConfig,
    thread: FixtureThread,
}

/// The fixture's thread: stops when dropped.
struct FixtureThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    join: Option<std::thread::JoinHandle<()>>,
    /// `/proc/self/task/<tid>/stat` of the thread, on Linux.
    stat: Option<PathBuf>,
}

impl Drop for FixtureThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(join) = self.join.take() {
            let _ = join.join();
        }
    }
}

/// User + system CPU time in a `/proc/…/stat` file.
fn stat_cpu(path: &std::path::Path) -> Option<Duration> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // The kernel reports clock ticks; USER_HZ is 100 on every Linux this runs on.
    Some(Duration::from_millis((utime + stime) * 10))
}

/// A publisher that counts how many of its `publish` calls run at the same moment: with the relay,
/// how many batches publish concurrently (a batch publishes its waves one after the other).
pub struct Counting<P> {
    inner: P,
    in_flight: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl<P> Counting<P> {
    /// Wraps `inner`.
    pub fn new(inner: P) -> Self {
        Counting {
            inner,
            in_flight: Arc::default(),
            most: Arc::default(),
        }
    }

    /// A handle on the high-water mark, readable after the publisher moved into a relay.
    pub fn most(&self) -> Arc<AtomicUsize> {
        self.most.clone()
    }
}

/// Decrements the in-flight count, also when the publish future is dropped (a timeout).
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<P: Publisher> Publisher for Counting<P> {
    type Error = P::Error;

    async fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> std::result::Result<Vec<PublishOutcome>, Self::Error> {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        let _guard = InFlight(self.in_flight.clone());
        self.most.fetch_max(now, Ordering::Relaxed);
        self.inner.publish(events).await
    }

    async fn check(&self) -> std::result::Result<(), Self::Error> {
        self.inner.check().await
    }
}

/// CPU time (user + system) this process has used so far, when the OS tells (Linux).
pub fn process_cpu() -> Option<Duration> {
    stat_cpu(std::path::Path::new("/proc/self/stat"))
}

impl Sqs {
    /// Starts a fixture server on its own thread and creates the queue.
    pub async fn start() -> Sqs {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let join = std::thread::Builder::new()
            .name("sqs-fixture".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the SQS fixture");
                rt.block_on(async move {
                    let fixture = SqsFixture::start().await;
                    let stat = std::fs::read_link("/proc/thread-self")
                        .ok()
                        .map(|p| PathBuf::from("/proc").join(p).join("stat"));
                    let _ = ready_tx.send((fixture, stat));
                    // Serve until the bench drops its handle.
                    let _ = stop_rx.await;
                });
            })
            .expect("a thread for the SQS fixture");
        let (fixture, stat) = ready_rx.await.expect("the SQS fixture starts");
        fixture.set_recording(false);
        let queue_url = fixture.create_queue(QUEUE);
        let sdk = outbox_tests::sqs::sdk_config_for(&fixture.endpoint_url()).await;
        Sqs {
            fixture,
            queue_url,
            sdk,
            thread: FixtureThread {
                stop: Some(stop_tx),
                join: Some(join),
                stat,
            },
        }
    }

    /// CPU time the fixture's thread has used so far, when the OS tells (Linux).
    pub fn fixture_cpu(&self) -> Option<Duration> {
        stat_cpu(self.thread.stat.as_deref()?)
    }

    /// The product's SQS publisher, aimed at the fixture's queue (no SDK retries).
    pub async fn publisher(&self, max_in_flight: usize) -> Result<SqsPublisher> {
        Ok(SqsPublisher::builder()
            .sdk_config(self.sdk.clone())
            .default_queue(self.queue_url.clone())
            .max_attempts(1)
            .max_in_flight(max_in_flight)
            .build()
            .await?)
    }

    /// A plain `aws-sdk-sqs` client for the fixture (for the naive relay), no SDK retries.
    pub fn client(&self) -> aws_sdk_sqs::Client {
        let conf = aws_sdk_sqs::config::Builder::from(&self.sdk)
            .retry_config(aws_sdk_sqs::config::retry::RetryConfig::standard().with_max_attempts(1))
            .build();
        aws_sdk_sqs::Client::from_conf(conf)
    }
}

/// Inserts `events` pending events (the shape `emit` writes for an `order.placed` event), spread at
/// random (fixed seed) over `aggregates` aggregates, in one statement.
pub async fn add_pending(
    client: &tokio_postgres::Client,
    events: usize,
    aggregates: usize,
) -> Result<()> {
    client.batch_execute("SELECT setseed(0.42)").await?;
    client
        .execute(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
             SELECT 'order', floor(random() * $2::bigint)::bigint::text, 'order.placed',
                    jsonb_build_object('order_id', g, 'customer', 'customer-' || (g % 997),
                                       'total_cents', 1000 + g % 9000)
               FROM generate_series(1, $1::bigint) AS g",
            &[&(events as i64), &(aggregates as i64)],
        )
        .await?;
    Ok(())
}

/// Empties `outbox_events`, fills it with a fresh backlog (see [`add_pending`]) and runs
/// `VACUUM ANALYZE`, so every run starts from the same table.
pub async fn backlog(
    client: &tokio_postgres::Client,
    events: usize,
    aggregates: usize,
) -> Result<()> {
    client
        .batch_execute("TRUNCATE outbox_events RESTART IDENTITY")
        .await?;
    add_pending(client, events, aggregates).await?;
    client.batch_execute("VACUUM ANALYZE outbox_events").await?;
    Ok(())
}

/// How many rows of `outbox_events` are marked processed.
pub async fn processed(client: &tokio_postgres::Client) -> Result<u64> {
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM outbox_events WHERE processed_at IS NOT NULL",
            &[],
        )
        .await?
        .get(0);
    Ok(n as u64)
}

/// Opens `n` connections of the pool at once, so that no run pays for connecting.
pub async fn warm_pool(db: &TestDb, n: usize) -> Result<()> {
    let clients = futures::future::try_join_all((0..n).map(|_| db.pool().get())).await?;
    drop(clients);
    Ok(())
}

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
    let publisher = sqs.publisher(settings.max_in_flight).await?;
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
        .build()?;
    warm_pool(db, settings.concurrency).await?;
    let token = CancellationToken::new();
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
    let events = accepted();
    token.cancel();
    run.await??;
    if !capped {
        let marked = processed(&db.connect().await).await?;
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
    })
}

/// The pgbench script (claim + mark, see `benches/claim_mark.sql`).
pub const CLAIM_MARK_SQL: &str = include_str!("../claim_mark.sql");

/// The pgbench executable: `$PGBENCH`, `pgbench` on the `PATH`, or PostgreSQL's bin directory.
pub fn pgbench_program() -> PathBuf {
    if let Some(p) = std::env::var_os("PGBENCH") {
        return PathBuf::from(p);
    }
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join("pgbench").is_file()))
        .unwrap_or(false);
    if on_path {
        return PathBuf::from("pgbench");
    }
    for version in ["17", "16", "15", "14", "13"] {
        let p = PathBuf::from(format!("/usr/lib/postgresql/{version}/bin/pgbench"));
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("pgbench")
}

/// Runs pgbench with `script` (`-n -M prepared`, `clients` clients on up to `threads` threads,
/// `transactions` transactions each, `-D` variables from `vars`) against `db`. Returns the wall time.
pub async fn pgbench(
    db: &TestDb,
    script: &str,
    vars: &[(&str, String)],
    clients: usize,
    threads: usize,
    transactions: usize,
) -> Result<Duration> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "outbox-bench-{}-{}.sql",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, script)?;
    let mut cmd = std::process::Command::new(pgbench_program());
    cmd.args(["-n", "-M", "prepared", "-f"]).arg(&path);
    for (name, value) in vars {
        cmd.arg("-D").arg(format!("{name}={value}"));
    }
    cmd.args(["-c", &clients.to_string()])
        .args(["-j", &threads.clamp(1, clients.max(1)).to_string()])
        .args(["-t", &transactions.max(1).to_string()])
        .arg(db.url());
    let started = Instant::now();
    let output = tokio::task::spawn_blocking(move || cmd.output()).await;
    let elapsed = started.elapsed();
    let _ = std::fs::remove_file(&path);
    let output = output??;
    if !output.status.success() {
        return Err(format!(
            "pgbench failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(elapsed)
}

/// Runs [`CLAIM_MARK_SQL`] with pgbench against `db` until `events` rows are marked (each client
/// runs `events / (clients × batch)` transactions), and returns the rows marked and the wall time.
pub async fn pgbench_claim_mark(
    db: &TestDb,
    events: usize,
    batch: usize,
    clients: usize,
    threads: usize,
) -> Result<Drain> {
    let per_client = events.div_ceil(clients * batch).max(1);
    let vars = [("batch", batch.to_string())];
    let elapsed = pgbench(db, CLAIM_MARK_SQL, &vars, clients, threads, per_client).await?;
    let events = processed(&db.connect().await).await?;
    Ok(Drain {
        events,
        elapsed,
        capped: false,
        cpu: None,
        fixture_cpu: None,
        max_batches: None,
    })
}

/// The `q`-quantile (0.0–1.0) of `samples` (sorted in place), nearest rank.
pub fn quantile(samples: &mut [f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(f64::total_cmp);
    let rank = (q * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// The median of `samples`.
pub fn median(samples: &mut [f64]) -> f64 {
    quantile(samples, 0.5)
}

/// The median of several figures, with their spread: how every throughput and latency figure of the
/// table is reported (the median of `--rounds` rounds, min and max beside it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The median (the mean of the two middle values for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// How many values.
    pub n: usize,
}

impl Spread {
    /// The spread of `values` (NaN figures for none).
    pub fn of(values: &[f64]) -> Spread {
        let mut v: Vec<f64> = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Spread {
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
                n,
            };
        }
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        }
    }

    /// A rate, e.g. `30 011 ev/s (min 28 100, max 31 900)`; min and max only for several rounds.
    pub fn rate(&self, unit: &str) -> String {
        let median = crate::report::fmt_rate(self.median, unit);
        if self.n <= 1 {
            return median;
        }
        let g = |x: f64| crate::report::group(x.max(0.0).round() as u64);
        format!("{median} (min {}, max {})", g(self.min), g(self.max))
    }

    /// Milliseconds, e.g. `0.42 ms (min 0.40, max 0.47)`; min and max only for several rounds.
    pub fn ms(&self) -> String {
        let median = crate::report::fmt_ms(self.median);
        if self.n <= 1 {
            return median;
        }
        let strip = |x: f64| crate::report::fmt_ms(x).trim_end_matches(" ms").to_owned();
        format!(
            "{median} (min {}, max {})",
            strip(self.min),
            strip(self.max)
        )
    }
}

/// The median rate of several drains: the spread of their rates and the drain whose rate is the
/// median (the lower middle one for an even count), for its other figures.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// The spread of the rates (events per second).
    pub spread: Spread,
    /// The median drain.
    pub drain: Drain,
}

impl std::ops::Deref for Rates {
    type Target = Spread;
    fn deref(&self) -> &Spread {
        &self.spread
    }
}

impl Rates {
    /// The median rate with min and max, e.g. `30 011 ev/s (min 28 100, max 31 900)`.
    pub fn describe(&self, unit: &str) -> String {
        self.spread.rate(unit)
    }
}

/// The median of several drains' rates (see [`Rates`]).
pub fn median_rate(runs: &[Drain]) -> Rates {
    let rates: Vec<f64> = runs.iter().map(Drain::rate).collect();
    let mut sorted: Vec<Drain> = runs.to_vec();
    sorted.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let drain = sorted
        .get(sorted.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(Drain {
            events: 0,
            elapsed: Duration::ZERO,
            capped: false,
            cpu: None,
            fixture_cpu: None,
            max_batches: None,
        });
    Rates {
        spread: Spread::of(&rates),
        drain,
    }
}
