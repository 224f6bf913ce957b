//! The names of the environment variables [`RelayConfig::from_env`](crate::RelayConfig::from_env)
//! reads, in one place for the code, the docs and the CLI's help.

/// [`RelayConfig::batch_size`](crate::RelayConfig::batch_size), a whole number.
pub const BATCH_SIZE: &str = "OUTBOX_BATCH_SIZE";
/// [`RelayConfig::batch_max_bytes`](crate::RelayConfig::batch_max_bytes), bytes.
pub const BATCH_MAX_BYTES: &str = "OUTBOX_BATCH_MAX_BYTES";
/// [`RelayConfig::max_attempts`](crate::RelayConfig::max_attempts), a whole number.
pub const MAX_ATTEMPTS: &str = "OUTBOX_MAX_ATTEMPTS";
/// [`RelayConfig::backoff_base`](crate::RelayConfig::backoff_base), milliseconds.
pub const BACKOFF_BASE_MS: &str = "OUTBOX_BACKOFF_BASE_MS";
/// [`RelayConfig::backoff_cap`](crate::RelayConfig::backoff_cap), milliseconds.
pub const BACKOFF_CAP_MS: &str = "OUTBOX_BACKOFF_CAP_MS";
/// [`RelayConfig::backoff_jitter`](crate::RelayConfig::backoff_jitter), 0.0–1.0.
pub const BACKOFF_JITTER: &str = "OUTBOX_BACKOFF_JITTER";
/// [`RelayConfig::poll_interval`](crate::RelayConfig::poll_interval), milliseconds.
pub const POLL_INTERVAL_MS: &str = "OUTBOX_POLL_INTERVAL_MS";
/// [`RelayConfig::publish_timeout`](crate::RelayConfig::publish_timeout), milliseconds.
pub const PUBLISH_TIMEOUT_MS: &str = "OUTBOX_PUBLISH_TIMEOUT_MS";
/// [`RelayConfig::shutdown_grace`](crate::RelayConfig::shutdown_grace), milliseconds.
pub const SHUTDOWN_GRACE_MS: &str = "OUTBOX_SHUTDOWN_GRACE_MS";
/// [`RelayConfig::concurrency`](crate::RelayConfig::concurrency), a whole number.
pub const CONCURRENCY: &str = "OUTBOX_CONCURRENCY";
/// [`RelayConfig::per_aggregate_order`](crate::RelayConfig::per_aggregate_order), `true`/`false`.
pub const PER_AGGREGATE_ORDER: &str = "OUTBOX_PER_AGGREGATE_ORDER";
/// [`RelayConfig::metrics_interval`](crate::RelayConfig::metrics_interval), milliseconds.
pub const METRICS_INTERVAL_MS: &str = "OUTBOX_METRICS_INTERVAL_MS";
/// [`RelayConfig::retention`](crate::RelayConfig::retention), seconds.
pub const RETENTION_SECS: &str = "OUTBOX_RETENTION_SECS";
