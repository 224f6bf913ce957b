//! The product against a PostgreSQL that refuses plaintext (as RDS with `rds.force_ssl=1`): the CLI,
//! the relay (pool and LISTEN), libpq's `sslmode` semantics, PgBouncer's LISTEN options. Each test
//! starts its own throwaway TLS-only cluster (`initdb` as the `postgres` user). The start-up checks
//! and the password seam are in `startup.rs`.

mod support;

use std::time::{Duration, Instant};

use outbox_core::{PgConnector, emit_all};
use outbox_tests::TestEvent;
use outbox_tests::sqs::TestQueue;
use support::commands::{fails_fast, fails_usage, outbox, relay_cmd, succeeds};
use support::tls_cluster::TlsCluster;
use support::{RelaySpec, SERIAL, pending, wait_drained};

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
    // One `target` key per JSON line (the server was logged as a second `target`, which JSON
    // readers resolve to the last: the server was lost).
    let ready = logs
        .lines()
        .find(|l| l.contains("database ready"))
        .unwrap_or_default();
    assert_eq!(ready.matches("\"target\":").count(), 1, "{ready}");
    assert!(
        ready.contains(&format!("\"server\":\"127.0.0.1:{}\"", pg.port())),
        "{ready}"
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
    // IAM auth is refused before any token is made when the connection could be plaintext: a
    // conflict of settings, so a usage error.
    let prefer = pg.url("postgres", "postgres", "sslmode=prefer");
    let err = fails_usage(
        outbox(&prefer).args(["--rds-iam", "migrate"]),
        "RDS IAM auth needs TLS, but sslmode is prefer",
    );
    assert!(err.contains("--rds-iam: "), "{err}");
    fails_usage(
        outbox(&prefer).env("OUTBOX_PG_RDS_IAM", "1").arg("migrate"),
        "RDS IAM auth needs TLS",
    );
    // Missing settings are usage errors, said before anything is contacted (black-box run: exit
    // 1, from the first connection, as "cannot connect to PostgreSQL at  (…)" for no host). A
    // HOME without ~/.postgresql/root.crt (libpq's default CA file).
    let home = std::env::temp_dir().join("outbox-test-home-without-postgresql");
    std::fs::create_dir_all(&home).unwrap();
    let no_ca = pg.url("postgres", "postgres", "sslmode=verify-full");
    fails_usage(
        outbox(&no_ca).env("HOME", &home).arg("stats"),
        "needs the CA that signed the server's certificate",
    );
    fails_usage(outbox("postgres:///postgres").arg("stats"), "names no host");
    // An empty variable is unset, as for every setting.
    fails_usage(
        outbox("").arg("stats"),
        "no database given: set DATABASE_URL",
    );
    // A password the server asks for and the URL lacks: said where it goes (PGPASSWORD is not
    // read; a black-box run tried it, and got "invalid configuration: password missing").
    let no_password = pg.url("outbox_no_password", "postgres", "sslmode=require");
    fails_fast(
        outbox(&no_password).env("PGPASSWORD", "x").arg("stats"),
        &[
            "asks for a password",
            "PGPASSWORD and ~/.pgpass are not read",
        ],
    );
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
            // The LISTEN connection and the one advertising waiting both use --listen-url.
            listeners("direct-listen").await == 2
        })
        .await,
        "the LISTEN connections use --listen-url: {}",
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
    // So does one naming another database: it connects, but NOTIFY is per database, so it would
    // never hear a writer (it used to pass, and the relay polled without a word).
    client
        .batch_execute("CREATE DATABASE listen_elsewhere")
        .await
        .unwrap();
    let elsewhere = pg.url("postgres", "listen_elsewhere", &pg.verify_full());
    fails_fast(
        relay_cmd(&url).args(["--listen-url", &elsewhere]),
        &["--listen-url", "does not hear notifications"],
    );
}

