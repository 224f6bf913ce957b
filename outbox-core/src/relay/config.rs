//! The relay's settings: plain data with defaults and validation (environment loading: [`crate::env`]).

use std::time::Duration;

use crate::backoff::{Backoff, RetryPolicy};
use crate::error::Error;

/// The largest batch a relay claims at once.
pub const MAX_BATCH_SIZE: usize = 10_000;

/// The largest byte budget of one claim ([`RelayConfig::batch_max_bytes`]): 256 MiB.
pub const MAX_BATCH_MAX_BYTES: usize = 256 * 1024 * 1024;

/// The longest retry delay ([`RelayConfig::backoff_cap`], and so the base) accepted: 7 days.
pub const MAX_BACKOFF: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest publish timeout, shutdown grace, poll interval and metrics interval accepted: 1 hour.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// The shortest poll interval and metrics interval accepted: 10 ms (shorter made every worker
/// claim, or the gauges refresh, in a near-busy loop).
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The longest retention accepted: 10 years.
pub const MAX_RETENTION: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// How long past the publish timeout PostgreSQL lets a claim transaction sit idle before it ends the
/// session (`idle_in_transaction_session_timeout`), releasing the rows of a relay that stopped
/// talking (partitioned from the database, frozen).
pub const CLAIM_IDLE_MARGIN: Duration = Duration::from_secs(5);

/// The relay's settings. Every field has a default (see [`RelayConfig::default`]); load overrides
/// from the environment with [`RelayConfig::from_env`], check them with [`RelayConfig::validate`].
#[derive(Debug, Clone, PartialEq)]
pub struct RelayConfig {
    /// Events claimed per transaction (default 100, at most [`MAX_BATCH_SIZE`]).
    /// Env: [`OUTBOX_BATCH_SIZE`](crate::env::BATCH_SIZE).
    pub batch_size: usize,
    /// Payload bytes one claim loads into the relay, beyond its first event (default 4 MiB, at
    /// most [`MAX_BATCH_MAX_BYTES`]): the claim returns the oldest events whose payloads fit, so a
    /// backlog of large payloads is never loaded `batch_size` at a time. An event larger than the
    /// budget is claimed alone. Env: [`OUTBOX_BATCH_MAX_BYTES`](crate::env::BATCH_MAX_BYTES).
    pub batch_max_bytes: usize,
    /// Attempts before an event is dead-lettered (default 10, at most `i32::MAX`). Env: [`OUTBOX_MAX_ATTEMPTS`](crate::env::MAX_ATTEMPTS).
    pub max_attempts: u32,
    /// First retry delay (default 1 s, at most the cap). Env: [`OUTBOX_BACKOFF_BASE_MS`](crate::env::BACKOFF_BASE_MS).
    pub backoff_base: Duration,
    /// Largest retry delay (default 5 min, at most [`MAX_BACKOFF`]). Env: [`OUTBOX_BACKOFF_CAP_MS`](crate::env::BACKOFF_CAP_MS).
    pub backoff_cap: Duration,
    /// Fraction of a retry delay removed at random, 0.0–1.0 (default 0.2). Env: [`OUTBOX_BACKOFF_JITTER`](crate::env::BACKOFF_JITTER).
    pub backoff_jitter: f64,
    /// Fallback poll when no notification arrives (default 2 s, at most [`MAX_TIMEOUT`]).
    /// Env: [`OUTBOX_POLL_INTERVAL_MS`](crate::env::POLL_INTERVAL_MS).
    pub poll_interval: Duration,
    /// Longest time a batch may spend publishing (default 30 s, at least 1 ms, at most
    /// [`MAX_TIMEOUT`]). The claim transaction runs with `statement_timeout` and `lock_timeout` of
    /// this value and an `idle_in_transaction_session_timeout` of this plus
    /// [`CLAIM_IDLE_MARGIN`], so PostgreSQL releases the rows of a relay that stops talking to it.
    /// Env: [`OUTBOX_PUBLISH_TIMEOUT_MS`](crate::env::PUBLISH_TIMEOUT_MS).
    pub publish_timeout: Duration,
    /// How long shutdown waits for batches in flight before releasing them, and then, within what
    /// is left, for the publisher's calls going on ([`Publisher::settle`](crate::Publisher::settle))
    /// (default 30 s, at most [`MAX_TIMEOUT`]). Env: [`OUTBOX_SHUTDOWN_GRACE_MS`](crate::env::SHUTDOWN_GRACE_MS).
    pub shutdown_grace: Duration,
    /// Batches processed concurrently by one relay, each in its own transaction (default 4).
    /// Env: [`OUTBOX_CONCURRENCY`](crate::env::CONCURRENCY).
    ///
    /// With per-aggregate order and a backlog on a few aggregates, each batch takes about
    /// `1 / concurrency` of the aggregates with pending events (and as many of their later events
    /// as fit), so that the batches publish disjoint aggregates side by side.
    pub concurrency: usize,
    /// Keep per-aggregate order (default true): an event is never published while an earlier event
    /// of its aggregate is unpublished. Env: [`OUTBOX_PER_AGGREGATE_ORDER`](crate::env::PER_AGGREGATE_ORDER) (`true`/`false`).
    pub per_aggregate_order: bool,
    /// Delete processed rows older than this, periodically (default off, at most
    /// [`MAX_RETENTION`]). Env: [`OUTBOX_RETENTION_SECS`](crate::env::RETENTION_SECS).
    ///
    /// `Some(Duration::ZERO)` keeps nothing: each event is deleted in the statement that
    /// acknowledges it instead of being marked processed. That is the cheapest acknowledgement
    /// (no new row version, no new index entries: about a seventh of the mark's WAL), at the price
    /// of the published rows' history (`outbox stats` then counts no recent publications).
    pub retention: Option<Duration>,
    /// How often the metrics' gauges are refreshed when metrics are on (default 5 s, at most
    /// [`MAX_TIMEOUT`]). Env: [`OUTBOX_METRICS_INTERVAL_MS`](crate::env::METRICS_INTERVAL_MS).
    pub metrics_interval: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            batch_size: 100,
            batch_max_bytes: 4 * 1024 * 1024,
            max_attempts: 10,
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(300),
            backoff_jitter: 0.2,
            poll_interval: Duration::from_secs(2),
            publish_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            concurrency: 4,
            per_aggregate_order: true,
            retention: None,
            metrics_interval: Duration::from_secs(5),
        }
    }
}

