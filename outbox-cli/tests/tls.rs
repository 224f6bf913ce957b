//! The product against a PostgreSQL that refuses plaintext (as RDS with `rds.force_ssl=1`): the CLI,
//! the relay (pool and LISTEN), libpq's `sslmode` semantics, the start-up checks, and the password
//! seam. Each test starts its own throwaway TLS-only cluster (`initdb` as the `postgres` user).

mod support;

use std::convert::Infallible;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outbox_core::{Password, PasswordProvider, PgConnector, emit_all};
use outbox_tests::TestEvent;
use outbox_tests::sqs::TestQueue;
use support::tls_cluster::TlsCluster;
use support::{RelaySpec, SERIAL, pending, wait_drained};

fn outbox(url: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_outbox"));
    cmd.env("DATABASE_URL", url)
        .env_remove("RUST_LOG")
        .env_remove("OUTBOX_PG_RDS_IAM");
    cmd
}

fn succeeds(cmd: &mut Command) -> String {
    let out = cmd.output().expect("outbox runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `cmd`, which must exit 1 within 5 s with exactly one line on stderr containing `expect`.
fn fails_fast(cmd: &mut Command, expect: &[&str]) -> String {
    let started = Instant::now();
    let out = cmd.output().expect("outbox runs");
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
    assert!(
        took < Duration::from_secs(5),
        "{cmd:?} took {took:?}: {err}"
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{cmd:?}: one line expected, got:\n{err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    for e in expect {
        assert!(err.contains(e), "{cmd:?}: `{e}` not in: {err}");
    }
    err
}

fn relay_cmd(url: &str) -> Command {
    let mut cmd = outbox(url);
    cmd.args([
        "relay",
        "--default-queue",
        "http://127.0.0.1:9/000000000000/never",
    ])
    .env("AWS_REGION", "us-east-1")
    .env("AWS_ACCESS_KEY_ID", "test")
    .env("AWS_SECRET_ACCESS_KEY", "test");
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_and_relay_work_over_tls_only_and_never_try_plaintext() {
    let _serial = SERIAL.lock().await;
    let pg = TlsCluster::start();
    let require = pg.url("postgres", "postgres", "sslmode=require");
    let verify_full = pg.url("postgres", "postgres", &pg.verify_full());
    let refusals = pg.plaintext_refusals();

    let first = succeeds(outbox(&require).arg("migrate"));
    assert!(first.contains("applied V1__"), "{first}");
    assert_eq!(
        succeeds(outbox(&verify_full).arg("migrate")).trim(),
        "schema is up to date"
    );
    for url in [&require, &verify_full] {
        let stats = succeeds(outbox(url).args(["stats", "--json"]));
        assert!(stats.contains("\"pending\": 0"), "{stats}");
        succeeds(outbox(url).args(["dead-letters", "list"]));
        succeeds(outbox(url).args(["dead-letters", "retry", "--all"]));
    }

    // The relay, end to end to fauxqs; a 60 s poll so only LISTEN can deliver new events quickly.
    let pool = PgConnector::from_url(&verify_full)
        .unwrap()
        .pool(4)
        .unwrap();
    let queue = TestQueue::standard().await;
    let client = pool.get().await.unwrap();
    emit_all(&**client, &[TestEvent::new("a", 1), TestEvent::new("b", 1)])
        .await
        .unwrap();
    let mut relay = RelaySpec::new(
        verify_full.clone(),
        outbox_tests::sqs::endpoint(),
        queue.url().to_string(),
    )
    .arg("--poll-interval")
    .arg("60s")
    .spawn();
    wait_drained(
        &pool,
        Duration::from_secs(20),
        "events written before the relay",
    )
    .await;
    let logs = relay.logs();
    assert!(
        logs.contains("database ready") && logs.contains("\"tls\":true"),
        "{logs}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let woken = Instant::now();
    emit_all(&**client, &[TestEvent::new("c", 1)])
        .await
        .unwrap();
    wait_drained(&pool, Duration::from_secs(10), "an event after start-up").await;
    assert!(
        woken.elapsed() < Duration::from_secs(5),
        "LISTEN woke the relay"
    );
    let listener_tls: Vec<bool> = client
        .query(
            "SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
              WHERE a.application_name = $1",
            &[&outbox_core::LISTENER_APPLICATION_NAME],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(listener_tls, vec![true], "one LISTEN connection, over TLS");
    relay.sigterm();
    assert!(
        relay.wait(Duration::from_secs(10)).success(),
        "{}",
        relay.logs()
    );
    assert_eq!(queue.receive_all(3, Duration::from_secs(10)).await.len(), 3);
    assert_eq!(pending(&pool).await, 0);
    // The server logs every refused plaintext attempt: with require and above there was none.
    assert_eq!(
        pg.plaintext_refusals(),
        refusals,
        "a plaintext connection was tried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_host_and_plaintext_failures_are_fast_one_line_errors() {
    let _serial = SERIAL.lock().await;
    let pg = TlsCluster::start();
    let target = format!("127.0.0.1:{}", pg.port());
    let wrong_ca = pg.url(
        "postgres",
        "postgres",
        &format!("sslmode=verify-full&sslrootcert={}", pg.wrong_ca.display()),
    );
    fails_fast(
        outbox(&wrong_ca).arg("migrate"),
        &[&target, "not signed by a trusted CA"],
    );
    fails_fast(
        &mut relay_cmd(&wrong_ca),
        &[&target, "not signed by a trusted CA"],
    );
    // verify-ca with the wrong CA fails too; with the right CA it ignores the host name.
    let ca_only = |ca: &std::path::Path| {
        format!(
            "postgres://postgres@localhost:{}/postgres?sslmode=verify-ca&sslrootcert={}",
            pg.port(),
            ca.display()
        )
    };
    fails_fast(
        outbox(&ca_only(&pg.wrong_ca)).arg("stats"),
        &["not signed by a trusted CA"],
    );
    succeeds(outbox(&ca_only(&pg.ca)).arg("migrate"));
    // The certificate is for 127.0.0.1, not for `localhost`.
    let wrong_host = format!(
        "postgres://postgres@localhost:{}/postgres?{}",
        pg.port(),
        pg.verify_full()
    );
    fails_fast(
        outbox(&wrong_host).arg("migrate"),
        &["localhost", "not valid for this host name"],
    );
    let disable = pg.url("postgres", "postgres", "sslmode=disable");
    fails_fast(
        outbox(&disable).arg("migrate"),
        &[&target, "no encryption", "the server requires TLS"],
    );
    fails_fast(&mut relay_cmd(&disable), &["no encryption"]);
    // IAM auth is refused before any token is made when the connection could be plaintext.
    let prefer = pg.url("postgres", "postgres", "sslmode=prefer");
    fails_fast(
        outbox(&prefer).args(["--rds-iam", "migrate"]),
        &[
            "--rds-iam: ",
            "RDS IAM auth needs TLS, but sslmode is prefer",
        ],
    );
}

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
    fails_fast(
        &mut relay_cmd(&role_url("relay_nohist", "right-password")),
        &["role relay_nohist lacks SELECT ON outbox_schema_history"],
    );
    fails_fast(
        relay_cmd(&role_url("relay_ok", "right-password")).args(["--retention", "7d"]),
        &["lacks DELETE ON outbox_events"],
    );
    // --rds-iam: the password is an auth token made from the default AWS chain (here: the
    // environment). This server is not RDS, so it refuses the token as a wrong password; the token
    // appears nowhere, not even in debug logs.
    let out = relay_cmd(&role_url("relay_ok", "not-used"))
        .arg("--rds-iam")
        .env("AWS_REGION", "eu-west-1")
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("wrong password") && err.contains("relay_ok"),
        "{err}"
    );
    assert!(
        !err.contains("X-Amz-Signature") && !err.contains("Action=connect"),
        "{err}"
    );
    fails_fast(
        relay_cmd(&role_url("relay_ok", "not-used"))
            .arg("--rds-iam")
            .env_remove("AWS_REGION")
            .env_remove("AWS_DEFAULT_REGION")
            .env("AWS_CONFIG_FILE", "/nonexistent")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
            // The AWS SDK warns about each place it looked for a region: not ours to count.
            .env("RUST_LOG", "off"),
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

/// PgBouncer in transaction mode cannot carry LISTEN: `--no-listen` polls only, `--listen-url`
/// listens on a direct connection (here: the same server, told apart by its application name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_listen_polls_only_and_listen_url_listens_on_its_own_connection() {
    let _serial = SERIAL.lock().await;
    let pg = TlsCluster::start();
    let url = pg.url("postgres", "postgres", &pg.verify_full());
    succeeds(outbox(&url).arg("migrate"));
    let pool = PgConnector::from_url(&url).unwrap().pool(2).unwrap();
    let client = pool.get().await.unwrap();
    let queue = TestQueue::standard().await;
    let listeners = async |name: &str| -> i64 {
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .await
            .unwrap()
            .get(0)
    };
    let spec = RelaySpec::new(
        url.clone(),
        outbox_tests::sqs::endpoint(),
        queue.url().into(),
    );

    // This one with sslmode=require (no verification), the next with verify-full.
    let mut relay = RelaySpec::new(
        pg.url("postgres", "postgres", "sslmode=require"),
        outbox_tests::sqs::endpoint(),
        queue.url().into(),
    )
    .arg("--no-listen")
    .arg("--poll-interval")
    .arg("300ms")
    .spawn();
    emit_all(&**client, &[TestEvent::new("a", 1)])
        .await
        .unwrap();
    wait_drained(&pool, Duration::from_secs(10), "polling only").await;
    assert_eq!(listeners(outbox_core::LISTENER_APPLICATION_NAME).await, 0);
    assert!(relay.logs().contains("LISTEN off"), "{}", relay.logs());
    relay.sigterm();
    assert!(relay.wait(Duration::from_secs(10)).success());

    let direct = pg.url(
        "postgres",
        "postgres",
        &format!("{}&application_name=direct-listen", pg.verify_full()),
    );
    let mut relay = spec
        .clone()
        .arg("--listen-url")
        .arg(&direct)
        .arg("--poll-interval")
        .arg("60s")
        .spawn();
    assert!(
        outbox_tests::running::eventually(Duration::from_secs(10), async || {
            listeners("direct-listen").await == 1
        })
        .await,
        "the LISTEN connection uses --listen-url: {}",
        relay.logs()
    );
    emit_all(&**client, &[TestEvent::new("b", 1)])
        .await
        .unwrap();
    wait_drained(&pool, Duration::from_secs(5), "woken through --listen-url").await;
    relay.sigterm();
    assert!(relay.wait(Duration::from_secs(10)).success());

    // A wrong --listen-url fails at start instead of silently polling.
    let wrong = pg.url("postgres", "postgres", "sslmode=disable");
    fails_fast(
        relay_cmd(&url).args(["--listen-url", &wrong]),
        &["--listen-url", "no encryption"],
    );
}

/// The library: a certificate error is not retryable, a wrong password is; a LISTEN connection
/// whose certificate is refused is tried once (one error), and polling keeps the relay working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_certificate_is_final_and_the_listener_does_not_retry_it() {
    let _serial = SERIAL.lock().await;
    let pg = TlsCluster::start();
    let good = pg.url("postgres", "postgres", &pg.verify_full());
    succeeds(outbox(&good).arg("migrate"));
    let bad = PgConnector::from_url(&pg.url(
        "postgres",
        "postgres",
        &format!("sslmode=verify-full&sslrootcert={}", pg.wrong_ca.display()),
    ))
    .unwrap();
    let e = bad.connect_spawned().await.expect_err("wrong CA");
    assert_eq!(e.kind(), outbox_core::ErrorKind::Config, "{e}");
    let refusals = |pg: &TlsCluster| {
        std::fs::read_to_string(pg.cluster.dir.join("server.log"))
            .unwrap()
            .matches("could not accept SSL connection")
            .count()
    };
    // The server logs the refused handshake a moment after the client gave up.
    assert!(
        outbox_tests::eventually(Duration::from_secs(3), async || refusals(&pg) == 1).await,
        "the server logs refused handshakes"
    );
    let before = refusals(&pg);

    let good = PgConnector::from_url(&good).unwrap();
    let relay = outbox_core::Relay::builder(
        good.pool(2).unwrap(),
        outbox_tests::RecordingPublisher::new(),
    )
    .poll_interval(Duration::from_millis(200))
    .listen_with(bad)
    .build()
    .unwrap();
    let running = outbox_tests::RunningRelay::start(&relay);
    let client = good.connect_spawned().await.unwrap();
    emit_all(&client, &[TestEvent::new("a", 1)]).await.unwrap();
    assert!(
        outbox_tests::eventually(Duration::from_secs(5), async || relay
            .publisher()
            .ids()
            .len()
            == 1)
        .await,
        "polling delivers without LISTEN"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        refusals(&pg) - before,
        1,
        "one LISTEN attempt, no retry loop"
    );
    running.stop().await;
}
