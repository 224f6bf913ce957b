//! Tests of `config`.

use super::*;
use std::collections::HashMap;

fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn defaults_and_every_variable() {
    let d = ConsumerConfig::from_vars("c", vars(&[])).unwrap();
    assert_eq!(d, ConsumerConfig::new("c"));
    assert_eq!(d.concurrency, 10);
    assert_eq!(d.wait, Duration::from_secs(20));
    assert_eq!(d.bad_input, BadInputPolicy::Release);
    d.validate().unwrap();
    let c = ConsumerConfig::from_vars(
        "c",
        vars(&[
            (ENV_CONSUMER_CONCURRENCY, "4"),
            (ENV_CONSUMER_RECEIVERS, "3"),
            (ENV_CONSUMER_MAX_MESSAGES, "5"),
            (ENV_CONSUMER_WAIT_SECS, "2"),
            (ENV_CONSUMER_VISIBILITY_TIMEOUT_SECS, "60"),
            (ENV_CONSUMER_RETRY_INITIAL_MS, "250"),
            (ENV_CONSUMER_RETRY_MAX_SECS, "30"),
            (ENV_CONSUMER_BAD_INPUT_DELAY_SECS, "900"),
            (ENV_CONSUMER_CALL_TIMEOUT_MS, "2500"),
            (ENV_CONSUMER_HANDLER_TIMEOUT_SECS, "120"),
            (ENV_CONSUMER_OFFLOAD_BUCKETS, " events-a, ,events-b "),
        ]),
    )
    .unwrap();
    assert_eq!(c.concurrency, 4);
    assert_eq!(c.receivers, 3);
    assert_eq!(c.max_messages, 5);
    assert_eq!(c.wait, Duration::from_secs(2));
    assert_eq!(c.visibility_timeout, Duration::from_secs(60));
    assert_eq!(c.retry_initial, Duration::from_millis(250));
    assert_eq!(c.retry_max, Duration::from_secs(30));
    assert_eq!(c.bad_input_delay, Duration::from_secs(900));
    assert_eq!(c.call_timeout, Duration::from_millis(2500));
    assert_eq!(c.handler_timeout, Duration::from_secs(120));
    assert_eq!(c.offload_buckets, ["events-a", "events-b"]);
    c.validate().unwrap();
}

#[test]
fn bad_values_are_refused_naming_the_setting() {
    let e = ConsumerConfig::from_vars("c", vars(&[(ENV_CONSUMER_WAIT_SECS, "1.5")])).unwrap_err();
    assert!(e.to_string().contains(ENV_CONSUMER_WAIT_SECS), "{e}");
    let mut c = ConsumerConfig::new(" ");
    assert!(c.validate().is_err());
    c.name = "c".into();
    c.max_messages = 11;
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .contains("max_messages")
    );
    c.max_messages = 10;
    c.wait = Duration::from_secs(21);
    assert!(c.validate().unwrap_err().to_string().contains("wait"));
    c.wait = Duration::from_secs(20);
    c.concurrency = 0;
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .contains("concurrency")
    );
    // "Unlimited" is refused before it overflows the receivers' counts (it passed, and
    // `run` panicked).
    for n in [MAX_CONCURRENCY + 1, usize::MAX] {
        c.concurrency = n;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("concurrency")
        );
        c.concurrency = 1;
        c.receivers = n;
        assert!(c.validate().unwrap_err().to_string().contains("receivers"));
        c.receivers = 2;
    }
    c.concurrency = MAX_CONCURRENCY;
    c.validate().expect("the most");
    c.concurrency = 1;
    for d in [
        Duration::ZERO,
        MAX_VISIBILITY_TIMEOUT + Duration::from_secs(1),
    ] {
        c.handler_timeout = d;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("handler_timeout")
        );
    }
    c.handler_timeout = DEFAULT_HANDLER_TIMEOUT;
    for d in [Duration::ZERO, Duration::from_secs(3601), Duration::MAX] {
        c.call_timeout = d;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("call_timeout")
        );
    }
    c.call_timeout = DEFAULT_CALL_TIMEOUT;
    c.visibility_timeout = Duration::ZERO;
    assert!(c.validate().is_err());
    c.visibility_timeout = Duration::from_millis(1500);
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .contains("visibility_timeout")
    );
    c.visibility_timeout = Duration::from_secs(2);
    c.wait = Duration::from_millis(500);
    assert!(c.validate().unwrap_err().to_string().contains("wait"));
    c.wait = Duration::ZERO;
    c.retry_initial = Duration::ZERO;
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .contains("retry_initial")
    );
    c.retry_initial = Duration::from_millis(250);
    c.bad_input_delay = Duration::ZERO;
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .contains("bad_input_delay")
    );
    c.bad_input = BadInputPolicy::Delete;
    c.validate().expect("no delay needed: bad input is deleted");
    c.bad_input = BadInputPolicy::Release;
    c.bad_input_delay = Duration::from_secs(1);
    c.validate().expect("valid");
}

