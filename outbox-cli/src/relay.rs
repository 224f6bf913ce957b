//! `outbox relay`.

use std::time::Duration;

use outbox_core::{CancellationToken, PgConnector, Relay, RelayConfig, RelayMetrics};
use outbox_sqs::{SqsConfig, SqsPublisher};

use crate::cli::RelayArgs;
use crate::usage::{self, usage};
use crate::{Failure, db, metrics_server};

/// The environment without the variables `overridden` names (their flags were given: a bad
/// value in one is not an error, the flag wins).
fn env_without(overridden: Vec<&'static str>) -> impl Fn(&str) -> Option<String> {
    move |name| {
        if overridden.contains(&name) {
            None
        } else {
            std::env::var(name).ok()
        }
    }
}

/// The relay's settings: environment, then flags.
fn relay_config(args: &RelayArgs) -> Result<RelayConfig, Failure> {
    use outbox_core::env;
    let given = [
        (args.batch_size.is_some(), env::BATCH_SIZE, "--batch-size"),
        (
            args.concurrency.is_some(),
            env::CONCURRENCY,
            "--concurrency",
        ),
        (
            args.max_attempts.is_some(),
            env::MAX_ATTEMPTS,
            "--max-attempts",
        ),
        (
            args.poll_interval.is_some(),
            env::POLL_INTERVAL_MS,
            "--poll-interval",
        ),
        (
            args.shutdown_grace.is_some(),
            env::SHUTDOWN_GRACE_MS,
            "--shutdown-grace",
        ),
        (args.retention.is_some(), env::RETENTION_SECS, "--retention"),
        (args.no_ordering, env::PER_AGGREGATE_ORDER, "--no-ordering"),
    ];
    let overridden = given
        .iter()
        .filter(|(g, _, _)| *g)
        .map(|(_, n, _)| *n)
        .collect();
    let mut c = RelayConfig::from_lookup(env_without(overridden))?;
    if let Some(v) = args.batch_size {
        c.batch_size = v;
    }
    if let Some(v) = args.concurrency {
        c.concurrency = v;
    }
    if let Some(v) = args.max_attempts {
        c.max_attempts = v;
    }
    if let Some(v) = args.poll_interval {
        c.poll_interval = v;
    }
    if let Some(v) = args.shutdown_grace {
        c.shutdown_grace = v;
    }
    if args.retention.is_some() {
        c.retention = args.retention;
    }
    if args.no_ordering {
        c.per_aggregate_order = false;
    }
    c.validate().map_err(|e| {
        // The check names the variable; a value given by a flag is named by its flag (`--batch-size
        // 20000` was refused as `batch_size (OUTBOX_BATCH_SIZE) …`: black-box run).
        let mut message = e.to_string();
        for (_, variable, flag) in given.iter().filter(|(g, _, _)| *g) {
            message = message.replace(&format!("({variable})"), &format!("({flag})"));
        }
        Failure::from(message)
    })?;
    Ok(c)
}

/// The publisher's settings: environment, then flags.
fn sqs_config(args: &RelayArgs) -> Result<SqsConfig, Failure> {
    use outbox_sqs as sqs;
    let given = [
        (!args.routes.is_empty(), sqs::ENV_ROUTES),
        (args.default_queue.is_some(), sqs::ENV_DEFAULT_QUEUE_URL),
        (
            args.broken_queue_dead_letter_after.is_some(),
            sqs::ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS,
        ),
        (args.offload_bucket.is_some(), sqs::ENV_OFFLOAD_BUCKET),
        (
            args.offload_threshold.is_some(),
            sqs::ENV_OFFLOAD_THRESHOLD_BYTES,
        ),
        (args.batch_aggregates, sqs::ENV_BATCH_AGGREGATES),
    ];
    let overridden = given.iter().filter(|(g, _)| *g).map(|(_, n)| *n).collect();
    let mut c = SqsConfig::from_lookup(env_without(overridden))?;
    // Flags replace the environment, routes as a whole (merged, a pattern in both was refused as
    // "given twice").
    if !args.routes.is_empty() {
        c.routes = args.routes.clone();
    }
    if let Some(q) = &args.default_queue {
        c.default_queue = Some(q.clone());
    }
    if let Some(d) = args.broken_queue_dead_letter_after {
        c.broken_queue_dead_letter_after = d;
    }
    if let Some(b) = &args.offload_bucket {
        c.offload_bucket = Some(b.clone());
    }
    if let Some(t) = args.offload_threshold {
        c.offload_threshold = Some(t);
    }
    if args.batch_aggregates {
        c.batch_aggregates = true;
    }
    if c.routes.is_empty() && c.default_queue.is_none() {
        return Err(
            "no queue or topic configured: pass --default-queue URL or --route PATTERN=URL|ARN \
            (or set OUTBOX_SQS_DEFAULT_QUEUE_URL / OUTBOX_SQS_ROUTES)"
                .into(),
        );
    }
    Ok(c)
}

