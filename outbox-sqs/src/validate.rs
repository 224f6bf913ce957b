//! The publisher's settings checked before any network call ([`SqsConfig::validate`]).

use crate::config::{
    ENV_BREAKER_PROBE_INTERVAL_MS, ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS, ENV_CALL_TIMEOUT_MS,
    ENV_CALL_WAIT_MS, ENV_DEFAULT_QUEUE_URL, ENV_MAX_IN_FLIGHT, ENV_MAX_UPLOADS,
    ENV_OFFLOAD_WAIT_MS, ENV_ROUTES, MAX_BREAKER_PROBE_INTERVAL,
    MAX_BROKEN_QUEUE_DEAD_LETTER_AFTER, MAX_CALL_TIMEOUT, MAX_IN_FLIGHT,
    MIN_BREAKER_PROBE_INTERVAL, MIN_BROKEN_QUEUE_DEAD_LETTER_AFTER, MIN_CALL_TIMEOUT, SqsConfig,
};
use crate::destination::parse_target;
use crate::error::{Result, config_error};
use crate::offload_settings::validate_offload;
use crate::routing::Router;

/// Every check of the settings that needs no network call (see [`SqsConfig::validate`]).
pub(crate) fn validate(config: &SqsConfig) -> Result<()> {
    if !(1..=MAX_IN_FLIGHT).contains(&config.max_in_flight) {
        return Err(config_error(format!(
            "max_in_flight ({ENV_MAX_IN_FLIGHT}) must be within 1..={MAX_IN_FLIGHT}, got {}",
            config.max_in_flight
        )));
    }
    if !(1..=MAX_IN_FLIGHT).contains(&config.max_uploads) {
        return Err(config_error(format!(
            "max_uploads ({ENV_MAX_UPLOADS}) must be within 1..={MAX_IN_FLIGHT}, got {}",
            config.max_uploads
        )));
    }
    if !(MIN_CALL_TIMEOUT..=MAX_CALL_TIMEOUT).contains(&config.call_timeout) {
        return Err(config_error(format!(
            "call_timeout ({ENV_CALL_TIMEOUT_MS}) must be between {} ms and {} s",
            MIN_CALL_TIMEOUT.as_millis(),
            MAX_CALL_TIMEOUT.as_secs()
        )));
    }
    if config.call_wait > MAX_CALL_TIMEOUT {
        return Err(config_error(format!(
            "call_wait ({ENV_CALL_WAIT_MS}) must be at most {} s",
            MAX_CALL_TIMEOUT.as_secs()
        )));
    }
    if config.offload_wait > MAX_CALL_TIMEOUT {
        return Err(config_error(format!(
            "offload_wait ({ENV_OFFLOAD_WAIT_MS}) must be at most {} s",
            MAX_CALL_TIMEOUT.as_secs()
        )));
    }
    if !(MIN_BROKEN_QUEUE_DEAD_LETTER_AFTER..=MAX_BROKEN_QUEUE_DEAD_LETTER_AFTER)
        .contains(&config.broken_queue_dead_letter_after)
    {
        return Err(config_error(format!(
            "broken_queue_dead_letter_after ({ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS}, \
             --broken-queue-dead-letter-after) must be between {} ms and {} s",
            MIN_BROKEN_QUEUE_DEAD_LETTER_AFTER.as_millis(),
            MAX_BROKEN_QUEUE_DEAD_LETTER_AFTER.as_secs()
        )));
    }
    if !(MIN_BREAKER_PROBE_INTERVAL..=MAX_BREAKER_PROBE_INTERVAL)
        .contains(&config.breaker_probe_interval)
    {
        return Err(config_error(format!(
            "breaker_probe_interval ({ENV_BREAKER_PROBE_INTERVAL_MS}) must be between {} ms and \
             {} s",
            MIN_BREAKER_PROBE_INTERVAL.as_millis(),
            MAX_BREAKER_PROBE_INTERVAL.as_secs()
        )));
    }
    if config.max_attempts == Some(0) {
        return Err(config_error("max_attempts must be at least 1"));
    }
    if let Some(url) = &config.endpoint_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(config_error(format!(
                "endpoint_url `{url}` is not an http:// or https:// URL"
            )));
        }
    }
    if config.default_queue.is_none() && config.routes.is_empty() {
        return Err(config_error(
            "no SQS queue configured: set a default queue or at least one route",
        ));
    }
    if config
        .default_queue
        .as_deref()
        .is_some_and(|q| q.trim().is_empty())
    {
        return Err(config_error("the default queue is empty"));
    }
    if let Some(route) = config.routes.iter().find(|r| r.queue.trim().is_empty()) {
        return Err(config_error(format!(
            "route `{}` has an empty queue",
            route.pattern
        )));
    }
    // Targets and patterns are checked before any network call.
    let targets = config
        .routes
        .iter()
        .map(|r| {
            (
                format!("route `{}` ({ENV_ROUTES} or --route)", r.pattern),
                r.queue.as_str(),
            )
        })
        .chain(config.default_queue.iter().map(|q| {
            (
                format!("the default queue ({ENV_DEFAULT_QUEUE_URL} or --default-queue)"),
                q.as_str(),
            )
        }));
    for (what, target) in targets {
        parse_target(target).map_err(|e| config_error(format!("{what}: {e}")))?;
    }
    validate_offload(config)?;
    Router::new(
        config
            .routes
            .iter()
            .map(|r| (r.pattern.trim().to_owned(), ())),
        None,
    )
    .map_err(config_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bad target names the setting it came from (it named the route alone: black-box run).
    #[test]
    fn a_bad_target_names_its_setting() {
        let mut c = SqsConfig::default();
        c.routes.push(crate::Route::new(
            "a",
            "http://h:4566/000000000000/q1;b=http://h:4566/000000000000/q2",
        ));
        let e = validate(&c).unwrap_err().to_string();
        assert!(
            e.contains("route `a` (OUTBOX_SQS_ROUTES or --route)"),
            "{e}"
        );
        let c = SqsConfig {
            default_queue: Some("http://".into()),
            ..SqsConfig::default()
        };
        let e = validate(&c).unwrap_err().to_string();
        assert!(
            e.contains("(OUTBOX_SQS_DEFAULT_QUEUE_URL or --default-queue)"),
            "{e}"
        );
    }

    #[test]
    fn slot_counts_and_the_call_time_out_are_bounded() {
        let with = |f: fn(&mut SqsConfig)| {
            let mut c = SqsConfig {
                default_queue: Some("https://sqs.us-east-1.amazonaws.com/123456789012/q".into()),
                ..SqsConfig::default()
            };
            f(&mut c);
            validate(&c).map_err(|e| e.to_string())
        };
        assert_eq!(with(|_| {}), Ok(()));
        // A semaphore of that many permits panicked at build.
        let e = with(|c| c.max_uploads = usize::MAX).unwrap_err();
        assert!(
            e.contains("max_uploads (OUTBOX_SQS_MAX_UPLOADS) must be within 1..=10000"),
            "{e}"
        );
        let e = with(|c| c.call_wait = std::time::Duration::MAX).unwrap_err();
        assert!(
            e.contains("call_wait (OUTBOX_SQS_CALL_WAIT_MS) must be at most 3600 s"),
            "{e}"
        );
        let e = with(|c| c.offload_wait = std::time::Duration::from_secs(3601)).unwrap_err();
        assert!(
            e.contains("offload_wait (OUTBOX_SQS_OFFLOAD_WAIT_MS)"),
            "{e}"
        );
        assert_eq!(with(|c| c.call_wait = std::time::Duration::ZERO), Ok(()));
        let e = with(|c| c.max_in_flight = usize::MAX).unwrap_err();
        assert!(e.contains("max_in_flight"), "{e}");
        assert!(with(|c| c.max_uploads = 0).is_err());
        // Added to an instant, a time-out near `Duration::MAX` panicked at the first call.
        let e = with(|c| c.call_timeout = std::time::Duration::MAX).unwrap_err();
        assert!(
            e.contains("call_timeout (OUTBOX_SQS_CALL_TIMEOUT_MS) must be between"),
            "{e}"
        );
        // Floors (black-box run: 1 ms was accepted for each, and a probe interval of 1 ms asked a
        // broken queue 1 000 times a second).
        let e = with(|c| c.call_timeout = std::time::Duration::from_millis(1)).unwrap_err();
        assert!(e.contains("between 100 ms and 3600 s"), "{e}");
        let e =
            with(|c| c.breaker_probe_interval = std::time::Duration::from_millis(1)).unwrap_err();
        assert!(
            e.contains("breaker_probe_interval (OUTBOX_SQS_BREAKER_PROBE_INTERVAL_MS) must be between 100 ms"),
            "{e}"
        );
        let e = with(|c| c.broken_queue_dead_letter_after = std::time::Duration::from_millis(1))
            .unwrap_err();
        assert!(
            e.contains("--broken-queue-dead-letter-after) must be between 100 ms"),
            "{e}"
        );
        assert_eq!(
            with(|c| c.call_timeout = std::time::Duration::from_millis(100)),
            Ok(())
        );
        assert_eq!(
            with(|c| c.breaker_probe_interval = std::time::Duration::from_millis(100)),
            Ok(())
        );
    }
}
