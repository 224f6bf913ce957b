//! The relay's start-up checks and the per-connection password seam, against a throwaway TLS-only
//! PostgreSQL (roles with SCRAM passwords; `postgres` trusted over TLS).

mod support;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use outbox_core::{Password, PasswordProvider, PgConnector};
use outbox_tests::sqs::TestQueue;
use std::process::Command;
use support::SERIAL;

use support::commands::{fails_fast, fails_usage, outbox, relay_cmd, succeeds};
use support::tls_cluster::TlsCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_start_up_checks_fail_fast_with_one_line() {
    let _serial = SERIAL.lock().await;
    let pg = TlsCluster::start();
    let admin = pg.admin("postgres").await;
    for db in ["fresh", "old", "app"] {
        admin
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .await
            .unwrap();
    }
    admin
        .batch_execute(
            "CREATE ROLE relay_ok LOGIN PASSWORD 'right-password';
             CREATE ROLE relay_ro LOGIN PASSWORD 'right-password';
             CREATE ROLE relay_nohist LOGIN PASSWORD 'right-password';",
        )
        .await
        .unwrap();
    let vf = pg.verify_full();
    for db in ["old", "app"] {
        succeeds(outbox(&pg.url("postgres", db, &vf)).arg("migrate"));
    }
    pg.admin("old")
        .await
        .batch_execute("DELETE FROM outbox_schema_history")
        .await
        .unwrap();
    pg.admin("app")
        .await
        .batch_execute(
            "GRANT USAGE ON SCHEMA public TO relay_ok, relay_ro, relay_nohist;
             GRANT SELECT ON outbox_events, outbox_schema_history TO relay_ok, relay_ro;
             GRANT SELECT ON outbox_events TO relay_nohist;
             GRANT UPDATE (attempts, retry_after, last_error, processed_at, dead_lettered_at)
                ON outbox_events TO relay_ok, relay_nohist;",
        )
        .await
        .unwrap();
    let role_url = |user: &str, password: &str| {
        format!(
            "postgres://{user}:{password}@127.0.0.1:{}/app?{vf}",
            pg.port()
        )
    };

    let free_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    fails_fast(
        &mut relay_cmd(&format!(
            "postgres://postgres@127.0.0.1:{free_port}/app?sslmode=require"
        )),
        &[&format!("127.0.0.1:{free_port}"), "Connection refused"],
    );
    fails_fast(
        &mut relay_cmd(&role_url("relay_ok", "wrong-password")),
        &["wrong password", "relay_ok"],
    );
    fails_fast(
        &mut relay_cmd(&pg.url("postgres", "app", "sslmode=disable")),
        &["the server requires TLS"],
    );
    fails_fast(
        &mut relay_cmd(&pg.url("postgres", "fresh", &vf)),
        &[
            "the outbox schema is missing in database fresh",
            "outbox migrate",
        ],
    );
    fails_fast(
        &mut relay_cmd(&pg.url("postgres", "old", &vf)),
        &[
            "is at version 0, this binary needs version",
            "outbox migrate",
        ],
    );
    fails_fast(
        &mut relay_cmd(&role_url("relay_ro", "right-password")),
        &["role relay_ro lacks UPDATE (attempts, retry_after", "GRANT"],
    );
    // A replica, or a session set read-only: every claim would fail while it reported ready.
    fails_fast(
        &mut relay_cmd(&format!(
            "{}&options=-c%20default_transaction_read_only%3Don",
            pg.url("postgres", "app", &vf)
        )),
        &[
            "database app is read-only",
            "default_transaction_read_only is on",
            "ALTER ROLE postgres SET default_transaction_read_only = off",
        ],
    );
    fails_fast(
        &mut relay_cmd(&role_url("relay_nohist", "right-password")),
        &["role relay_nohist lacks SELECT ON outbox_schema_history"],
    );
    fails_fast(
        relay_cmd(&role_url("relay_ok", "right-password")).args(["--retention", "7d"]),
        // The statement pastes into psql as it is (it held "(needed by --retention)").
        &[
            "lacks DELETE ON outbox_events",
            "`GRANT DELETE ON outbox_events TO relay_ok;`",
        ],
    );
    // It started and then only warned every minute that inbox retention failed.
    fails_fast(
        relay_cmd(&role_url("relay_ok", "right-password")).args(["--inbox-retention", "30d"]),
        &["role relay_ok lacks SELECT, DELETE ON processed_events"],
    );
    // --rds-iam: the password is an auth token made from the default AWS chain (here: the
    // environment). This server is not RDS, so it refuses the token, said as a token's refusal
    // with what to check (black-box run: "wrong password"); the token appears nowhere, not even in
    // debug logs.
    let no_password = format!("postgres://relay_ok@127.0.0.1:{}/app?{vf}", pg.port());
    let out = relay_cmd(&no_password)
        .arg("--rds-iam")
        .env("AWS_REGION", "eu-west-1")
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the RDS IAM auth token was refused")
            && err.contains("GRANT rds_iam")
            && err.contains("relay_ok"),
        "{err}"
    );
    assert!(
        !err.contains("X-Amz-Signature") && !err.contains("Action=connect"),
        "{err}"
    );
    // A password in the URL as well: refused before anything is contacted, not silently
    // replaced by the token.
    let out = relay_cmd(&role_url("relay_ok", "not-used"))
        .arg("--rds-iam")
        .env("AWS_REGION", "eu-west-1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("remove the password from the URL"), "{err}");
    // (`stats`: the relay refuses a missing region before, as a usage error of its publisher's.)
    fails_fast(
        outbox(&no_password)
            .args(["stats", "--rds-iam"])
            .env_remove("AWS_REGION")
            .env_remove("AWS_DEFAULT_REGION")
            .env("AWS_CONFIG_FILE", "/nonexistent")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
            // The AWS SDK warns about each place it looked for a region, one long line each
            // (IMDS's whole answer: black-box run): not shown unless RUST_LOG names it.
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")
            .env_remove("RUST_LOG"),
        &["RDS IAM auth needs an AWS region"],
    );
    // With the grants the README lists, the checks pass and the relay starts (then is stopped).
    let queue = TestQueue::standard().await;
    let mut ok = outbox(&role_url("relay_ok", "right-password"));
    let mut child = ok
        .args(["relay", "--default-queue", queue.url()])
        .env("AWS_ENDPOINT_URL_SQS", outbox_tests::sqs::endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(
        running,
        "the relay with the right grants keeps running: {logs}"
    );
    assert!(logs.contains("database ready"), "{logs}");
}

/// Hands out whatever password the test set last, and counts the calls.
#[derive(Clone, Default)]
struct Rotating {
    current: Arc<Mutex<String>>,
    calls: Arc<AtomicUsize>,
}

impl PasswordProvider for Rotating {
    type Error = Infallible;

    async fn password(&self) -> Result<Password, Infallible> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Password::new(self.current.lock().unwrap().clone()))
    }
}

