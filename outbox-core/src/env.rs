//! The names of the environment variables [`RelayConfig::from_env`](crate::RelayConfig::from_env)
//! reads, in one place for the code, the docs and the CLI's help, and the reading itself.

use std::time::Duration;

use crate::error::Error;
use crate::relay::RelayConfig;

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

/// Every variable [`RelayConfig::from_env`](crate::RelayConfig::from_env) reads.
pub const VARIABLES: &[&str] = &[
    BATCH_SIZE,
    BATCH_MAX_BYTES,
    MAX_ATTEMPTS,
    BACKOFF_BASE_MS,
    BACKOFF_CAP_MS,
    BACKOFF_JITTER,
    POLL_INTERVAL_MS,
    PUBLISH_TIMEOUT_MS,
    SHUTDOWN_GRACE_MS,
    CONCURRENCY,
    PER_AGGREGATE_ORDER,
    METRICS_INTERVAL_MS,
    RETENTION_SECS,
];

/// The AWS SDK's attempts per request, read by `aws-config`'s default chain: a whole number from 1.
pub const AWS_MAX_ATTEMPTS: &str = "AWS_MAX_ATTEMPTS";
/// The AWS SDK's retry mode, read by `aws-config`'s default chain: `standard` or `adaptive`.
pub const AWS_RETRY_MODE: &str = "AWS_RETRY_MODE";