/// Each refusal names the setting with its variable and says what is wrong with the value
/// (a black-box run: a retry_initial above the default retry_max got "0 < retry_initial ≤
/// retry_max ≤ 12 h is required"; a 23-digit concurrency "is not a whole number").
#[test]
fn refusals_name_the_variable_and_the_cause() {
    let c =
        ConsumerConfig::from_vars("c", vars(&[(ENV_CONSUMER_RETRY_INITIAL_MS, "400000")])).unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains(ENV_CONSUMER_RETRY_INITIAL_MS), "{e}");
    assert!(e.contains(ENV_CONSUMER_RETRY_MAX_SECS), "{e}");
    assert!(e.contains("400s") && e.contains("300s"), "{e}");
    assert!(e.starts_with("invalid configuration: "), "{e}");
    let e = ConsumerConfig::from_vars(
        "c",
        vars(&[(ENV_CONSUMER_CONCURRENCY, "99999999999999999999999")]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("is too large"), "{e}");
    let e = ConsumerConfig::from_vars("c", vars(&[(ENV_CONSUMER_CONCURRENCY, "-3")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not a whole number"), "{e}");
    for (var, value) in [
        (ENV_CONSUMER_CONCURRENCY, "0"),
        (ENV_CONSUMER_RECEIVERS, "0"),
        (ENV_CONSUMER_MAX_MESSAGES, "11"),
        (ENV_CONSUMER_WAIT_SECS, "21"),
        (ENV_CONSUMER_VISIBILITY_TIMEOUT_SECS, "0"),
        (ENV_CONSUMER_RETRY_INITIAL_MS, "0"),
        (ENV_CONSUMER_RETRY_MAX_SECS, "50000"),
        (ENV_CONSUMER_BAD_INPUT_DELAY_SECS, "0"),
        (ENV_CONSUMER_CALL_TIMEOUT_MS, "0"),
        (ENV_CONSUMER_HANDLER_TIMEOUT_SECS, "0"),
    ] {
        let c = ConsumerConfig::from_vars("c", vars(&[(var, value)])).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains(var), "{var}={value}: {e}");
    }
}

#[test]
fn misspelt_variables_of_the_prefix_are_found() {
    let names = [
        "OUTBOX_SQS_CONSUMER_CONSURRENCY",
        ENV_CONSUMER_CONCURRENCY,
        "OUTBOX_SQS_DEFAULT_QUEUE_URL",
        "PATH",
    ]
    .map(std::ffi::OsString::from);
    assert_eq!(
        unknown_variables(names.into_iter()),
        ["OUTBOX_SQS_CONSUMER_CONSURRENCY"]
    );
}

/// An empty bucket name among `offload_buckets` is refused (it was accepted, and every offloaded
/// pointer would have been refused as bad input: black-box run).
#[test]
fn an_empty_offload_bucket_is_refused() {
    let mut c = ConsumerConfig::new("ledger");
    c.offload_buckets = vec!["events".into(), " ".into()];
    let e = c.validate().unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Config);
    assert!(e.to_string().contains("empty bucket name"), "{e}");
    c.offload_buckets = vec!["events".into()];
    assert!(c.validate().is_ok());
}