/// Runs the relay until SIGINT or SIGTERM.
pub async fn run(url: Option<&str>, args: RelayArgs) -> Result<(), Failure> {
    crate::stray_variables::warn();
    // Every setting, the publisher's own checks included (route patterns, targets, offload), is
    // checked before the database is touched (`--migrate` included).
    // Settings invalid in themselves are usage errors (exit 2).
    let config = relay_config(&args).map_err(usage)?;
    // Checked here, not by clap: clap took `OUTBOX_NO_LISTEN=false` beside a listen URL for a
    // conflict (black-box run).
    if args.no_listen && args.listen_url.is_some() {
        return Err(usage(
            "--no-listen (or OUTBOX_NO_LISTEN) and --listen-url (or OUTBOX_LISTEN_URL) are both \
             set: poll only, or listen on that URL",
        ));
    }
    let mut sqs = sqs_config(&args).map_err(usage)?;
    if sqs.batch_aggregates && !config.per_aggregate_order {
        // Without per-aggregate order there are no waves to merge: every due event is sent at once.
        tracing::info!(
            "batch_aggregates has no effect with ordering off (--no-ordering): events are not \
             sent in waves"
        );
        sqs.batch_aggregates = false;
    }
    sqs.validate().map_err(usage)?;
    // A missing region failed only once the database was connected (black-box run).
    sqs.check_environment().await.map_err(usage)?;
    config
        .check_publish_timeout(sqs.min_publish_timeout(1))
        .map_err(usage)?;
    if let Some(inbox) = args.inbox_retention {
        outbox_core::check_inbox_retention(inbox).map_err(usage)?;
    }
    // A signal during start-up (connecting can take the connect timeout, a migration longer)
    // stops it there, said in the log, with exit status 0 (it killed the process, exit 143,
    // without a word).
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    let relay = tokio::select! {
        biased;
        _ = shutdown.cancelled() => {
            tracing::info!("stopped during start-up; nothing was relayed");
            return Ok(());
        }
        relay = start(url, &args, config, sqs, &shutdown) => relay?,
    };
    relay.run(shutdown).await?;
    Ok(())
}

/// Connects and checks the database, builds the publisher and the relay, and starts the metrics
/// server and the inbox retention (until `shutdown`).
async fn start(
    url: Option<&str>,
    args: &RelayArgs,
    config: RelayConfig,
    sqs: SqsConfig,
    shutdown: &CancellationToken,
) -> Result<Relay<SqsPublisher>, Failure> {
    // Keepalives and a TCP user timeout on every relay connection, pool time-outs on its pool.
    let connector = db::connector(url).await?.hardened(config.publish_timeout);
    let listen_url = match (&args.listen_url, args.no_listen) {
        (Some(u), false) => Some(
            db::connector_named(u, None)
                .await
                .map_err(|e| usage::context("--listen-url", e))?,
        ),
        _ => None,
    };
    let listen = check_database(&connector, listen_url, args, config.retention.is_some())
        .await?
        .map(|l| l.hardened(config.publish_timeout));
    let publisher = SqsPublisher::builder().config(sqs).build().await?;
    let pool = connector.relay_pool(config.concurrency + 2, config.publish_timeout)?;
    let metrics = RelayMetrics::new();
    let inbox_pool = pool.clone();
    let sqs = publisher.clone();
    let mut relay = Relay::builder(pool, publisher)
        .config(config)
        .metrics(metrics.clone());
    if let Some(listen) = listen {
        relay = relay.listen_with(listen);
    }
    let relay = relay.build()?;

    if let Some(addr) = args.metrics_addr {
        let listener = metrics_server::bind(addr).await?;
        tracing::info!(%addr, "serving metrics at /metrics");
        // The relay's metrics, then the publisher's (`outbox_sqs_queue_unavailable`).
        let encode = move || metrics_server::join(&[metrics.encode(), sqs.encode_metrics()]);
        tokio::spawn(metrics_server::serve(
            listener,
            std::sync::Arc::new(encode),
            shutdown.clone(),
        ));
    }
    if let Some(older_than) = args.inbox_retention {
        tokio::spawn(outbox_core::run_inbox_retention(
            inbox_pool,
            older_than,
            shutdown.clone(),
        ));
    }
    Ok(relay)
}

