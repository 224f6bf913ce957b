//! The `outbox` binary end to end against real PostgreSQL (and fauxqs for `relay`).

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use outbox_core::{FailureKind, PublishOutcome, Relay, emit_all};
use outbox_queries::queries::admin;
use outbox_tests::sqs::TestQueue;
use outbox_tests::{FlakyPublisher, TestDb, TestEvent};
use uuid::Uuid;

fn outbox(db: &TestDb) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_outbox"));
    outbox_tests::without_outbox_env(&mut cmd);
    cmd.env("DATABASE_URL", db.url()).env_remove("RUST_LOG");
    cmd
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("outbox runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Five events; the first two dead-lettered (types order.test on aggregates a, b), one processed.
async fn prepared(db: &TestDb) -> Vec<Uuid> {
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("a", 1),
            TestEvent::new("b", 1),
            TestEvent::new("c", 1),
            TestEvent::new("d", 1),
            TestEvent::new("a", 2),
        ],
    )
    .await
    .unwrap();
    db.dead_letter(&[ids[0]], "rejected: invalid content").await;
    db.dead_letter(&[ids[1]], "rejected").await;
    db.mark_processed(&[ids[2]]).await;
    ids
}

#[tokio::test]
async fn migrate_applies_the_schema_once() {
    let db = TestDb::empty().await;
    let first = run(outbox(&db).arg("migrate"));
    let applied = stdout(&first);
    assert!(
        applied.starts_with("applied V1__outbox_events\n"),
        "{applied}"
    );
    assert!(
        applied.lines().all(|l| l.starts_with("applied V")),
        "{applied}"
    );
    let second = run(outbox(&db).arg("migrate"));
    assert_eq!(stdout(&second).trim(), "schema is up to date");
}

#[tokio::test]
async fn stats_numbers_match_the_table() {
    let db = TestDb::new().await;
    prepared(&db).await;
    let out = run(outbox(&db).args(["stats", "--json"]));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["pending"], 2, "{s}");
    // a/2 is behind a/1, a dead letter.
    assert_eq!(
        (s["due_now"].clone(), s["held_back"].clone()),
        (1.into(), 1.into())
    );
    assert_eq!(s["waiting_retry"], 0);
    assert_eq!(s["dead_letters"], 2);
    assert_eq!(s["blocked_aggregates"], 2);
    assert_eq!(s["published_last_hour"], 1);
    assert!(s["oldest_pending_age_secs"].as_f64().unwrap() >= 0.0);
    let table = stdout(&run(outbox(&db).arg("stats")));
    assert!(
        table.contains("dead letters")
            && table.contains("blocked aggregates")
            && table.contains("behind an earlier one")
            // Not "waiting for retry": events put back uncounted (a destination down) are in it.
            && table.contains("due later")
            && table.contains("(retry, or put back)"),
        "{table}"
    );
}