#[derive(Debug)]
struct Sealed;

impl std::fmt::Display for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the vault is sealed")
    }
}

impl std::error::Error for Sealed {}

struct Failing;

impl PasswordProvider for Failing {
    type Error = Sealed;

    async fn password(&self) -> Result<Password, Sealed> {
        Err(Sealed)
    }
}

fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_provider_gives_each_new_connection_the_current_password() {
    let _serial = SERIAL.lock().await;
    let pg = TlsCluster::start();
    let admin = pg.admin("postgres").await;
    admin
        .batch_execute("CREATE ROLE rotating LOGIN PASSWORD 'first'")
        .await
        .unwrap();
    let provider = Rotating::default();
    *provider.current.lock().unwrap() = "first".into();
    // The URL's password is wrong on purpose: the provider's wins.
    let url = format!(
        "postgres://rotating:not-this-one@127.0.0.1:{}/postgres?{}",
        pg.port(),
        pg.verify_full()
    );
    let connector = PgConnector::from_url(&url)
        .unwrap()
        .password_provider(provider.clone());
    assert!(!format!("{connector:?}").contains("not-this-one"));
    let pool = connector.pool(3).unwrap();
    let old = pool
        .get()
        .await
        .expect("first connection with the first password");
    assert_eq!(provider.calls.load(Ordering::SeqCst), 1);

    admin
        .batch_execute("ALTER ROLE rotating PASSWORD 'second'")
        .await
        .unwrap();
    let refused = pool
        .get()
        .await
        .expect_err("the first password no longer works");
    assert!(
        chain(&refused).contains("password authentication failed"),
        "{}",
        chain(&refused)
    );
    *provider.current.lock().unwrap() = "second".into();
    let new = pool
        .get()
        .await
        .expect("a new connection with the rotated password");
    assert_eq!(
        provider.calls.load(Ordering::SeqCst),
        3,
        "one call per new connection"
    );
    // The connection opened with the old password keeps working.
    let one: i32 = old.query_one("SELECT 1", &[]).await.unwrap().get(0);
    let two: i32 = new.query_one("SELECT 2", &[]).await.unwrap().get(0);
    assert_eq!((one, two), (1, 2));
    drop((old, new));

    // A provider that fails: a clear error through the pool and through `connect`.
    let failing = PgConnector::from_url(&url)
        .unwrap()
        .password_provider(Failing);
    let e = failing
        .pool(1)
        .unwrap()
        .get()
        .await
        .expect_err("no password");
    assert!(chain(&e).contains("the vault is sealed"), "{}", chain(&e));
    let e = failing.connect_spawned().await.expect_err("no password");
    assert!(chain(&e).contains("the vault is sealed"), "{}", chain(&e));
}