/// The library: a certificate error is not retryable for a caller (`Config`), but the relay's
/// LISTEN connection (and the one advertising waiting) keeps trying at its backoff's pace, not in a
/// tight loop: once the server's certificate is right again (renewed after it expired, say), the
/// relay listens again and is woken by a commit. Before, each tried once and gave up for the rest
/// of the process's life, leaving the relay to its fallback poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_refused_a_certificate_listens_again_once_it_is_fixed() {
    let _serial = SERIAL.lock().await;
    let pg = TlsCluster::start();
    let good = pg.url("postgres", "postgres", &pg.verify_full());
    succeeds(outbox(&good).arg("migrate"));
    let admin = pg.admin("postgres").await;
    pg.serve_wrong_certificate(&admin, true).await;
    let verify = PgConnector::from_url(&good).unwrap();
    let e = verify
        .connect_spawned()
        .await
        .expect_err("the wrong certificate");
    assert_eq!(e.kind(), outbox_core::ErrorKind::Config, "{e}");
    let refusals = |pg: &TlsCluster| {
        std::fs::read_to_string(pg.cluster.dir.join("server.log"))
            .unwrap()
            .matches("could not accept SSL connection")
            .count()
    };
    // The server logs a refused handshake a moment after the client gave up.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = refusals(&pg);

    // The pool does not check the certificate (sslmode=require), the LISTEN connections do.
    let pool = PgConnector::from_url(&pg.url("postgres", "postgres", "sslmode=require"))
        .unwrap()
        .pool(2)
        .unwrap();
    let relay = outbox_core::Relay::builder(pool.clone(), outbox_tests::RecordingPublisher::new())
        .poll_interval(Duration::from_secs(60))
        .listen_with(verify)
        .build()
        .unwrap();
    let running = outbox_tests::RunningRelay::start(&relay);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = refusals(&pg) - before;
    // Two connections, each at 0, 0.1, 0.3, 0.7 and 1.5 s (± 20 %).
    assert!(
        (4..=24).contains(&attempts),
        "kept trying, at the backoff's pace: {attempts} refused handshakes in 2 s"
    );

    pg.serve_wrong_certificate(&admin, false).await;
    let listening = outbox_tests::eventually(Duration::from_secs(15), async || {
        admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&outbox_core::LISTENER_APPLICATION_NAME],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 1
    })
    .await;
    assert!(listening, "the relay listens again");
    let client = pool.get().await.unwrap();
    emit_all(&**client, &[TestEvent::new("a", 1)])
        .await
        .unwrap();
    assert!(
        outbox_tests::eventually(Duration::from_secs(5), async || relay
            .publisher()
            .ids()
            .len()
            == 1)
        .await,
        "woken by the commit (the poll is 60 s)"
    );
    running.stop().await;
}

/// libpq reads `sslrootcert` for each connection: a CA bundle replaced on disk (a rotated private
/// CA, a mounted secret) is trusted by the next connection of a long-running connector, and a file
/// caught half-written keeps the certificates read before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_root_file_is_trusted_by_the_next_connection() {
    let _serial = SERIAL.lock().await;
    let pg = TlsCluster::start();
    let root = pg.cluster.dir.join("rotating.crt");
    let replace = |from: &std::path::Path| {
        let tmp = pg.cluster.dir.join("rotating.tmp");
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, &root).unwrap();
    };
    replace(&pg.wrong_ca);
    let connector = PgConnector::from_url(&pg.url(
        "postgres",
        "postgres",
        &format!("sslmode=verify-full&sslrootcert={}", root.display()),
    ))
    .unwrap();
    let e = connector.connect_spawned().await.unwrap_err();
    assert!(e.to_string().contains("not signed by a trusted CA"), "{e}");

    replace(&pg.ca);
    let client = connector
        .connect_spawned()
        .await
        .unwrap_or_else(|e| panic!("the replaced root file is read again: {e}"));
    client.simple_query("SELECT 1").await.unwrap();

    let half = pg.cluster.dir.join("half.crt");
    std::fs::write(&half, "-----BEGIN CERTIFICATE-----\nMIIB").unwrap();
    replace(&half);
    connector
        .connect_spawned()
        .await
        .unwrap_or_else(|e| panic!("an unusable root file keeps the roots in hand: {e}"));
}