impl RelayConfig {
    /// Checks that the publish timeout is above `one_call`, what the publisher needs for one
    /// call ([`Publisher::min_publish_timeout`](crate::Publisher::min_publish_timeout)`(1)`, e.g.
    /// its broker call timeout), as [`RelayBuilder::build`](crate::RelayBuilder::build) does: a
    /// program may check it before it connects to anything.
    pub fn check_publish_timeout(&self, one_call: Duration) -> Result<(), Error> {
        let timeout = self.publish_timeout;
        if timeout <= one_call {
            return Err(Error::config(crate::env::name_the_variable(format!(
                "publish_timeout ({timeout:?}) must be above what the publisher needs for one call \
                 ({one_call:?}, e.g. its broker call timeout)"
            ))));
        }
        Ok(())
    }

    /// Checks every setting; the error names the one that is wrong, and its variable (the
    /// `relay` command's error said `batch_size`, which the operator sets as `OUTBOX_BATCH_SIZE`:
    /// black-box run).
    pub fn validate(&self) -> Result<(), Error> {
        let fail = |m: String| Err(Error::config(crate::env::name_the_variable(m)));
        if self.batch_size == 0 || self.batch_size > MAX_BATCH_SIZE {
            return fail(format!(
                "batch_size must be within 1..={MAX_BATCH_SIZE}, got {}",
                self.batch_size
            ));
        }
        if self.batch_max_bytes == 0 || self.batch_max_bytes > MAX_BATCH_MAX_BYTES {
            return fail(format!(
                "batch_max_bytes must be within 1..={MAX_BATCH_MAX_BYTES}, got {}",
                self.batch_max_bytes
            ));
        }
        // The count is an `int` column.
        if self.max_attempts == 0 || self.max_attempts > i32::MAX as u32 {
            return fail(format!(
                "max_attempts must be within 1..={}, got {}",
                i32::MAX,
                self.max_attempts
            ));
        }
        if self.backoff_base.is_zero()
            || self.backoff_cap < self.backoff_base
            || self.backoff_cap > MAX_BACKOFF
        {
            return fail(format!(
                "backoff needs 0 < base <= cap <= {MAX_BACKOFF:?}, got base {:?} and cap {:?}",
                self.backoff_base, self.backoff_cap
            ));
        }
        if !(0.0..=1.0).contains(&self.backoff_jitter) {
            return fail(format!(
                "backoff_jitter must be within 0.0..=1.0, got {}",
                self.backoff_jitter
            ));
        }
        for (name, value) in [
            ("poll_interval", self.poll_interval),
            ("publish_timeout", self.publish_timeout),
            ("shutdown_grace", self.shutdown_grace),
            ("metrics_interval", self.metrics_interval),
        ] {
            if value.is_zero() && name != "shutdown_grace" {
                return fail(format!("{name} must be above zero"));
            }
            if value < MIN_INTERVAL && name.ends_with("_interval") {
                return fail(format!(
                    "{name} must be at least {MIN_INTERVAL:?}, got {value:?}"
                ));
            }
            if value > MAX_TIMEOUT {
                return fail(format!(
                    "{name} must be at most {MAX_TIMEOUT:?}, got {value:?}"
                ));
            }
        }
        // It becomes the claim's `statement_timeout` and `lock_timeout` in whole milliseconds, where
        // PostgreSQL reads 0 as no limit at all.
        if self.publish_timeout < Duration::from_millis(1) {
            return fail(format!(
                "publish_timeout must be at least 1 ms, got {:?}",
                self.publish_timeout
            ));
        }
        if self.concurrency == 0 || self.concurrency > 256 {
            return fail(format!(
                "concurrency must be within 1..=256, got {}",
                self.concurrency
            ));
        }
        if let Some(retention) = self.retention.filter(|r| *r > MAX_RETENTION) {
            return fail(format!(
                "retention must be at most {MAX_RETENTION:?} ({} days) when set, got {retention:?}",
                MAX_RETENTION.as_secs() / 86_400
            ));
        }
        Ok(())
    }