/// A command line or setting that is invalid in itself is a usage error, exit 2, as `--help` says
/// and as clap's own are — found before anything is contacted (the database here does not exist).
/// They exited 1, like a failure to connect (found by a black-box run). What can only be found by
/// trying (a refused connection, a missing bucket) stays exit 1.
#[test]
fn invalid_settings_are_usage_errors_and_failures_are_not() {
    // Nothing listens on port 9: a command that got as far as connecting would fail with 1.
    let nowhere = "postgres://postgres@127.0.0.1:9/app?connect_timeout=1";
    let cases: Vec<(Command, &str)> = vec![
        (
            {
                let mut c = outbox(nowhere);
                c.env_remove("DATABASE_URL").arg("stats");
                c
            },
            "no database given",
        ),
        (
            {
                let mut c = outbox("postgres://u@h:notaport/db");
                c.arg("stats");
                c
            },
            "error: DATABASE_URL: ",
        ),
        // The flag's value is called by the flag's name (it was called DATABASE_URL).
        (
            {
                let mut c = outbox(nowhere);
                c.args(["stats", "--database-url", "postgres://u@h:notaport/db"]);
                c
            },
            "error: --database-url: ",
        ),
        (
            {
                let mut c = relay_cmd(nowhere);
                c.env(outbox_core::env::BATCH_SIZE, "lots");
                c
            },
            outbox_core::env::BATCH_SIZE,
        ),
        (
            {
                let mut c = relay_cmd(nowhere);
                c.args(["--batch-size", "0"]);
                c
            },
            "batch_size",
        ),
        (
            {
                let mut c = outbox(nowhere);
                c.arg("relay");
                c
            },
            "no queue or topic configured",
        ),
        (
            {
                let mut c = relay_cmd(nowhere);
                c.args(["--route", "order.*=not a url"]);
                c
            },
            "not a url",
        ),
        (
            {
                let mut c = relay_cmd(nowhere);
                c.args(["--inbox-retention", "30m"]);
                c
            },
            "too short: at least 1 h",
        ),
        (
            {
                let mut c = relay_cmd(nowhere);
                c.args(["--listen-url", "postgres://u@h:notaport/db"]);
                c
            },
            "--listen-url",
        ),
        (
            {
                let mut c = outbox(nowhere);
                c.args(["migrate", "--partitioned", "--ahead", "1"]);
                c
            },
            "from 2 to 100",
        ),
        (
            {
                // 1 000 was accepted, and every claim then took 6 000 locks (black-box run).
                let mut c = outbox(nowhere);
                c.args(["migrate", "--partitioned", "--ahead", "101"]);
                c
            },
            "from 2 to 100",
        ),
        (
            {
                let mut c = outbox(nowhere);
                c.args(["partitions", "maintain", "--drain-lock-timeout", "0s"]);
                c
            },
            "must be more than 0",
        ),
        (
            {
                let mut c = outbox(nowhere);
                c.args(["cleanup", "--inbox-older-than", "30m"]);
                c
            },
            "too short: at least 1 h",
        ),
        (
            {
                let mut c = outbox(&format!("{nowhere}&sslmode=prefer"));
                c.args(["--rds-iam", "migrate"]);
                c
            },
            "RDS IAM auth needs TLS",
        ),
        (
            {
                let mut c = outbox(
                    "postgres://u@127.0.0.1:9,127.0.0.1:10/db?sslmode=require&connect_timeout=1",
                );
                c.args(["--rds-iam", "stats"]);
                c
            },
            "the URL names several",
        ),
        // A retention as long as the relay's at most (they took up to 100 years).
        (
            {
                let mut c = outbox(nowhere);
                c.args(["partitions", "maintain", "--retention", "36000d"]);
                c
            },
            "`36000d`: a retention is at most 3660 days",
        ),
        (
            {
                let mut c = outbox(nowhere);
                c.args(["cleanup", "--older-than", "36000d"]);
                c
            },
            "a retention is at most 3660 days",
        ),
        // Either age will do (it said --older-than was required).
        (
            {
                let mut c = outbox(nowhere);
                c.arg("cleanup");
                c
            },
            "<--older-than <OLDER_THAN>|--inbox-older-than <INBOX_OLDER_THAN>>",
        ),
        (
            {
                let mut c = relay_cmd(nowhere);
                c.env("OUTBOX_NO_LISTEN", "maybe");
                c
            },
            "`maybe`: expected true or false",
        ),
        // A publish timeout no call fits in, found before connecting (it was exit 1, after).
        (
            {
                let mut c = relay_cmd(nowhere);
                c.env("OUTBOX_PUBLISH_TIMEOUT_MS", "5000");
                c
            },
            "publish_timeout (OUTBOX_PUBLISH_TIMEOUT_MS) (5s) must be above what the publisher needs for one call (10s",
        ),
        (
            {
                let mut c = relay_cmd(nowhere);
                c.env("OUTBOX_SQS_CALL_TIMEOUT_MS", "40000");
                c
            },
            "must be above what the publisher needs for one call (40s",
        ),
    ];
    for (mut cmd, expect) in cases {
        fails_usage(&mut cmd, expect);
    }
    // A negative value is refused for what it is (clap took `-1s` for an unknown flag: "unexpected
    // argument '-1' found").
    for (args, expect) in [
        (
            &["relay", "--poll-interval", "-1s"][..],
            "`-1s`: a duration cannot be negative",
        ),
        (
            &["relay", "--shutdown-grace", "-30s"],
            "`-30s`: a duration cannot be negative",
        ),
        (
            &["cleanup", "--older-than", "-7d"],
            "`-7d`: a duration cannot be negative",
        ),
        (
            &["relay", "--batch-size", "-5"],
            "`-5`: a whole number is needed",
        ),
        (
            &["relay", "--concurrency", "-1"],
            "`-1`: a whole number is needed",
        ),
        (
            &["relay", "--max-attempts", "-3"],
            "`-3`: a whole number is needed",
        ),
        (
            &["relay", "--offload-threshold", "-1"],
            "`-1`: a whole number is needed",
        ),
        (
            &["migrate", "--partitioned", "--ahead", "-3"],
            "`-3`: a number of partitions",
        ),
        (
            &["dead-letters", "list", "--limit", "-1"],
            "`-1`: a number of dead letters",
        ),
    ] {
        let err = fails_usage(outbox(nowhere).args(args), expect);
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    }
    // A value from a flag's variable is said to come from it (black-box run: clap named the
    // flag alone, which was not on the command line).
    fails_usage(
        outbox(nowhere).env("OUTBOX_LOG_FORMAT", "xml").arg("stats"),
        "for '--log-format <LOG_FORMAT>' (from the environment variable OUTBOX_LOG_FORMAT)",
    );
    fails_usage(
        relay_cmd(nowhere).env("OUTBOX_METRICS_ADDR", "bad"),
        "(from the environment variable OUTBOX_METRICS_ADDR)",
    );
    // Given on the command line, it is the flag's.
    let err = fails_usage(
        outbox(nowhere)
            .env_remove("OUTBOX_LOG_FORMAT")
            .args(["--log-format", "yaml", "stats"]),
        "invalid value 'yaml' for '--log-format <LOG_FORMAT>'",
    );
    assert!(!err.contains("environment variable"), "{err}");
    // The help pointer names the subcommand (found after parsing; clap's own say '--help').
    let err = fails_usage(relay_cmd(nowhere).args(["--batch-size", "0"]), "0");
    assert!(err.contains("'outbox relay --help'"), "{err}");
    // Trying and failing is exit 1, one line.
    fails_fast(outbox(nowhere).arg("stats"), &["127.0.0.1:9"]);
    // A switch's variable set to nothing is unset (it was a usage error).
    fails_fast(
        relay_cmd(nowhere)
            .env("OUTBOX_NO_LISTEN", "")
            .env("OUTBOX_PG_RDS_IAM", ""),
        &["127.0.0.1:9"],
    );
    // A variable whose flag is given is not read, global flags given after the subcommand
    // included (black-box run: `OUTBOX_LOG_FORMAT=garbage` failed `relay --log-format text`).
    fails_fast(
        relay_cmd(nowhere)
            .env("OUTBOX_LOG_FORMAT", "garbage")
            .args(["--log-format", "text"]),
        &["127.0.0.1:9"],
    );
    fails_fast(
        outbox(nowhere)
            .env("OUTBOX_LOG_FORMAT", "garbage")
            .args(["stats", "--log-format=text"]),
        &["127.0.0.1:9"],
    );
    // Listening switched off explicitly `false` beside a listen URL is no conflict (it was one:
    // black-box run); both on is, named as such.
    fails_fast(
        relay_cmd(nowhere)
            .env("OUTBOX_NO_LISTEN", "false")
            .env("OUTBOX_LISTEN_URL", nowhere),
        &["127.0.0.1:9"],
    );
    fails_usage(
        relay_cmd(nowhere)
            .env("OUTBOX_NO_LISTEN", "true")
            .args(["--listen-url", nowhere]),
        "--no-listen (or OUTBOX_NO_LISTEN) and --listen-url (or OUTBOX_LISTEN_URL) are both set",
    );
}