#[tokio::test]
async fn dead_letter_commands_change_exactly_the_rows_asked_for() {
    let db = TestDb::new().await;
    let ids = prepared(&db).await;
    let client = db.pool().get().await.unwrap();
    let dead = |id: Uuid| {
        let client = &client;
        async move {
            admin::get_outbox_event()
                .bind(client, &id)
                .opt()
                .await
                .unwrap()
                .map(|r| r.dead_lettered_at.is_some())
        }
    };

    let list = stdout(&run(outbox(&db).args(["dead-letters", "list"])));
    assert!(
        list.contains(&ids[0].to_string()) && list.contains(&ids[1].to_string()),
        "{list}"
    );
    assert!(list.contains("rejected: invalid content"));
    assert!(!list.contains("not shown"), "{list}");
    // Its times are UTC, and say so.
    assert!(list.contains("dead since (UTC)"), "{list}");
    // Fewer shown than there are: said so (black-box run: `--limit 3` of 27 printed 3 rows and
    // nothing else).
    let one = stdout(&run(outbox(&db).args([
        "dead-letters",
        "list",
        "--limit",
        "1",
    ])));
    assert_eq!(one.matches("rejected: invalid content").count(), 1, "{one}");
    assert!(one.contains("more not shown"), "{one}");
    // With --json, the note goes to stderr as a log line, in the log format asked for (it was
    // plain text under `--log-format json`, which a log pipeline cannot parse).
    let capped = run(outbox(&db).args([
        "--log-format",
        "json",
        "dead-letters",
        "list",
        "--limit",
        "1",
        "--json",
    ]));
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&capped.stdout).unwrap();
    assert_eq!(listed.len(), 1);
    let notes = String::from_utf8_lossy(&capped.stderr);
    let lines: Vec<serde_json::Value> = notes
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("more not shown"))),
        "{notes}"
    );
    let json = run(outbox(&db).args(["dead-letters", "list", "--aggregate-id", "b", "--json"]));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], ids[1].to_string());
    // `--limit 0` printed "no dead letters" while there were some: a usage error now.
    let zero = outbox(&db)
        .args(["dead-letters", "list", "--limit", "0"])
        .output()
        .unwrap();
    assert_eq!(zero.status.code(), Some(2));
    // The parser's hint names the subcommand's help (it said "try '--help'", which a shell
    // runs as no command; black-box run).
    let zero_err = String::from_utf8_lossy(&zero.stderr);
    // Says what it takes (clap's range check printed `1..9223372036854775807`).
    assert!(zero_err.contains("1 or more"), "{zero_err}");
    assert!(!zero_err.contains("9223372036854775807"), "{zero_err}");
    assert!(
        zero_err.contains("try 'outbox dead-letters list --help'"),
        "{zero_err}"
    );

    // No selection: refused, nothing changed.
    let refused = outbox(&db)
        .args(["dead-letters", "retry"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--all"));
    assert_eq!(dead(ids[0]).await, Some(true));

    run(outbox(&db).args(["dead-letters", "retry", &ids[0].to_string()]));
    assert_eq!(dead(ids[0]).await, Some(false), "retried");
    assert_eq!(dead(ids[1]).await, Some(true), "untouched");

    // Purge asks for confirmation; without a terminal and --yes it refuses.
    let refused = outbox(&db)
        .args(["dead-letters", "purge", "--aggregate-id", "b"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));
    assert_eq!(dead(ids[1]).await, Some(true));
    // Found before the database is contacted: the same refusal with no database to reach, and
    // with nothing that matches.
    for args in [
        &["--aggregate-id", "b"][..],
        &["--aggregate-id", "nothing-matches"][..],
    ] {
        let refused = outbox(&db)
            .args(["dead-letters", "purge"])
            .args(args)
            .env("DATABASE_URL", "postgres://postgres@127.0.0.1:9/none")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(2), "{refused:?}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));
    }
    let purged = stdout(&run(outbox(&db).args([
        "dead-letters",
        "purge",
        "--aggregate-id",
        "b",
        "--yes",
    ])));
    assert!(purged.contains("purged 1"), "{purged}");
    assert_eq!(dead(ids[1]).await, None, "deleted");
    for id in &ids[2..] {
        assert!(dead(*id).await.is_some(), "other rows kept");
    }
}

#[tokio::test]
async fn cleanup_deletes_only_old_processed_rows() {
    let db = TestDb::new().await;
    let ids = prepared(&db).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let client = db.pool().get().await.unwrap();
    db.mark_processed(&[ids[3]]).await;
    let out = stdout(&run(outbox(&db).args(["cleanup", "--older-than", "1s"])));
    assert!(out.contains("deleted 1 "), "{out}");
    let exists = async |id: Uuid| {
        admin::get_outbox_event()
            .bind(&client, &id)
            .opt()
            .await
            .unwrap()
            .is_some()
    };
    assert!(!exists(ids[2]).await);
    for id in [ids[0], ids[1], ids[3], ids[4]] {
        assert!(exists(id).await);
    }
    let bad = outbox(&db)
        .args(["cleanup", "--older-than", "soon"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "usage error");
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("the relay did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads `child`'s piped stderr to its end on a thread of its own.
fn capture_stderr(child: &mut Child) -> std::thread::JoinHandle<String> {
    let mut stderr = child.stderr.take().expect("stderr is piped");
    std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

/// `outbox relay` delivers to SQS, serves metrics, logs the documented fields but no payload and no
/// password, and exits cleanly on SIGTERM with nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_delivers_serves_metrics_logs_safely_and_stops_on_sigterm() {
    let db = TestDb::new().await;
    let queue = TestQueue::standard().await;
    let secret_payload = "SECRET-PAYLOAD-TEXT-7f3a";
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = (0..40)
        .map(|n| TestEvent::new(format!("o-{}", n % 5), n).note(secret_payload))
        .collect();
    let ids = emit_all(&client, &events).await.unwrap();

    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    // Trust auth accepts any password: one in the URL must never show up in the logs.
    let url_with_password = db.url().replace("postgres@", "postgres:hunter2-password@");
    let mut child = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .args([
            "relay",
            "--default-queue",
            queue.url(),
            "--metrics-addr",
            &addr,
        ])
        .args([
            "--log-format",
            "json",
            "--poll-interval",
            "200ms",
            "--shutdown-grace",
            "5s",
            // Off with a standard queue, and said so (it was ignored in silence).
            "--batch-aggregates",
            // Says what it applied (nothing here: the schema is current).
            "--migrate",
        ])
        .env("DATABASE_URL", &url_with_password)
        .env("RUST_LOG", "debug")
        .env("OUTBOX_METRICS_INTERVAL_MS", "100")
        .env("AWS_ENDPOINT_URL_SQS", outbox_tests::sqs::endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "secret-key-never-logged")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let logs = capture_stderr(&mut child);

    let received = queue.receive_all(40, Duration::from_secs(20)).await;
    let got: std::collections::HashSet<String> = received
        .iter()
        .map(|m| m.attributes["event_id"].clone())
        .collect();
    let want: std::collections::HashSet<String> = ids.iter().map(|i| i.to_string()).collect();
    assert_eq!(got, want, "every event delivered");

    // Metrics after a known run: 40 published, nothing pending. SQS has the messages before the
    // batch commits and counts them, and the gauges start at 0 before their first refresh: wait
    // for the counters, then for a refresh after them.
    let expected = [
        r#"outbox_events_published_total{event_type="order.test"} 40"#,
        "outbox_pending_events 0",
        "outbox_dead_letter_events 0",
        "outbox_blocked_aggregates 0",
        "outbox_commit_to_publish_seconds_count 40",
    ];
    let mut metrics = String::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        metrics = http_get(&addr, "/metrics");
        if expected.iter().all(|e| metrics.lines().any(|l| l == *e)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(metrics.starts_with("HTTP/1.1 200 OK"), "{metrics}");
    for line in expected {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing `{line}` in\n{metrics}"
        );
    }
    for name in [
        "outbox_oldest_pending_age_seconds",
        "outbox_batch_duration_seconds_bucket",
    ] {
        assert!(metrics.contains(name), "missing {name}");
    }
    assert!(http_get(&addr, "/").starts_with("HTTP/1.1 404"));

    let stopping = Instant::now();
    sigterm(&child);
    let status = wait_with_timeout(&mut child, Duration::from_secs(10));
    assert!(status.success(), "clean exit on SIGTERM: {status:?}");
    assert!(stopping.elapsed() < Duration::from_secs(6));
    let s = admin::outbox_stats().bind(&client).one().await.unwrap();
    assert_eq!((s.pending, s.dead_letters), (0, 0), "nothing lost");

    let logs = logs.join().unwrap();
    assert!(
        !logs.contains(secret_payload),
        "a payload leaked into the logs"
    );
    assert!(
        !logs.contains("hunter2-password"),
        "the DSN password leaked into the logs"
    );
    assert!(
        !logs.contains("secret-key-never-logged"),
        "the AWS secret leaked into the logs"
    );
    let published: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["message"] == "published")
        .collect();
    assert_eq!(published.len(), 40, "one log line per published event");
    for field in ["event_id", "event_type", "aggregate_id", "attempt"] {
        assert!(
            published.iter().all(|v| !v[field].is_null()),
            "every line has {field}"
        );
    }
    assert!(logs.contains("SIGTERM received"));
    assert!(
        logs.contains("--migrate: the schema is up to date"),
        "{logs}"
    );
    assert!(
        logs.contains("batch_aggregates is off: it needs one FIFO destination")
            && logs.contains("the destination is not FIFO"),
        "{logs}"
    );
}

/// A second SIGTERM during a graceful shutdown that waits on a hung publish exits at once (it was
/// ignored: the relay waited out its grace period whatever the operator did); the batch in flight
/// is rolled back with the connection, so its events stay pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_cuts_a_graceful_shutdown_short_and_loses_nothing() {
    let db = TestDb::new().await;
    let queue = TestQueue::standard().await;
    let fauxqs: std::net::SocketAddr = outbox_tests::sqs::endpoint()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let proxy = outbox_tests::BlackHoleProxy::start(fauxqs).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .args(["relay", "--default-queue", queue.url()])
        .args(["--poll-interval", "100ms", "--shutdown-grace", "60s"])
        .env("OUTBOX_PUBLISH_TIMEOUT_MS", "60000")
        .env("OUTBOX_SQS_CALL_TIMEOUT_MS", "30000")
        // The publish waits for its call (by default a call still running after 1 s goes on
        // without it, and no batch stays in flight).
        .env("OUTBOX_SQS_CALL_WAIT_MS", "60000")
        .env("DATABASE_URL", db.url())
        .env("AWS_ENDPOINT_URL_SQS", format!("http://{}", proxy.addr()))
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    emit_all(&client, &[TestEvent::new("first", 1)])
        .await
        .unwrap();
    assert_eq!(queue.receive_all(1, Duration::from_secs(20)).await.len(), 1);
    // The network to SQS goes dark: the next batch's publish hangs.
    proxy.black_hole();
    let events: Vec<TestEvent> = (0..5).map(|n| TestEvent::new("later", n)).collect();
    emit_all(&client, &events).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;

    sigterm(&child);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first signal waits for the batch in flight"
    );
    let cut = Instant::now();
    sigterm(&child);
    let status = wait_with_timeout(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(
        cut.elapsed() < Duration::from_secs(3),
        "{:?}",
        cut.elapsed()
    );
    let pending = || async {
        admin::outbox_stats()
            .bind(&client)
            .one()
            .await
            .unwrap()
            .pending
    };
    let start = Instant::now();
    while pending().await != 5 && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(pending().await, 5, "the batch in flight was rolled back");
}

#[tokio::test]
async fn relay_fails_fast_on_a_queue_that_does_not_exist() {
    let db = TestDb::new().await;
    let missing = format!(
        "{}/000000000000/no-such-queue-{}",
        outbox_tests::sqs::endpoint(),
        Uuid::new_v4().simple()
    );
    let out = outbox(&db)
        .args([
            "relay",
            "--default-queue",
            &missing,
            "--no-ordering",
            "--batch-aggregates",
        ])
        .env("AWS_ENDPOINT_URL_SQS", outbox_tests::sqs::endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-queue"),
        "the error names the queue: {err}"
    );
    // Without ordering there are no waves: said at info, not a warning about waves (black-box run).
    assert!(
        err.contains("batch_aggregates has no effect with ordering off"),
        "{err}"
    );
}

/// A bad `--route` is refused before the database is touched: `--migrate` on an empty database
/// used to apply every migration first. One without `=` is a usage error (exit 2; it was 1). A bad `--listen-url` is named as such (it was called
/// `DATABASE_URL` in the error).
#[tokio::test]
async fn relay_settings_are_checked_before_the_database_is_touched() {
    let db = TestDb::empty().await;
    let out = outbox(&db)
        .args(["relay", "--migrate", "--route", "order.*"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a usage error: {err}");
    assert!(
        err.contains("--route") && err.contains("order.*") && err.contains("PATTERN=QUEUE_URL"),
        "{err}"
    );
    // The publisher's own checks too: a target that is neither a queue URL nor a topic ARN.
    let out = outbox(&db)
        .args(["relay", "--migrate", "--route", "order.*=not a url"])
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a usage error too: {err}");
    assert!(err.contains("not a url"), "{err}");
    let tables: i64 = db
        .connect()
        .await
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'outbox%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "nothing migrated: {err}");

    let db = TestDb::new().await;
    let queue = format!("{}/000000000000/q", outbox_tests::sqs::endpoint());
    let out = local_aws(&mut outbox(&db))
        .args([
            "relay",
            "--default-queue",
            &queue,
            "--listen-url",
            "host=h user",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--listen-url: "), "{err}");
    assert!(!err.contains("DATABASE_URL"), "{err}");
}

/// The child's AWS settings: every service (SQS, SNS, S3) on the local emulator.
fn local_aws(cmd: &mut Command) -> &mut Command {
    cmd.env("AWS_ENDPOINT_URL", outbox_tests::sqs::endpoint())
        .env("AWS_ENDPOINT_URL_SQS", outbox_tests::sqs::endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
}

#[tokio::test]
async fn relay_routes_to_an_sns_topic_and_refuses_bad_targets_and_offload_settings() {
    let db = TestDb::new().await;
    let subscriber = TestQueue::standard().await;
    let unrouted = TestQueue::standard().await;
    let sdk = outbox_tests::sqs::sdk_config().await;
    let sns = aws_sdk_sns::Client::from_conf(
        aws_sdk_sns::config::Builder::from(&sdk)
            .endpoint_url(outbox_tests::sqs::endpoint())
            .build(),
    );
    let topic = sns
        .create_topic()
        .name(format!("outbox-cli-{}", Uuid::new_v4().simple()))
        .send()
        .await
        .expect("CreateTopic on the local emulator (bash scripts/services.sh starts it)")
        .topic_arn()
        .unwrap()
        .to_owned();
    let queue_arn = subscriber
        .client()
        .get_queue_attributes()
        .queue_url(subscriber.url())
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes()
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                .cloned()
        })
        .unwrap();
    sns.subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(queue_arn)
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let ids = emit_all(&client, &[TestEvent::new("t-1", 1)])
        .await
        .unwrap();

    let route = format!("order.*={topic}");
    let mut child = local_aws(&mut outbox(&db))
        .args([
            "relay",
            "--route",
            &route,
            "--default-queue",
            unrouted.url(),
        ])
        .args(["--poll-interval", "200ms"])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let received = subscriber.receive_all(1, Duration::from_secs(20)).await;
    sigterm(&child);
    assert!(wait_with_timeout(&mut child, Duration::from_secs(15)).success());
    assert_eq!(received.len(), 1, "the event went through the topic");
    assert_eq!(received[0].attributes["event_id"], ids[0].to_string());
    assert!(
        unrouted
            .receive_all(1, Duration::from_secs(1))
            .await
            .is_empty()
    );

    // Each mistake is one clear line at start-up, and nothing is relayed.
    let missing_bucket = format!("outbox-cli-missing-{}", Uuid::new_v4().simple());
    // Exit 2 for a setting invalid in itself, 1 for what only trying finds (a missing bucket).
    let cases: Vec<(Vec<&str>, &str, i32)> = vec![
        (
            vec!["--route", "order.*=arn:aws:sqs:us-east-1:000000000000:q"],
            "is an ARN but not of an SNS topic",
            2,
        ),
        (
            vec!["--route", "order.*=orders queue"],
            "is neither an SQS queue URL",
            2,
        ),
        (
            vec![
                "--default-queue",
                unrouted.url(),
                "--offload-bucket",
                &missing_bucket,
            ],
            "S3 offload bucket not found",
            1,
        ),
        (
            vec![
                "--route",
                &route,
                "--offload-bucket",
                "b-ok",
                "--offload-threshold",
                "1048577",
            ],
            "offload threshold 1048577 must be within 1..=1048576",
            2,
        ),
    ];
    for (args, says, status) in cases {
        let out = local_aws(&mut outbox(&db))
            .arg("relay")
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }

    // Flags replace the environment's settings: `--route` the routes of OUTBOX_SQS_ROUTES (here
    // the flag's own mistake is what is reported, not the environment's, nor "given twice"), and
    // `--offload-threshold` goes with a bucket from OUTBOX_SQS_OFFLOAD_BUCKET (it was a usage
    // error, exit 2, that demanded --offload-bucket).
    let cases: Vec<(Vec<&str>, (&str, &str), &str)> = vec![
        (
            vec!["--route", "order.*=arn:aws:sqs:us-east-1:000000000000:q"],
            ("OUTBOX_SQS_ROUTES", "order.*=orders queue"),
            "is an ARN but not of an SNS topic",
        ),
        (
            vec!["--route", &route, "--offload-threshold", "1048577"],
            ("OUTBOX_SQS_OFFLOAD_BUCKET", "b-ok"),
            "offload threshold 1048577 must be within 1..=1048576",
        ),
        (
            vec!["--route", &route, "--offload-threshold", "1000"],
            ("OUTBOX_SQS_ROUTES", ""),
            "an offload threshold is set but no offload bucket",
        ),
    ];
    for (args, (var, value), says) in cases {
        let out = local_aws(&mut outbox(&db))
            .env(var, value)
            .arg("relay")
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?} with {var}: {err}");
    }
}

#[tokio::test]
async fn relay_dead_letters_are_visible_to_stats() {
    // The library relay and the CLI share the table: a poison event dead-lettered by a relay shows
    // in `outbox stats` as a blocked aggregate.
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    emit_all(
        &client,
        &[
            TestEvent::new("p", 1).note("poison"),
            TestEvent::new("p", 2),
        ],
    )
    .await
    .unwrap();
    let relay = Relay::builder(
        db.pool().clone(),
        FlakyPublisher::new(|e| {
            (outbox_tests::note(e).as_deref() == Some("poison"))
                .then(|| PublishOutcome::permanent(FailureKind::Other, "poison"))
        }),
    )
    .build()
    .unwrap();
    relay.run_once().await.unwrap();
    let s: serde_json::Value =
        serde_json::from_slice(&run(outbox(&db).args(["stats", "--json"])).stdout).unwrap();
    assert_eq!(
        (
            s["dead_letters"].as_i64(),
            s["blocked_aggregates"].as_i64(),
            s["pending"].as_i64()
        ),
        (Some(1), Some(1), Some(1))
    );
}

#[test]
fn relay_help_names_every_setting_variable_the_code_reads() {
    let out = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .args(["relay", "--help"])
        .output()
        .expect("outbox runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    use outbox_core::env;
    for var in [
        env::BATCH_SIZE,
        env::BATCH_MAX_BYTES,
        env::MAX_ATTEMPTS,
        env::BACKOFF_BASE_MS,
        env::BACKOFF_CAP_MS,
        env::BACKOFF_JITTER,
        env::POLL_INTERVAL_MS,
        env::PUBLISH_TIMEOUT_MS,
        env::SHUTDOWN_GRACE_MS,
        env::CONCURRENCY,
        env::PER_AGGREGATE_ORDER,
        env::METRICS_INTERVAL_MS,
        env::RETENTION_SECS,
        outbox_sqs::ENV_DEFAULT_QUEUE_URL,
        outbox_sqs::ENV_ROUTES,
        outbox_sqs::ENV_MAX_IN_FLIGHT,
        outbox_sqs::ENV_CALL_TIMEOUT_MS,
        outbox_sqs::ENV_CALL_WAIT_MS,
        outbox_sqs::ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS,
        outbox_sqs::ENV_BREAKER_PROBE_INTERVAL_MS,
        outbox_sqs::ENV_OFFLOAD_BUCKET,
        outbox_sqs::ENV_OFFLOAD_THRESHOLD_BYTES,
        outbox_sqs::ENV_OFFLOAD_WAIT_MS,
        outbox_sqs::ENV_MAX_UPLOADS,
        outbox_sqs::ENV_BATCH_AGGREGATES,
        // Left out of the table, though the README lists it (black-box run).
        outbox_sqs::ENV_TRANSPORT,
    ] {
        assert!(
            help.contains(var),
            "`outbox relay --help` does not name {var}:\n{help}"
        );
    }
    // It fits a terminal (rows ran to 177 columns, and one stopped mid-sentence: black-box run).
    for line in help.lines() {
        assert!(line.chars().count() <= 100, "too wide: {line}");
        assert!(!line.ends_with("client's"), "cut short: {line}");
    }
}

/// Every command's help fits a terminal of 100 columns (`dead-letters retry`'s usage line ran to
/// 144: black-box run).
#[test]
fn every_commands_help_fits_100_columns() {
    for args in [
        &["--help"][..],
        &["migrate", "--help"],
        &["relay", "--help"],
        &["stats", "--help"],
        &["cleanup", "--help"],
        &["dead-letters", "--help"],
        &["dead-letters", "list", "--help"],
        &["dead-letters", "retry", "--help"],
        &["dead-letters", "purge", "--help"],
        &["partitions", "--help"],
        &["partitions", "list", "--help"],
        &["partitions", "maintain", "--help"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_outbox"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(help.contains("Usage:"), "{args:?}: {help}");
        for line in help.lines() {
            assert!(
                line.chars().count() <= 100,
                "{args:?}: too wide ({}): {line}",
                line.chars().count()
            );
        }
    }
}

/// Field values come from the rows: in text logs, a newline in an aggregate id wrote a forged log
/// line of its own, and an escape sequence reached the operator's terminal (found by a black-box
/// run). They are escaped, as `dead-letters list` escapes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_escape_control_characters_from_the_rows() {
    let db = TestDb::new().await;
    let queue = TestQueue::standard().await;
    let client = db.pool().get().await.unwrap();
    client
        .execute(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
             VALUES ('order', $1, $2, '{}')",
            &[
                &"inj\n2026-12-04T00:00:00.000000Z ERROR forged: line \u{1b}[31mred",
                &"nor\noute",
            ],
        )
        .await
        .unwrap();
    let mut child = local_aws(
        outbox(&db)
            .args(["relay", "--route", &format!("order.*={}", queue.url())])
            .args(["--poll-interval", "100ms", "--shutdown-grace", "2s"]),
    )
    .stderr(Stdio::piped())
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    let logs = capture_stderr(&mut child);
    let start = Instant::now();
    loop {
        let dead: i64 = client
            .query_one(
                "SELECT count(*) FROM outbox_events WHERE dead_lettered_at IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if dead == 1 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "not dead-lettered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sigterm(&child);
    assert!(wait_with_timeout(&mut child, Duration::from_secs(10)).success());
    let logs = logs.join().unwrap();
    assert!(!logs.contains('\u{1b}'), "a raw escape reached the log");
    assert!(
        !logs
            .lines()
            .any(|l| l.starts_with("2026-12-04T00:00:00.000000Z")),
        "a forged line:\n{logs}"
    );
    assert!(logs.contains(r"nor\noute"), "{logs}");
    assert!(
        logs.contains(r"inj\n2026-12-04T00:00:00.000000Z ERROR forged: line \u{1b}[31mred"),
        "{logs}"
    );
}
