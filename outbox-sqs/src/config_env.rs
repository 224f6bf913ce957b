//! Loading the publisher's settings from the environment ([`SqsConfig::from_env`]).

use std::time::Duration;

use crate::config::{
    ENV_BATCH_AGGREGATES, ENV_BREAKER_PROBE_INTERVAL_MS, ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS,
    ENV_CALL_TIMEOUT_MS, ENV_CALL_WAIT_MS, ENV_DEFAULT_QUEUE_URL, ENV_MAX_IN_FLIGHT,
    ENV_MAX_UPLOADS, ENV_OFFLOAD_BUCKET, ENV_OFFLOAD_THRESHOLD_BYTES, ENV_OFFLOAD_WAIT_MS,
    ENV_ROUTES, ENV_TRANSPORT, Route, SqsConfig,
};
use crate::error::{Result, config_error};

/// The AWS variables that name the services' endpoints and the region, as `aws-config` reads them.
const AWS_ENDPOINTS: [&str; 4] = [
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_ENDPOINT_URL_SNS",
    "AWS_ENDPOINT_URL_S3",
];

/// Why the AWS endpoint or region variables `var` finds are unusable, if they are: an endpoint
/// that is not an http(s) URL with a host, a region that is not lowercase letters, digits and
/// `-`. (They failed only once the database was connected, as a bare SDK error after pages of
/// `aws-config` warnings: black-box run.) Empty ones too: the AWS SDK does not take an empty
/// variable for an unset one (black-box run: an empty `AWS_ENDPOINT_URL` panicked the relay once
/// the database was connected; an empty `AWS_ENDPOINT_URL_S3` made every offload fail, an empty
/// `AWS_REGION` named region `` as unknown).
pub(crate) fn aws_endpoint_refusal(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    for name in AWS_ENDPOINTS.iter().chain(&["AWS_REGION"]) {
        if var(name).is_some_and(|v| v.trim().is_empty()) {
            return Some(format!(
                "{name} is set but empty: unset it, or give it a value (the AWS SDK does not \
                 read an empty one as unset)"
            ));
        }
    }
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    for name in AWS_ENDPOINTS {
        let Some(url) = set(name) else { continue };
        let rest = url
            .trim()
            .strip_prefix("https://")
            .or_else(|| url.trim().strip_prefix("http://"));
        let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or(""));
        if !host.is_some_and(crate::destination::names_a_host) {
            return Some(format!(
                "{name} must be an http:// or https:// URL with a host, got `{url}`"
            ));
        }
    }
    if let Some(region) = set("AWS_REGION") {
        let valid = region
            .trim()
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid {
            return Some(format!(
                "AWS_REGION must be a region name such as us-east-1 (lowercase letters, digits \
                 and `-`), got `{region}`"
            ));
        }
    }
    None
}