/// Under `--log-format json` the final error is a JSON object like the log lines (it was plain
/// text, which a log pipeline parsing JSON dropped or mangled), with the exit status and the hint.
#[test]
fn the_final_error_is_json_under_the_json_log_format() {
    let nowhere = "postgres://postgres@127.0.0.1:9/app?connect_timeout=1";
    for (args, status, says) in [
        (&["--log-format", "json", "stats"][..], 1, "127.0.0.1:9"),
        (
            &["--log-format", "json", "relay", "--batch-size", "0"],
            2,
            "batch_size",
        ),
        // Errors of the argument parser itself (they were clap's multi-line text).
        (
            &["--log-format", "json", "relay", "--batch-size", "abc"],
            2,
            "invalid value 'abc' for '--batch-size",
        ),
        (
            &["relay", "--log-format=json", "--nonexistent"],
            2,
            "unexpected argument '--nonexistent'",
        ),
        (
            &[
                "--log-format",
                "json",
                "migrate",
                "--partitioned",
                "--ahead",
                "1",
            ],
            2,
            "from 2 to 100",
        ),
        (
            &["--log-format", "json", "nope"],
            2,
            "unrecognized subcommand 'nope'",
        ),
    ] {
        let out = outbox(nowhere)
            .env("OUTBOX_SQS_DEFAULT_QUEUE_URL", "http://127.0.0.1:9/0/q")
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "{args:?}: {err}");
        let last = err.lines().last().unwrap_or_default();
        let line: serde_json::Value = serde_json::from_str(last)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {err}"));
        assert_eq!(line["level"], "ERROR", "{line}");
        assert_eq!(line["exit_status"], status, "{line}");
        assert!(
            line["message"].as_str().is_some_and(|m| m.contains(says)),
            "{line}"
        );
        assert!(line["timestamp"].is_string(), "{line}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        if status == 2 {
            assert!(
                line["help"].as_str().is_some_and(|h| h.ends_with("--help")),
                "{line}"
            );
        }
    }
    // The variable asks for JSON as the flag does.
    let out = outbox(nowhere)
        .env("OUTBOX_LOG_FORMAT", "json")
        .args(["dead-letters", "list", "--limit", "x"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line: serde_json::Value = serde_json::from_str(err.trim()).expect("JSON");
    assert_eq!(line["help"], "outbox dead-letters list --help", "{line}");
}

/// SIGTERM while the relay is still starting (here: connecting to a server that accepts and
/// never answers, for up to the 10 s connect timeout) stops it at once, says so and exits 0. It
/// killed the process without a word (exit 143), as a supervisor stopping a relay that could not
/// yet reach its database saw.
#[test]
fn a_signal_during_start_up_stops_the_relay_cleanly() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("postgres://postgres@{}/app", silent.local_addr().unwrap());
    let child = relay_cmd(&url)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "{:?}: {err}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("SIGTERM received"), "{err}");
    assert!(err.contains("stopped during start-up"), "{err}");
    drop(silent);
}

