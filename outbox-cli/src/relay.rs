//! `outbox relay`.

use outbox_core::{CancellationToken, Relay, RelayConfig, RelayMetrics};
use outbox_sqs::{Route, SqsConfig, SqsPublisher};

use crate::cli::RelayArgs;
use crate::{Failure, db, metrics_server};

/// The relay's settings: environment, then flags.
fn relay_config(args: &RelayArgs) -> Result<RelayConfig, Failure> {
    let mut c = RelayConfig::from_env()?;
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
    c.validate()?;
    Ok(c)
}

/// The publisher's settings: environment, then flags.
fn sqs_config(args: &RelayArgs) -> Result<SqsConfig, Failure> {
    let mut c = SqsConfig::from_env()?;
    for route in &args.routes {
        let (pattern, queue) = route
            .split_once('=')
            .filter(|(p, q)| !p.trim().is_empty() && !q.trim().is_empty())
            .ok_or_else(|| format!("--route `{route}`: expected PATTERN=QUEUE_URL"))?;
        c.routes.push(Route::new(pattern.trim(), queue.trim()));
    }
    if let Some(q) = &args.default_queue {
        c.default_queue = Some(q.clone());
    }
    if let Some(d) = args.broken_queue_dead_letter_after {
        c.broken_queue_dead_letter_after = d;
    }
    if c.routes.is_empty() && c.default_queue.is_none() {
        return Err(
            "no queue configured: pass --default-queue URL or --route PATTERN=URL \
            (or set OUTBOX_SQS_DEFAULT_QUEUE_URL / OUTBOX_SQS_ROUTES)"
                .into(),
        );
    }
    Ok(c)
}

/// Runs the relay until SIGINT or SIGTERM.
pub async fn run(url: Option<&str>, args: RelayArgs) -> Result<(), Failure> {
    let config = relay_config(&args)?;
    let pg = db::config(url)?;
    if args.migrate {
        let mut client = db::connect(url).await?;
        outbox_core::migrate(&mut client).await?;
    }
    let publisher = SqsPublisher::builder()
        .config(sqs_config(&args)?)
        .build()
        .await?;
    let pool = db::pool(&pg, config.concurrency + 2)?;
    let metrics = RelayMetrics::new();
    let inbox_pool = pool.clone();
    let sqs = publisher.clone();
    let relay = Relay::builder(pool, publisher)
        .config(config)
        .listen(pg)
        .metrics(metrics.clone())
        .build()?;

    let shutdown = CancellationToken::new();
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
    tokio::spawn(stop_on_signal(shutdown.clone()));
    relay.run(shutdown).await?;
    Ok(())
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
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
}
