//! The relay: claims committed events, publishes them, marks them processed.

mod ack;
mod batch;
mod claim;
mod clip;
mod config;
mod database_watch;
mod due;
mod gauges;
mod guard;
mod held;
mod helpers;
mod housekeeping;
mod in_use;
mod isolate;
pub(crate) mod key_data;
mod line_budget;
mod listener;
mod outage;
mod outcome;
pub(crate) mod pool_sessions;
mod session;
mod settle;
mod slots;
pub(crate) mod stall_watch;
mod transaction;
mod waiting;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use helpers::HelperTasks;
use tokio_util::sync::CancellationToken;

pub use batch::BatchReport;
pub use config::{
    CLAIM_IDLE_MARGIN, MAX_BACKOFF, MAX_BATCH_MAX_BYTES, MAX_BATCH_SIZE, MAX_RETENTION,
    MAX_TIMEOUT, MIN_INTERVAL, RelayConfig,
};
pub(crate) use guard::panic_message;
pub use listener::LISTENER_APPLICATION_NAME;
pub(crate) use pool_sessions::PoolSessions;
pub(crate) use session::{ANSWER_WITHIN, Session};
pub(crate) use stall_watch::{Patience, Watching, watched_session};

/// The `application_name` of the connections of a relay's pool
/// ([`PgConnector::relay_pool`](crate::connect::PgConnector::relay_pool)), unless the connection
/// string sets one; its LISTEN connection and the one advertising waiting have their own
/// ([`LISTENER_APPLICATION_NAME`], [`WAITING_APPLICATION_NAME`]).
pub const RELAY_APPLICATION_NAME: &str = "outbox-relay";
use listener::ListenTarget;
pub use outcome::MAX_LAST_ERROR_CHARS;
pub use waiting::{WAITING_APPLICATION_NAME, WAITING_LOCK};
pub use worker::{MAX_WORKER_RESTARTS, WORKER_RESTART_WINDOW};

use crate::backoff::RetryPolicy;
use crate::error::{Error, ErrorKind};
use crate::metrics::RelayMetrics;
use crate::publisher::Publisher;

/// Publishes committed outbox events through a [`Publisher`].
///
/// Built with [`Relay::builder`]. [`run`](Relay::run) processes batches on
/// [`concurrency`](RelayConfig::concurrency) workers until cancelled; each batch is claimed with
/// `FOR UPDATE SKIP LOCKED`, published, and acknowledged in the same transaction, so several relays
/// (tasks or processes) can share one table. Delivery is at-least-once: a crash between publish and
/// commit publishes the batch again.
pub struct Relay<P> {
    inner: Arc<Inner<P>>,
}

impl<P> Clone for Relay<P> {
    fn clone(&self) -> Self {
        Relay {
            inner: Arc::clone(&self.inner),
        }
    }
}

pub(crate) struct Inner<P> {
    pool: deadpool_postgres::Pool,
    /// The server sessions of the pool's connections (`pool_sessions.rs`).
    pool_sessions: Arc<pool_sessions::PoolSessions>,
    publisher: P,
    config: RelayConfig,
    policy: RetryPolicy,
    listen: Option<crate::connect::PgConnector>,
    /// The connector of the connection that advertises waiting (with `listen`).
    waiting: Option<crate::connect::PgConnector>,
    metrics: Option<RelayMetrics>,
    /// What the relay's claims share: row size estimate, pacing, the heads in flight.
    claims: claim::ClaimState,
    /// Wakes one idle worker to claim (the worker loop in `worker.rs` says when): a notification,
    /// the claim after the waiting barrier, a full claim that leaves more behind.
    wake: Arc<tokio::sync::Notify>,
    /// Whether an idle worker keeps the fallback poll's timer: one does (`worker.rs`).
    polling: std::sync::atomic::AtomicBool,
    /// Wakes an idle worker when events this relay put back are due (`due.rs`).
    due: Arc<due::DueWakes>,
    /// Wakes every worker backing off after failures: the database answers again.
    database_back: Arc<tokio::sync::Notify>,
    /// The workers before the LISTEN and waiting connections, when slots are short (`slots.rs`).
    slots: slots::Slots,
    /// Whether the watch for the database coming back runs (`database_watch.rs`)…
    database_watch: std::sync::atomic::AtomicBool,
    /// …and whether a batch failed since its last look began.
    database_watch_wanted: std::sync::atomic::AtomicBool,
    /// Whether the database's encoding stores any text (UTF8, SQL_ASCII); read with the first
    /// failure to record (`batch.rs`, `storable`).
    any_text: tokio::sync::OnceCell<bool>,
    housekeeping_interval: Duration,
    /// Batches failing as a whole, logged once per outage (`outage.rs`).
    outage: outage::Outage,
    /// Retried events logged one by one, a few at a time across batches (`line_budget.rs`).
    retry_warnings: line_budget::LineBudget,
    /// Dead-lettered events logged one by one, a few at a time across batches.
    dead_letter_lines: line_budget::LineBudget,
}