/// A switch variable's value: `true`, `yes`, `y`, `t`, `on`, `1` or `false`, `no`, `n`, `f`, `off`,
/// `0`, in any case and with spaces around; `None` for anything else. Every switch the product
/// reads takes these (`OUTBOX_PER_AGGREGATE_ORDER` refused `on` and `TRUE`, which the others
/// took: black-box run).
pub fn switch(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "t" | "true" | "on" | "1" => Some(true),
        "n" | "no" | "f" | "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Why the AWS SDK's retry settings among the variables `lookup` finds ([`AWS_MAX_ATTEMPTS`],
/// [`AWS_RETRY_MODE`]) would be refused, if they would: `aws-config` panics on a value it cannot
/// use (zero, not a number, set but empty, an unknown mode), so the relay, the consumer and RDS IAM
/// auth check them first and fail with this, naming the variable.
pub fn aws_retry_refusal(lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(v) = lookup(AWS_MAX_ATTEMPTS) {
        if !v.trim().parse::<u32>().is_ok_and(|n| n >= 1) {
            return Some(format!(
                "{AWS_MAX_ATTEMPTS} must be a whole number from 1 (the AWS SDK's attempts per \
                 request), got `{v}`"
            ));
        }
    }
    if let Some(v) = lookup(AWS_RETRY_MODE) {
        let mode = v.trim();
        if !mode.eq_ignore_ascii_case("standard") && !mode.eq_ignore_ascii_case("adaptive") {
            return Some(format!(
                "{AWS_RETRY_MODE} must be `standard` or `adaptive`, got `{v}`"
            ));
        }
    }
    None
}

/// `message`, a [`RelayConfig`] check's error that opens with a field's name, with the field's
/// variable named after it: `batch_size (OUTBOX_BATCH_SIZE) must be within …`.
pub(crate) fn name_the_variable(message: String) -> String {
    let field = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("");
    let variable = match field {
        "batch_size" => BATCH_SIZE,
        "batch_max_bytes" => BATCH_MAX_BYTES,
        "max_attempts" => MAX_ATTEMPTS,
        "backoff" => "OUTBOX_BACKOFF_BASE_MS, OUTBOX_BACKOFF_CAP_MS",
        "backoff_jitter" => BACKOFF_JITTER,
        "poll_interval" => POLL_INTERVAL_MS,
        "publish_timeout" => PUBLISH_TIMEOUT_MS,
        "shutdown_grace" => SHUTDOWN_GRACE_MS,
        "concurrency" => CONCURRENCY,
        "metrics_interval" => METRICS_INTERVAL_MS,
        "retention" => RETENTION_SECS,
        _ => return message,
    };
    format!("{field} ({variable}){}", &message[field.len()..])
}

impl RelayConfig {
    /// The defaults, overridden by the `OUTBOX_*` environment variables named on each field that
    /// are set and not empty (an empty variable, as templated deployments leave them, is unset).
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Like [`from_env`](Self::from_env), reading variables through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let lookup = |key: &str| lookup(key).filter(|v| !v.trim().is_empty());
        let mut c = RelayConfig::default();
        let parse = |key: &str| -> Result<Option<u64>, Error> {
            lookup(key)
                .map(|v| {
                    v.trim().parse::<u64>().map_err(|_| {
                        Error::config(format!("{key} must be a whole number, got `{v}`"))
                    })
                })
                .transpose()
        };
        let ms = |key: &str| parse(key).map(|v| v.map(Duration::from_millis));
        if let Some(v) = parse(BATCH_SIZE)? {
            c.batch_size = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = parse(BATCH_MAX_BYTES)? {
            c.batch_max_bytes = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = parse(MAX_ATTEMPTS)? {
            // Said as given: saturated, 2^64 - 1 was refused as "got 4294967295" (black-box run).
            c.max_attempts = u32::try_from(v)
                .ok()
                .filter(|n| *n <= i32::MAX as u32)
                .ok_or_else(|| {
                    Error::config(format!(
                        "{MAX_ATTEMPTS} must be within 1..={}, got {v}",
                        i32::MAX
                    ))
                })?;
        }
        if let Some(v) = ms(BACKOFF_BASE_MS)? {
            c.backoff_base = v;
        }
        if let Some(v) = ms(BACKOFF_CAP_MS)? {
            c.backoff_cap = v;
        }
        if let Some(v) = lookup(BACKOFF_JITTER) {
            c.backoff_jitter = v.trim().parse().map_err(|_| {
                Error::config(format!("{} must be a number, got `{v}`", BACKOFF_JITTER))
            })?;
        }
        if let Some(v) = ms(POLL_INTERVAL_MS)? {
            c.poll_interval = v;
        }
        if let Some(v) = ms(PUBLISH_TIMEOUT_MS)? {
            c.publish_timeout = v;
        }
        if let Some(v) = ms(SHUTDOWN_GRACE_MS)? {
            c.shutdown_grace = v;
        }
        if let Some(v) = parse(CONCURRENCY)? {
            c.concurrency = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = lookup(PER_AGGREGATE_ORDER) {
            c.per_aggregate_order = switch(&v).ok_or_else(|| {
                Error::config(format!(
                    "{PER_AGGREGATE_ORDER} must be true or false (also yes/no, on/off, 1/0), got `{v}`"
                ))
            })?;
        }
        if let Some(v) = ms(METRICS_INTERVAL_MS)? {
            c.metrics_interval = v;
        }
        if let Some(v) = parse(RETENTION_SECS)? {
            c.retention = Some(Duration::from_secs(v));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    /// `VARIABLES` is every variable `from_lookup` reads, no more (the CLI warns about any other
    /// `OUTBOX_*` one as misspelt).
    #[test]
    fn variables_lists_what_from_lookup_reads() {
        let asked = std::cell::RefCell::new(Vec::new());
        RelayConfig::from_lookup(|k| {
            asked.borrow_mut().push(k.to_owned());
            None
        })
        .unwrap();
        let mut asked = asked.into_inner();
        asked.sort();
        asked.dedup();
        let mut listed: Vec<_> = VARIABLES.iter().map(|v| v.to_string()).collect();
        listed.sort();
        assert_eq!(asked, listed);
    }

    #[test]
    fn a_bad_setting_is_named_with_its_variable() {
        let e = RelayConfig {
            batch_size: 0,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("batch_size (OUTBOX_BATCH_SIZE) must be"),
            "{e}"
        );
        let e = RelayConfig::default()
            .check_publish_timeout(std::time::Duration::from_secs(60))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("publish_timeout (OUTBOX_PUBLISH_TIMEOUT_MS) ("),
            "{e}"
        );
        assert_eq!(name_the_variable("other thing".into()), "other thing");
    }

    #[test]
    fn every_switch_takes_the_same_words() {
        for (text, expected) in [
            ("ON", true),
            ("off", false),
            (" TRUE ", true),
            ("No", false),
        ] {
            let c = RelayConfig::from_lookup(vars(&[(PER_AGGREGATE_ORDER, text)])).unwrap();
            assert_eq!(c.per_aggregate_order, expected, "{text}");
        }
        assert!(RelayConfig::from_lookup(vars(&[(PER_AGGREGATE_ORDER, "maybe")])).is_err());
        assert_eq!(switch("t"), Some(true));
        assert_eq!(switch(""), None);
    }

    #[test]
    fn an_attempts_count_too_large_is_said_as_given() {
        for v in ["18446744073709551615", "4294967296", "2147483648"] {
            let e = RelayConfig::from_lookup(vars(&[(MAX_ATTEMPTS, v)])).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "invalid configuration: OUTBOX_MAX_ATTEMPTS must be within 1..=2147483647, got {v}"
                ),
            );
        }
        let c = RelayConfig::from_lookup(vars(&[(MAX_ATTEMPTS, "2147483647")])).unwrap();
        assert_eq!(c.max_attempts, 2_147_483_647);
    }

    #[test]
    fn an_empty_variable_is_unset() {
        let c = RelayConfig::from_lookup(vars(&[(BATCH_SIZE, ""), (RETENTION_SECS, "  ")]))
            .expect("empty variables are unset");
        assert_eq!(c.batch_size, RelayConfig::default().batch_size);
        assert_eq!(c.retention, None);
    }

    #[test]
    fn aws_retry_settings_aws_config_would_panic_on_are_refused_by_name() {
        for (name, value) in [
            (AWS_MAX_ATTEMPTS, "0"),
            (AWS_MAX_ATTEMPTS, "abc"),
            (AWS_MAX_ATTEMPTS, "-1"),
            (AWS_MAX_ATTEMPTS, ""),
            (AWS_RETRY_MODE, "bogus"),
            (AWS_RETRY_MODE, ""),
        ] {
            let refusal = aws_retry_refusal(vars(&[(name, value)]));
            assert!(
                refusal.as_deref().is_some_and(|r| r.contains(name)),
                "{name}={value:?}: {refusal:?}"
            );
        }
        for (name, value) in [
            (AWS_MAX_ATTEMPTS, "1"),
            (AWS_MAX_ATTEMPTS, " 5 "),
            (AWS_RETRY_MODE, "Standard"),
            (AWS_RETRY_MODE, "adaptive"),
        ] {
            assert_eq!(
                aws_retry_refusal(vars(&[(name, value)])),
                None,
                "{name}={value:?}"
            );
        }
        assert_eq!(aws_retry_refusal(vars(&[])), None);
    }
}