/// The start-up checks' connection stalling right after login (a middlebox holding its bytes,
/// both sockets open): the relay exits 1 within its connect timeout, saying so, and the session
/// it leaves ends itself within a minute. Before, it waited for ever without a word, and each
/// try left an unnamed session for good (black-box run). The same for the `--listen-url` check's
/// connection, which was said to point elsewhere, its session left for good (black-box recheck).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_up_check_stalled_after_login_fails_within_the_connect_timeout() {
    let db = outbox_tests::TestDb::new().await;
    let checks = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    // The checks' first statement never arrives; the start-up before it passes.
    checks.catch_first_sending(b"pg_is_in_recovery()");
    let listening = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    listening.catch_first_sending(b"LISTEN outbox_listen_check");
    let via = |proxy: &outbox_tests::BlackHoleProxy| {
        format!(
            "postgres://postgres@{}/{}?sslmode=disable&connect_timeout=2",
            proxy.addr(),
            db.name()
        )
    };
    let err = exits_1_within_6_s(relay_cmd(&via(&checks))).await;
    assert!(
        err.contains("did not answer the relay's start-up checks within 2 s of login"),
        "{err}"
    );
    let mut cmd = relay_cmd(&via(&checks));
    cmd.env("DATABASE_URL", db.url())
        .args(["--listen-url", &via(&listening)]);
    let err = exits_1_within_6_s(cmd).await;
    assert!(err.contains("did not answer its LISTEN within 2s"), "{err}");
    let mut left = Vec::new();
    for name in [
        outbox_core::RELAY_APPLICATION_NAME,
        outbox_core::LISTENER_APPLICATION_NAME,
    ] {
        let named = db.sessions_named(name).await;
        assert_eq!(
            named.len(),
            1,
            "the stalled session named {name}: {named:?}"
        );
        left.extend(named);
    }
    let limit = outbox_core::connect::IDLE_SESSION_TIMEOUT + Duration::from_secs(15);
    let ended = outbox_tests::eventually(limit, async || {
        let now = db.session_pids().await;
        !left.iter().any(|pid| now.contains(pid))
    })
    .await;
    assert!(ended, "a stalled session is still there: {left:?}");
}

/// Runs `cmd`, which must exit 1 within 6 s (killed after 10 s); its stderr.
async fn exits_1_within_6_s(mut cmd: Command) -> String {
    let mut child = cmd.stderr(std::process::Stdio::piped()).spawn().unwrap();
    let started = std::time::Instant::now();
    let exited = outbox_tests::eventually(Duration::from_secs(10), async || {
        child.try_wait().unwrap().is_some()
    })
    .await;
    if !exited {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(exited, "still waiting after 10 s: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(started.elapsed() < Duration::from_secs(6), "{err}");
    err
}