/// Builds a [`Relay`]: takes and returns `self`, validates in [`build`](RelayBuilder::build).
pub struct RelayBuilder<P> {
    pool: deadpool_postgres::Pool,
    publisher: P,
    config: RelayConfig,
    listen: Option<ListenTarget>,
    metrics: Option<RelayMetrics>,
    housekeeping_interval: Duration,
}

impl<P: Publisher> RelayBuilder<P> {
    /// How often housekeeping runs (default every minute). For tests; not public API.
    #[doc(hidden)]
    pub fn housekeeping_interval(mut self, every: Duration) -> Self {
        self.housekeeping_interval = every;
        self
    }

    /// Replaces every setting at once (e.g. with [`RelayConfig::from_env`]).
    pub fn config(mut self, config: RelayConfig) -> Self {
        self.config = config;
        self
    }

    /// Events claimed per transaction (default 100).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.config.batch_size = n;
        self
    }

    /// Payload bytes claimed per transaction, beyond the first event (default 4 MiB).
    pub fn batch_max_bytes(mut self, n: usize) -> Self {
        self.config.batch_max_bytes = n;
        self
    }

    /// Attempts before an event is dead-lettered (default 10).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.config.max_attempts = n;
        self
    }

    /// Retry delays: from `base`, doubling, up to `cap` (defaults 1 s and 5 min).
    pub fn backoff(mut self, base: Duration, cap: Duration) -> Self {
        self.config.backoff_base = base;
        self.config.backoff_cap = cap;
        self
    }

    /// Fraction of each retry delay removed at random, 0.0–1.0 (default 0.2).
    pub fn backoff_jitter(mut self, jitter: f64) -> Self {
        self.config.backoff_jitter = jitter;
        self
    }

    /// Fallback poll interval (default 2 s).
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.config.poll_interval = d;
        self
    }

    /// Longest time one batch may spend publishing (default 30 s).
    pub fn publish_timeout(mut self, d: Duration) -> Self {
        self.config.publish_timeout = d;
        self
    }

    /// How long shutdown waits for batches in flight (default 30 s).
    pub fn shutdown_grace(mut self, d: Duration) -> Self {
        self.config.shutdown_grace = d;
        self
    }

    /// Batches processed concurrently (default 4).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config.concurrency = n;
        self
    }

    /// Keep per-aggregate order (default `true`). Turning it off lets events of one aggregate be
    /// published out of order (after a retry, or by concurrent batches) in exchange for fewer
    /// round trips when a few aggregates carry most events.
    pub fn per_aggregate_order(mut self, on: bool) -> Self {
        self.config.per_aggregate_order = on;
        self
    }

    /// Periodically delete processed rows older than `older_than` (default: never).
    /// `Some(Duration::ZERO)` keeps nothing: each event is deleted as it is acknowledged instead of
    /// being marked processed (see [`RelayConfig::retention`](crate::RelayConfig::retention)).
    pub fn retention(mut self, older_than: Option<Duration>) -> Self {
        self.config.retention = older_than;
        self
    }

    /// Wake up on `NOTIFY` through a dedicated connection made from `config` (the same database as
    /// the pool). Without it the relay only polls.
    ///
    /// TLS follows the config's `sslmode` (disable, prefer, require) without checking the
    /// certificate, as tokio-postgres knows no more: to verify it (and for the pool's password
    /// provider), use [`listen_with`](Self::listen_with) and the pool's [`PgConnector`].
    ///
    /// [`PgConnector`]: crate::PgConnector
    pub fn listen(mut self, config: tokio_postgres::Config) -> Self {
        self.listen = Some(ListenTarget::Config(config));
        self
    }

    /// Wake up on `NOTIFY` through a dedicated connection opened by `connector`: give it the
    /// connector that made the pool, so LISTEN gets the same TLS and credentials. (Behind PgBouncer
    /// in transaction mode, give a connector to the database itself, or do not listen.)
    pub fn listen_with(mut self, connector: crate::connect::PgConnector) -> Self {
        self.listen = Some(ListenTarget::Connector(connector));
        self
    }

    /// Records the relay's [metrics](RelayMetrics) (and refreshes its gauges every
    /// [`metrics_interval`](RelayConfig::metrics_interval) while running).
    pub fn metrics(mut self, metrics: RelayMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Checks the settings and builds the relay.
    ///
    /// Besides [`RelayConfig::validate`], the publish timeout must be above what the publisher
    /// needs for one call ([`Publisher::min_publish_timeout`]`(1)`, e.g. the SQS call timeout); a
    /// timeout below what a full batch needs is only warned about (the publisher then returns
    /// what it could send by the deadline and the rest waits for the next claim).
    pub fn build(self) -> Result<Relay<P>, Error> {
        self.config.validate()?;
        let timeout = self.config.publish_timeout;
        self.config
            .check_publish_timeout(self.publisher.min_publish_timeout(1))?;
        let full = self.publisher.min_publish_timeout(self.config.batch_size);
        if timeout < full {
            tracing::warn!(
                publish_timeout_ms = timeout.as_millis() as u64,
                full_batch_ms = full.as_millis() as u64,
                batch_size = self.config.batch_size,
                "the publish timeout may be too short for a full batch; what does not fit waits \
                 for the next claim"
            );
        }
        let connector = self.listen.map(ListenTarget::resolve).transpose()?;
        // A worker's longest back-off and publish (with its overrun): see `outage.rs`.
        let publish_timeout = self.config.publish_timeout;
        let longest_batch = worker::INFRA_BACKOFF_CAP
            .saturating_add(publish_timeout)
            .saturating_add(guard::overrun(publish_timeout));
        // A put-back event comes back after its delay, or at the next poll when the relay idles.
        let deferrals_end = crate::publisher::UNAVAILABLE_RETRY_DELAY
            .max(self.config.poll_interval)
            .saturating_add(Duration::from_secs(5));
        let wake = Arc::new(tokio::sync::Notify::new());
        let database_back = Arc::new(tokio::sync::Notify::new());
        Ok(Relay {
            inner: Arc::new(Inner {
                policy: self.config.retry_policy(),
                pool: self.pool,
                pool_sessions: Default::default(),
                publisher: self.publisher,
                config: self.config,
                // Each with what it learns of idle_session_timeout (`connect/idle_limit.rs`).
                listen: connector.clone().map(|c| {
                    c.with_default_application_name(LISTENER_APPLICATION_NAME)
                        .limiting_idle_sessions()
                }),
                waiting: connector.map(|c| {
                    c.with_default_application_name(WAITING_APPLICATION_NAME)
                        .limiting_idle_sessions()
                }),
                metrics: self.metrics,
                claims: claim::ClaimState::default(),
                wake: wake.clone(),
                polling: std::sync::atomic::AtomicBool::new(false),
                due: Arc::new(due::DueWakes::new(&wake)),
                slots: slots::Slots::new(database_back.clone()),
                database_back,
                database_watch: std::sync::atomic::AtomicBool::new(false),
                database_watch_wanted: std::sync::atomic::AtomicBool::new(false),
                any_text: tokio::sync::OnceCell::new(),
                housekeeping_interval: self.housekeeping_interval,
                outage: outage::Outage::new(longest_batch, deferrals_end),
                retry_warnings: line_budget::LineBudget::new(line_budget::RETRY_LINES),
                dead_letter_lines: line_budget::LineBudget::new(line_budget::DEAD_LETTER_LINES),
            }),
        })
    }
}