/// The start-up checks: connect (failing within the connect timeout), migrate when asked, check the
/// schema version and the grants, and open the LISTEN connection once. Returns the LISTEN connector
/// (`None` with `--no-listen`); `listen_url` is `--listen-url`'s.
async fn check_database(
    connector: &PgConnector,
    listen_url: Option<PgConnector>,
    args: &RelayArgs,
    retention: bool,
) -> Result<Option<PgConnector>, Failure> {
    // Named as the relay's, and ending itself should it stall right after login (black-box run:
    // an unnamed session left for good at each try).
    let checks = connector
        .clone()
        .with_default_application_name(outbox_core::RELAY_APPLICATION_NAME)
        .with_idle_session_limit();
    let mut client = checks.connect_spawned().await?;
    if args.migrate {
        // Which process applied what, when several start with --migrate (black-box run: none
        // said; `outbox migrate` prints it).
        let report = outbox_core::migrate(&mut client).await?;
        if report.applied.is_empty() {
            tracing::info!("--migrate: the schema is up to date");
        } else {
            tracing::info!(applied = %report.applied.join(", "), "--migrate: migrations applied");
        }
    }
    let within = answer_within(connector);
    let db = answered(
        connector,
        within,
        outbox_core::check_relay_database(&client, retention),
    )
    .await??;
    if args.inbox_retention.is_some() {
        answered(
            connector,
            within,
            outbox_core::check_inbox_retention_database(&client),
        )
        .await??;
    }
    let listen = match (listen_url, args.no_listen) {
        (_, true) => None,
        (Some(listen), false) => {
            // Fail now on a wrong LISTEN URL (unreachable, or another database: NOTIFY is per
            // database) rather than fall back to polling in silence.
            // Its own connection (within the connect timeout), then a round trip on each.
            // Named, and ending itself should it stall (black-box run: left for good).
            let listening = listen
                .clone()
                .with_default_application_name(outbox_core::LISTENER_APPLICATION_NAME)
                .with_idle_session_limit();
            let checked = outbox_core::check_listen_connection(&client, &listening);
            answered(connector, within.saturating_mul(2), checked)
                .await?
                .map_err(|e| format!("--listen-url: {}", outbox_core::error_chain(&e)))?;
            Some(listen)
        }
        (None, false) => Some(connector.clone()),
    };
    drop(client);
    let sslmode = connector.tls().mode;
    tracing::info!(server = %connector.target(), database = %db.database, user = %db.user,
        tls = db.tls, %sslmode, server_version = %db.server_version,
        schema_version = db.schema_version, "database ready");
    if !db.tls {
        tracing::warn!(%sslmode,
            "connected to PostgreSQL in plaintext; set sslmode=verify-full to require TLS");
    }
    if listen.is_none() {
        tracing::info!("LISTEN off (--no-listen): new events are found by polling");
    }
    Ok(listen)
}

/// How long the start-up checks' statements may wait for their answers: the connect timeout
/// (the URL's `connect_timeout`, or [`db::DEFAULT_CONNECT_TIMEOUT`]). A server answers them in
/// milliseconds; a connection that stalled right after login never does, and the relay waited
/// for ever without a word (black-box run).
fn answer_within(connector: &PgConnector) -> Duration {
    connector
        .pg_config()
        .get_connect_timeout()
        .copied()
        .unwrap_or(db::DEFAULT_CONNECT_TIMEOUT)
}

/// `check`'s result, or the failure of a start-up check not answered within `limit`.
async fn answered<T>(
    connector: &PgConnector,
    limit: Duration,
    check: impl std::future::Future<Output = T>,
) -> Result<T, Failure> {
    tokio::time::timeout(limit, check).await.map_err(|_| {
        Failure::from(format!(
            "PostgreSQL at {} did not answer the relay's start-up checks within {} s of login: \
             the connection stalled (a proxy or middlebox holding it?) or the server is \
             overloaded; its server session ends itself after a minute idle (PostgreSQL 14 and \
             later)",
            connector.target(),
            limit.as_secs_f64()
        ))
    })
}

/// The exit status after a second SIGINT or SIGTERM cut the graceful shutdown short (128 + SIGINT,
/// as shells report an interrupted command).
pub const FORCED_EXIT_STATUS: i32 = 130;

/// Cancels `shutdown` on SIGINT or SIGTERM; a second one exits at once with
/// [`FORCED_EXIT_STATUS`] (batches in flight are rolled back with the connections: their events
/// stay pending, and any the broker already accepted are published again).
async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received; shutting down"),
        _ = term.recv() => tracing::info!("SIGTERM received; shutting down"),
    }
    shutdown.cancel();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::warn!("second signal received; exiting without waiting for batches in flight");
    std::process::exit(FORCED_EXIT_STATUS);
}
