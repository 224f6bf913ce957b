//! How `outbox relay` reads its settings from the environment, before anything is contacted:
//! AWS retry settings `aws-config` would panic on are usage errors naming the variable; a flag
//! wins over its variable, whatever the variable holds; an empty variable is unset.

use std::process::{Command, Output};

/// `outbox relay` with `args` and `vars`, AWS set up for a local region, and a database that
/// refuses connections (nothing here may get that far but the runs that pass every check).
fn relay(args: &[&str], vars: &[(&str, &str)]) -> (Output, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_outbox"));
    cmd.env(
        "DATABASE_URL",
        "postgres://nobody@127.0.0.1:1/none?connect_timeout=2",
    )
    .env_remove("RUST_LOG")
    .env("AWS_REGION", "us-east-1")
    .env("AWS_ACCESS_KEY_ID", "test")
    .env("AWS_SECRET_ACCESS_KEY", "test")
    .env_remove("AWS_MAX_ATTEMPTS")
    .env_remove("AWS_RETRY_MODE")
    .arg("relay")
    .args(args);
    outbox_tests::without_outbox_env(&mut cmd);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    let out = cmd.output().expect("outbox runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, err)
}

const QUEUE: &str = "http://127.0.0.1:1/000000000000/q";

/// `aws-config` panics on the retry settings (exit 101 and a backtrace), and an endpoint or region
/// it cannot use failed only once the database was connected (exit 1, after pages of warnings):
/// black-box run.
#[test]
fn aws_settings_the_sdk_cannot_use_are_usage_errors() {
    for (name, value) in [
        ("AWS_MAX_ATTEMPTS", "0"),
        ("AWS_MAX_ATTEMPTS", "abc"),
        ("AWS_MAX_ATTEMPTS", ""),
        ("AWS_RETRY_MODE", "bogus"),
        ("AWS_ENDPOINT_URL", "notaurl"),
        ("AWS_ENDPOINT_URL_SQS", "http://"),
        ("AWS_REGION", "us east"),
        // Set but empty: the SDK does not take them for unset (an empty AWS_ENDPOINT_URL
        // panicked the relay once the database was connected: black-box run).
        ("AWS_ENDPOINT_URL", ""),
        ("AWS_ENDPOINT_URL_S3", ""),
        ("AWS_REGION", ""),
    ] {
        let (out, err) = relay(&["--default-queue", QUEUE], &[(name, value)]);
        assert_eq!(out.status.code(), Some(2), "{name}={value:?}: {err}");
        assert!(err.contains(name), "{name}={value:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A `RUST_LOG` that does not parse is said, and logging goes on at info (it was ignored without
/// a word: black-box run).
#[test]
fn a_rust_log_that_does_not_parse_is_said() {
    let (_, err) = relay(&["--default-queue", QUEUE], &[("RUST_LOG", "garbage===")]);
    assert!(
        err.contains("RUST_LOG is not a filter this reads") && err.contains("garbage==="),
        "{err}"
    );
    let (_, err) = relay(&["--default-queue", QUEUE], &[("RUST_LOG", "warn")]);
    assert!(!err.contains("RUST_LOG"), "{err}");
}

/// A bad value in a variable whose flag is given is not read: the flag wins (it failed the
/// start naming the variable: black-box run).
#[test]
fn a_flag_wins_over_a_bad_variable() {
    let (out, err) = relay(
        &["--batch-size", "5", "--route", &format!("order.*={QUEUE}")],
        &[
            ("OUTBOX_BATCH_SIZE", "lots"),
            ("OUTBOX_SQS_ROUTES", "order.*"),
        ],
    );
    assert!(
        !err.contains("OUTBOX_BATCH_SIZE") && !err.contains("OUTBOX_SQS_ROUTES"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(1), "the database refused: {err}");
}

/// A value out of range names where it came from: the flag when a flag gave it (it named the
/// variable, which was not set: black-box run), the variable otherwise.
#[test]
fn a_bad_value_names_the_flag_or_the_variable_that_gave_it() {
    let (out, err) = relay(&["--batch-size", "20000", "--default-queue", QUEUE], &[]);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("batch_size (--batch-size) must be within") && !err.contains("OUTBOX_"),
        "{err}"
    );
    let (out, err) = relay(
        &["--default-queue", QUEUE],
        &[("OUTBOX_BATCH_SIZE", "20000")],
    );
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("batch_size (OUTBOX_BATCH_SIZE) must be within"),
        "{err}"
    );
}

/// A variable of the product's prefix that is no setting is warned about, naming it (a misspelt
/// `OUTBOX_BATCHSIZE` was ignored without a word: black-box run); the consumer's are not the
/// relay's business.
#[test]
fn a_misspelt_variable_is_warned_about() {
    let (out, err) = relay(
        &["--default-queue", QUEUE],
        &[
            ("OUTBOX_BATCHSIZE", "5"),
            ("OUTBOX_BATCH_SIZE", "5"),
            ("OUTBOX_SQS_CONSUMER_CONCURRENCY", "4"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "the database refused: {err}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("no setting of the relay"))
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("OUTBOX_BATCHSIZE"), "{err}");
}

/// An empty variable, as templated deployments leave them, is unset, for every setting (some
/// failed the start, others were ignored: black-box run).
#[test]
fn an_empty_variable_is_unset() {
    let (out, err) = relay(
        &["--default-queue", QUEUE],
        &[
            ("OUTBOX_BATCH_SIZE", ""),
            ("OUTBOX_RETENTION_SECS", ""),
            ("OUTBOX_SQS_MAX_IN_FLIGHT", ""),
            ("OUTBOX_LISTEN_URL", ""),
            ("OUTBOX_METRICS_ADDR", " "),
            ("OUTBOX_LOG_FORMAT", ""),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "the database refused: {err}");
    assert!(!err.contains("OUTBOX_"), "{err}");
}

/// No AWS region anywhere (no variable, no profile, no instance metadata) is a usage error found
/// before the database is contacted: it was exit 1 after "database ready" (black-box run).
#[test]
fn no_aws_region_is_a_usage_error_before_the_database() {
    let out = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .env(
            "DATABASE_URL",
            "postgres://nobody@127.0.0.1:1/none?connect_timeout=2",
        )
        .env_remove("RUST_LOG")
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .env_remove("AWS_PROFILE")
        .env("AWS_CONFIG_FILE", "/nonexistent/aws-config")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/aws-credentials",
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .args(["relay", "--default-queue", "q"])
        .output()
        .expect("outbox runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no AWS region"), "{err}");
    assert!(!err.contains("cannot connect"), "{err}");
}

/// `outbox cleanup` without an age shows its usage, not the database URL the environment gave as
/// if it were required (`Usage: outbox cleanup --database-url <DATABASE_URL> <--older-than …>`:
/// black-box run).
#[test]
fn cleanup_without_an_age_shows_its_own_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .arg("cleanup")
        .output()
        .expect("outbox runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("Usage: outbox cleanup [OPTIONS] --older-than <AGE>"),
        "{err}"
    );
    assert!(!err.contains("--database-url"), "{err}");
}