impl<P: Publisher> Relay<P> {
    /// Starts building a relay over `pool` (connections to the database holding `outbox_events`)
    /// publishing through `publisher`.
    pub fn builder(pool: deadpool_postgres::Pool, publisher: P) -> RelayBuilder<P> {
        RelayBuilder {
            pool,
            publisher,
            config: RelayConfig::default(),
            listen: None,
            metrics: None,
            housekeeping_interval: housekeeping::INTERVAL,
        }
    }

    /// The relay's settings.
    pub fn config(&self) -> &RelayConfig {
        &self.inner.config
    }

    /// The publisher.
    pub fn publisher(&self) -> &P {
        &self.inner.publisher
    }

    /// Claims, publishes and acknowledges one batch.
    ///
    /// `Err` when the database failed (nothing recorded, claims released) or the publisher failed
    /// as a whole (what was published before is recorded; the rest released without an attempt).
    pub async fn run_once(&self) -> Result<BatchReport, Error> {
        batch::run_batch(&self.inner, None, None).await.result
    }

    /// [`run_once`](Self::run_once), starting no further wave of the batch once `stop` is
    /// cancelled (a worker's batch at shutdown).
    pub(crate) async fn run_once_until(
        &self,
        stop: &CancellationToken,
        room: Option<usize>,
    ) -> batch::Ran {
        batch::run_batch(&self.inner, Some(stop), room).await
    }