impl SqsConfig {
    /// The defaults, overridden by the variables that are set (and not empty):
    /// [`OUTBOX_SQS_DEFAULT_QUEUE_URL`](ENV_DEFAULT_QUEUE_URL), [`OUTBOX_SQS_ROUTES`](ENV_ROUTES),
    /// [`OUTBOX_SQS_MAX_IN_FLIGHT`](ENV_MAX_IN_FLIGHT),
    /// [`OUTBOX_SQS_MAX_UPLOADS`](ENV_MAX_UPLOADS) and
    /// [`OUTBOX_SQS_CALL_TIMEOUT_MS`](ENV_CALL_TIMEOUT_MS),
    /// [`OUTBOX_SQS_CALL_WAIT_MS`](ENV_CALL_WAIT_MS),
    /// [`OUTBOX_SQS_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS`](ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS) and
    /// [`OUTBOX_SQS_BREAKER_PROBE_INTERVAL_MS`](ENV_BREAKER_PROBE_INTERVAL_MS),
    /// [`OUTBOX_SQS_OFFLOAD_BUCKET`](ENV_OFFLOAD_BUCKET),
    /// [`OUTBOX_SQS_OFFLOAD_THRESHOLD_BYTES`](ENV_OFFLOAD_THRESHOLD_BYTES) and
    /// [`OUTBOX_SQS_OFFLOAD_WAIT_MS`](ENV_OFFLOAD_WAIT_MS),
    /// [`OUTBOX_SQS_BATCH_AGGREGATES`](ENV_BATCH_AGGREGATES),
    /// [`OUTBOX_SQS_TRANSPORT`](ENV_TRANSPORT). AWS settings are read later, by
    /// `aws-config`, from the standard AWS variables; those it would panic on
    /// (`AWS_MAX_ATTEMPTS`, `AWS_RETRY_MODE`: [`aws_retry_refusal`](outbox_core::env::aws_retry_refusal))
    /// fail here.
    ///
    /// Fails with [`ErrorKind::Config`](crate::ErrorKind::Config), naming the variable, when a value
    /// does not parse.
    pub fn from_env() -> Result<SqsConfig> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) with the variables looked up by `var` (a command line whose
    /// flags replace some settings hides their variables: a bad value there is not an error).
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<SqsConfig> {
        // Checked here too, before anything is contacted: `aws-config` panics on them later.
        if let Some(refusal) = outbox_core::env::aws_retry_refusal(&var) {
            return Err(config_error(refusal));
        }
        if let Some(refusal) = aws_endpoint_refusal(&var) {
            return Err(config_error(refusal));
        }
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let mut config = SqsConfig::default();
        if let Some(queue) = var(ENV_DEFAULT_QUEUE_URL) {
            config.default_queue = Some(queue.trim().to_owned());
        }
        if let Some(routes) = var(ENV_ROUTES) {
            config.routes =
                parse_routes(&routes).map_err(|e| config_error(format!("{ENV_ROUTES}: {e}")))?;
        }
        if let Some(n) = var(ENV_MAX_IN_FLIGHT) {
            config.max_in_flight = n.trim().parse().map_err(|_| {
                config_error(format!(
                    "{ENV_MAX_IN_FLIGHT}: `{n}` is not a positive whole number"
                ))
            })?;
        }
        if let Some(n) = var(ENV_MAX_UPLOADS) {
            config.max_uploads = n.trim().parse().map_err(|_| {
                config_error(format!(
                    "{ENV_MAX_UPLOADS}: `{n}` is not a positive whole number"
                ))
            })?;
        }
        if let Some(ms) = var(ENV_CALL_TIMEOUT_MS) {
            let ms: u64 = ms.trim().parse().map_err(|_| {
                config_error(format!(
                    "{ENV_CALL_TIMEOUT_MS}: `{ms}` is not a whole number of milliseconds"
                ))
            })?;
            config.call_timeout = Duration::from_millis(ms);
        }
        if let Some(secs) = var(ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS) {
            let secs: u64 = secs.trim().parse().map_err(|_| {
                config_error(format!(
                    "{ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS}: `{secs}` is not a whole number of seconds"
                ))
            })?;
            config.broken_queue_dead_letter_after = Duration::from_secs(secs);
        }
        if let Some(ms) = var(ENV_BREAKER_PROBE_INTERVAL_MS) {
            let ms: u64 = ms.trim().parse().map_err(|_| {
                config_error(format!(
                    "{ENV_BREAKER_PROBE_INTERVAL_MS}: `{ms}` is not a whole number of milliseconds"
                ))
            })?;
            config.breaker_probe_interval = Duration::from_millis(ms);
        }
        if let Some(bucket) = var(ENV_OFFLOAD_BUCKET) {
            config.offload_bucket = Some(bucket.trim().to_owned());
        }
        if let Some(bytes) = var(ENV_OFFLOAD_THRESHOLD_BYTES) {
            config.offload_threshold = Some(bytes.trim().parse().map_err(|_| {
                config_error(format!(
                    "{ENV_OFFLOAD_THRESHOLD_BYTES}: `{bytes}` is not a whole number of bytes"
                ))
            })?);
        }
        if let Some(ms) = var(ENV_CALL_WAIT_MS) {
            let ms: u64 = ms.trim().parse().map_err(|_| {
                config_error(format!(
                    "{ENV_CALL_WAIT_MS}: `{ms}` is not a whole number of milliseconds"
                ))
            })?;
            config.call_wait = Duration::from_millis(ms);
        }
        if let Some(ms) = var(ENV_OFFLOAD_WAIT_MS) {
            let ms: u64 = ms.trim().parse().map_err(|_| {
                config_error(format!(
                    "{ENV_OFFLOAD_WAIT_MS}: `{ms}` is not a whole number of milliseconds"
                ))
            })?;
            config.offload_wait = Duration::from_millis(ms);
        }
        if let Some(on) = var(ENV_BATCH_AGGREGATES) {
            config.batch_aggregates = outbox_core::env::switch(&on).ok_or_else(|| {
                config_error(format!(
                    "{ENV_BATCH_AGGREGATES}: `{on}` is not true or false (also yes/no, on/off, 1/0)"
                ))
            })?;
        }
        if let Some(t) = var(ENV_TRANSPORT) {
            config.transport = t
                .parse()
                .map_err(|e| config_error(format!("{ENV_TRANSPORT}: {e}")))?;
        }
        Ok(config)
    }
}