    /// Whether acknowledgements delete the published rows ([`retention`](Self::retention) zero).
    pub(crate) fn deletes_on_ack(&self) -> bool {
        self.retention.is_some_and(|r| r.is_zero())
    }

    pub(crate) fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.max_attempts,
            backoff: Backoff::new(self.backoff_base, self.backoff_cap, self.backoff_jitter),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        RelayConfig::default().validate().unwrap();
    }

    #[test]
    fn upper_bounds_themselves_are_valid() {
        RelayConfig {
            backoff_cap: MAX_BACKOFF,
            publish_timeout: MAX_TIMEOUT,
            poll_interval: MAX_TIMEOUT,
            shutdown_grace: MAX_TIMEOUT,
            metrics_interval: MAX_TIMEOUT,
            retention: Some(MAX_RETENTION),
            ..Default::default()
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn env_overrides_defaults() {
        let env = [
            ("OUTBOX_BATCH_SIZE", "250"),
            ("OUTBOX_POLL_INTERVAL_MS", "1500"),
            ("OUTBOX_PER_AGGREGATE_ORDER", "false"),
            ("OUTBOX_RETENTION_SECS", "604800"),
        ];
        let c = RelayConfig::from_lookup(|k| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
        assert_eq!(c.batch_size, 250);
        assert_eq!(c.poll_interval, Duration::from_millis(1500));
        assert!(!c.per_aggregate_order);
        assert_eq!(c.retention, Some(Duration::from_secs(604_800)));
        assert_eq!(c.max_attempts, 10);
    }

    #[test]
    fn bad_values_are_named() {
        let e = RelayConfig::from_lookup(|k| (k == "OUTBOX_BATCH_SIZE").then(|| "lots".into()))
            .unwrap_err();
        assert!(e.to_string().contains("OUTBOX_BATCH_SIZE"), "{e}");
        for (c, field) in [
            (
                RelayConfig {
                    batch_size: 0,
                    ..Default::default()
                },
                "batch_size",
            ),
            (
                RelayConfig {
                    batch_size: MAX_BATCH_SIZE + 1,
                    ..Default::default()
                },
                "batch_size",
            ),
            (
                RelayConfig {
                    max_attempts: 0,
                    ..Default::default()
                },
                "max_attempts",
            ),
            (
                RelayConfig {
                    backoff_cap: Duration::from_millis(1),
                    ..Default::default()
                },
                "backoff",
            ),
            (
                RelayConfig {
                    concurrency: 0,
                    ..Default::default()
                },
                "concurrency",
            ),
            (
                RelayConfig {
                    poll_interval: Duration::ZERO,
                    ..Default::default()
                },
                "poll_interval",
            ),
            (
                RelayConfig {
                    poll_interval: Duration::from_micros(1),
                    ..Default::default()
                },
                "poll_interval",
            ),
            (
                RelayConfig {
                    metrics_interval: Duration::from_millis(9),
                    ..Default::default()
                },
                "metrics_interval",
            ),
        ] {
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e} should name {field}");
        }
    }

    /// Every duration has an upper bound: a value past it is a config error naming the setting,
    /// never a panic (`Instant + Duration`) or a database error (`timestamp out of range`) later.
    #[test]
    fn values_out_of_their_bounds_are_config_errors() {
        let over = |d: Duration| d + Duration::from_millis(1);
        let huge = Duration::from_millis(u64::MAX);
        for (c, field) in [
            (
                RelayConfig {
                    backoff_cap: over(MAX_BACKOFF),
                    ..Default::default()
                },
                "backoff",
            ),
            (
                RelayConfig {
                    backoff_base: huge,
                    backoff_cap: huge,
                    ..Default::default()
                },
                "backoff",
            ),
            (
                RelayConfig {
                    publish_timeout: over(MAX_TIMEOUT),
                    ..Default::default()
                },
                "publish_timeout",
            ),
            (
                RelayConfig {
                    publish_timeout: huge,
                    ..Default::default()
                },
                "publish_timeout",
            ),
            (
                RelayConfig {
                    publish_timeout: Duration::from_micros(500),
                    ..Default::default()
                },
                "publish_timeout (OUTBOX_PUBLISH_TIMEOUT_MS) must be at least 1 ms",
            ),
            (
                RelayConfig {
                    poll_interval: huge,
                    ..Default::default()
                },
                "poll_interval",
            ),
            (
                RelayConfig {
                    shutdown_grace: over(MAX_TIMEOUT),
                    ..Default::default()
                },
                "shutdown_grace",
            ),
            (
                RelayConfig {
                    metrics_interval: over(MAX_TIMEOUT),
                    ..Default::default()
                },
                "metrics_interval",
            ),
            (
                RelayConfig {
                    retention: Some(over(MAX_RETENTION)),
                    ..Default::default()
                },
                "retention",
            ),
            (
                RelayConfig {
                    batch_max_bytes: MAX_BATCH_MAX_BYTES + 1,
                    ..Default::default()
                },
                "batch_max_bytes",
            ),
            (
                RelayConfig {
                    batch_max_bytes: 0,
                    ..Default::default()
                },
                "batch_max_bytes",
            ),
        ] {
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e} should name {field}");
        }
    }
}