    /// Runs the relay until `shutdown` is cancelled, then stops claiming, lets batches in flight
    /// finish the publish call they are in (no further wave starts; what was published is marked)
    /// within the [grace period](RelayConfig::shutdown_grace) (after it, their claims are
    /// released by rolling back), waits within what is left of it for the publisher's calls that
    /// went on after their publish ([`Publisher::settle`]), marks the events they got accepted,
    /// and returns.
    ///
    /// Fails at once if the publisher's start-up [check](Publisher::check) fails. After that,
    /// database and broker failures are logged and retried with a delay doubling up to 30 s. A
    /// publisher that panics is caught: the events it panics on fail like any other failure
    /// (reason `panic`) and the worker goes on. A worker that dies of anything else is logged,
    /// counted (`outbox_relay_worker_restarts_total`) and restarted with a backoff. `run` returns
    /// an error (kind [`ErrorKind::Panic`]) when workers died more than [`MAX_WORKER_RESTARTS`]
    /// times within [`WORKER_RESTART_WINDOW`], or when one of its helper tasks (LISTEN, the
    /// waiting lock, the gauges, housekeeping) dies: the relay cannot keep them alive, and a
    /// supervisor (systemd, Kubernetes) should see it exit.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), Error> {
        self.inner.publisher.check().await.map_err(|e| {
            Error::new(ErrorKind::Publish, "the publisher's start-up check failed").with_source(e)
        })?;
        let idle = waiting::IdleWorkers::new(self.inner.claims.found.clone());
        // The helper tasks stop with the workers, whether on shutdown or when the relay gives up.
        let stop = shutdown.child_token();
        let mut tasks = HelperTasks::default();
        if let Some(connector) = &self.inner.listen {
            tasks.spawn(
                "LISTEN",
                listener::run(
                    connector.clone(),
                    self.inner.slots.helper("LISTEN connection"),
                    listener::Wakeups {
                        claim: self.inner.wake.clone(),
                        database_back: self.inner.database_back.clone(),
                    },
                    listener::check_after(self.inner.config.poll_interval),
                    stop.clone(),
                ),
            );
        }
        if let Some(connector) = &self.inner.waiting {
            tasks.spawn(
                "waiting",
                waiting::run(
                    connector.clone(),
                    self.inner.slots.helper("connection advertising waiting"),
                    idle.clone(),
                    self.inner.config.concurrency,
                    self.inner.wake.clone(),
                    listener::check_after(self.inner.config.poll_interval),
                    stop.clone(),
                ),
            );
        }
        if let Some(metrics) = &self.inner.metrics {
            tasks.spawn(
                "metrics",
                self.clone().refresh_gauges(metrics.clone(), stop.clone()),
            );
        }
        // Events whose calls went on after their publish, marked as those calls end.
        tasks.spawn(
            "settled",
            settle::mark_as_calls_end(Arc::clone(&self.inner), stop.clone()),
        );
        // Retention (rows on the plain layout, partitions on the partitioned one) and partitions
        // created ahead.
        tasks.spawn(
            "housekeeping",
            housekeeping::run(
                self.inner.pool.clone(),
                Arc::clone(&self.inner.pool_sessions),
                self.inner.config.retention,
                self.inner.housekeeping_interval,
                stop.clone(),
            ),
        );
        tracing::info!(
            concurrency = self.inner.config.concurrency,
            batch_size = self.inner.config.batch_size,
            per_aggregate_order = self.inner.config.per_aggregate_order,
            listen = self.inner.listen.is_some(),
            "relay started"
        );
        let workers = self.supervise_workers(&idle, &stop);
        tokio::pin!(workers);
        // A helper that dies is not restarted: the relay stops (its workers first, within the
        // grace period) and says which, for a supervisor to start it again — it would otherwise
        // run on without wake-ups, housekeeping (partitions made ahead) or fresh gauges.
        let result = tokio::select! {
            result = &mut workers => result,
            died = tasks.first_death() => {
                tracing::error!(error = %died, "a relay task died; stopping the relay");
                stop.cancel();
                let _ = workers.await;
                Err(died)
            }
        };
        stop.cancel();
        tasks.finish(self.inner.config.shutdown_grace).await;
        match &result {
            Ok(()) => tracing::info!("relay stopped"),
            Err(e) => tracing::error!(error = %crate::error_chain(e), "relay stopped"),
        }
        result
    }
}