/// Parses `pattern=queue,pattern=queue` (spaces around items are ignored).
pub(crate) fn parse_routes(text: &str) -> std::result::Result<Vec<Route>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| match item.split_once('=') {
            Some((pattern, queue)) if !pattern.trim().is_empty() && !queue.trim().is_empty() => {
                Ok(Route::new(pattern.trim(), queue.trim()))
            }
            _ => Err(format!("`{item}` is not of the form `pattern=queue`")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::SqsTransport;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    /// `ENV_VARIABLES` is every `OUTBOX_*` variable `from_lookup` reads, no more (the CLI warns
    /// about any other as misspelt).
    #[test]
    fn env_variables_lists_what_from_lookup_reads() {
        let asked = std::cell::RefCell::new(Vec::new());
        SqsConfig::from_lookup(|k| {
            asked.borrow_mut().push(k.to_owned());
            None
        })
        .unwrap();
        let mut asked: Vec<String> = asked
            .into_inner()
            .into_iter()
            .filter(|k| k.starts_with("OUTBOX_"))
            .collect();
        asked.sort();
        asked.dedup();
        let mut listed: Vec<_> = crate::config::ENV_VARIABLES
            .iter()
            .map(|v| v.to_string())
            .collect();
        listed.sort();
        assert_eq!(asked, listed);
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        assert_eq!(
            SqsConfig::from_lookup(vars(&[])).unwrap(),
            SqsConfig::default()
        );
        let d = SqsConfig::default();
        assert_eq!(d.max_in_flight, 8);
        assert_eq!(d.max_uploads, 32);
        assert_eq!(d.offload_wait, Duration::from_secs(1));
        assert_eq!(d.call_wait, Duration::from_secs(1));
        assert_eq!(d.call_timeout, Duration::from_secs(10));
        assert_eq!(d.broken_queue_dead_letter_after, Duration::from_secs(3600));
        assert_eq!(d.breaker_probe_interval, Duration::from_secs(5));
        assert!(d.default_queue.is_none() && d.routes.is_empty());
    }

    #[test]
    fn reads_every_variable() {
        let c = SqsConfig::from_lookup(vars(&[
            (ENV_DEFAULT_QUEUE_URL, "https://sqs.eu-west-1.amazonaws.com/1/default"),
            (
                ENV_ROUTES,
                " order.*=https://sqs.eu-west-1.amazonaws.com/1/orders.fifo , payment.captured=payments,",
            ),
            (ENV_MAX_IN_FLIGHT, "3"),
            (ENV_CALL_TIMEOUT_MS, "2500"),
            (ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS, "600"),
            (ENV_BREAKER_PROBE_INTERVAL_MS, "750"),
            (ENV_OFFLOAD_WAIT_MS, "2500"),
            (ENV_CALL_WAIT_MS, "1500"),
            (ENV_MAX_UPLOADS, "64"),
            (ENV_OFFLOAD_BUCKET, " payloads "),
            (ENV_OFFLOAD_THRESHOLD_BYTES, "200000"),
            (ENV_BATCH_AGGREGATES, " TRUE "),
        ]))
        .unwrap();
        assert_eq!(
            c.default_queue.as_deref(),
            Some("https://sqs.eu-west-1.amazonaws.com/1/default")
        );
        assert_eq!(
            c.routes,
            vec![
                Route::new(
                    "order.*",
                    "https://sqs.eu-west-1.amazonaws.com/1/orders.fifo"
                ),
                Route::new("payment.captured", "payments"),
            ]
        );
        assert_eq!(c.max_in_flight, 3);
        assert_eq!(c.call_timeout, Duration::from_millis(2500));
        assert_eq!(c.broken_queue_dead_letter_after, Duration::from_secs(600));
        assert_eq!(c.breaker_probe_interval, Duration::from_millis(750));
        assert_eq!(c.offload_wait, Duration::from_millis(2500));
        assert_eq!(c.call_wait, Duration::from_millis(1500));
        assert_eq!(c.max_uploads, 64);
        assert_eq!(c.offload_bucket.as_deref(), Some("payloads"));
        assert_eq!(c.offload_threshold, Some(200_000));
        assert!(c.batch_aggregates);
        let off = SqsConfig::from_lookup(vars(&[(ENV_BATCH_AGGREGATES, "0")])).unwrap();
        assert!(!off.batch_aggregates);
        let bad = SqsConfig::from_lookup(vars(&[(ENV_BATCH_AGGREGATES, "maybe")])).unwrap_err();
        assert!(bad.to_string().contains(ENV_BATCH_AGGREGATES), "{bad}");
        let sdk = SqsConfig::from_lookup(vars(&[(ENV_TRANSPORT, " sdk ")])).unwrap();
        assert_eq!(sdk.transport, SqsTransport::Sdk);
        let bad = SqsConfig::from_lookup(vars(&[(ENV_TRANSPORT, "curl")])).unwrap_err();
        assert!(bad.to_string().contains(ENV_TRANSPORT), "{bad}");
    }

    #[test]
    fn empty_variables_are_unset() {
        let c = SqsConfig::from_lookup(vars(&[
            (ENV_DEFAULT_QUEUE_URL, " "),
            (ENV_MAX_IN_FLIGHT, ""),
        ]))
        .unwrap();
        assert_eq!(c, SqsConfig::default());
    }

    #[test]
    fn bad_values_name_the_variable() {
        let e = SqsConfig::from_lookup(vars(&[(ENV_MAX_IN_FLIGHT, "many")])).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Config);
        assert!(e.to_string().contains(ENV_MAX_IN_FLIGHT), "{e}");
        let e = SqsConfig::from_lookup(vars(&[(ENV_CALL_TIMEOUT_MS, "1.5s")])).unwrap_err();
        assert!(e.to_string().contains(ENV_CALL_TIMEOUT_MS), "{e}");
        let e = SqsConfig::from_lookup(vars(&[(ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS, "1h")]))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains(ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS),
            "{e}"
        );
        let e = SqsConfig::from_lookup(vars(&[(ENV_BREAKER_PROBE_INTERVAL_MS, "-1")])).unwrap_err();
        assert!(e.to_string().contains(ENV_BREAKER_PROBE_INTERVAL_MS), "{e}");
        let e = SqsConfig::from_lookup(vars(&[(ENV_CALL_WAIT_MS, "1s")])).unwrap_err();
        assert!(e.to_string().contains(ENV_CALL_WAIT_MS), "{e}");
        let e = SqsConfig::from_lookup(vars(&[(ENV_OFFLOAD_WAIT_MS, "1s")])).unwrap_err();
        assert!(e.to_string().contains(ENV_OFFLOAD_WAIT_MS), "{e}");
        let e = SqsConfig::from_lookup(vars(&[(ENV_OFFLOAD_THRESHOLD_BYTES, "1MiB")])).unwrap_err();
        assert!(e.to_string().contains(ENV_OFFLOAD_THRESHOLD_BYTES), "{e}");
        let e = SqsConfig::from_lookup(vars(&[(ENV_ROUTES, "order.*")])).unwrap_err();
        assert!(
            e.to_string().contains("`order.*` is not of the form"),
            "{e}"
        );
        for (name, value) in [
            ("AWS_ENDPOINT_URL", "notaurl"),
            ("AWS_ENDPOINT_URL_SQS", "http://"),
            ("AWS_ENDPOINT_URL_S3", "https:// x"),
            ("AWS_REGION", "us east"),
            ("AWS_REGION", "US-EAST-1"),
            ("AWS_ENDPOINT_URL", ""),
            ("AWS_ENDPOINT_URL_SQS", " "),
            ("AWS_ENDPOINT_URL_S3", ""),
            ("AWS_REGION", ""),
        ] {
            let e = SqsConfig::from_lookup(vars(&[(name, value)])).unwrap_err();
            assert!(e.to_string().contains(name), "{name}={value:?}: {e}");
        }
        for (name, value) in [
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:4566"),
            (
                "AWS_ENDPOINT_URL_SNS",
                "https://sns.eu-west-1.amazonaws.com/",
            ),
            ("AWS_REGION", "eu-west-1"),
        ] {
            assert!(
                SqsConfig::from_lookup(vars(&[(name, value)])).is_ok(),
                "{name}={value:?}"
            );
        }
        let e = SqsConfig::from_lookup(vars(&[(ENV_ROUTES, "=https://x")])).unwrap_err();
        assert!(e.to_string().contains(ENV_ROUTES), "{e}");
    }
}
