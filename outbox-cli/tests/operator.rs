//! Operator commands do what they showed: `dead-letters purge` deletes exactly the dead letters it
//! listed and asked about, durations that overflow are usage errors, the inbox gets retention, and
//! logs written to a file carry no colour codes.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outbox_core::{emit_all, process_once};
use outbox_tests::sqs::TestQueue;
use outbox_tests::{TestDb, TestEvent};
use uuid::Uuid;

fn outbox(db: &TestDb) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_outbox"));
    outbox_tests::without_outbox_env(&mut cmd);
    cmd.env("DATABASE_URL", db.url()).env_remove("RUST_LOG");
    cmd
}

/// Emits one event per aggregate and dead-letters them all.
async fn dead_letters(db: &TestDb, aggregates: &[&str]) -> Vec<Uuid> {
    let client = db.pool().get().await.unwrap();
    let events: Vec<TestEvent> = aggregates.iter().map(|a| TestEvent::new(*a, 1)).collect();
    let ids = emit_all(&client, &events).await.unwrap();
    client
        .execute(
            "UPDATE outbox_events SET dead_lettered_at = now(), last_error = 'rejected' \
             WHERE id = ANY($1)",
            &[&ids],
        )
        .await
        .unwrap();
    ids
}

async fn exists(db: &TestDb, id: Uuid) -> bool {
    let client = db.pool().get().await.unwrap();
    client
        .query_opt("SELECT 1 FROM outbox_events WHERE id = $1", &[&id])
        .await
        .unwrap()
        .is_some()
}

/// Collects a child's output in the background.
fn collect(mut from: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

/// The purge runs on a terminal (`script` gives it one): it lists the dead letters, asks, and a dead
/// letter added while the question is open is not deleted with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_deletes_exactly_the_dead_letters_it_listed_and_asked_about() {
    let db = TestDb::new().await;
    let shown = dead_letters(&db, &["a", "b"]).await;
    let command = format!("{} dead-letters purge --all", env!("CARGO_BIN_EXE_outbox"));
    let mut child = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("DATABASE_URL", db.url())
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("`script` (util-linux) runs the purge on a pseudo-terminal");
    let out = collect(child.stdout.take().unwrap());
    let started = Instant::now();
    while !out.lock().unwrap().contains("[y/N]") {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no question asked: {}",
            out.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    {
        let listing = out.lock().unwrap().clone();
        for id in &shown {
            assert!(listing.contains(&id.to_string()), "listed: {listing}");
        }
        assert!(listing.contains("delete these 2 dead letters"), "{listing}");
    }
    // A new dead letter, matching `--all`, while the operator reads the question.
    let late = dead_letters(&db, &["c"]).await[0];
    child.stdin.as_mut().unwrap().write_all(b"y\n").unwrap();
    let status = child.wait().unwrap();
    let text = out.lock().unwrap().clone();
    assert!(status.success(), "{text}");
    assert!(text.contains("purged 2 dead letters"), "{text}");
    for id in &shown {
        assert!(!exists(&db, *id).await, "a shown dead letter was deleted");
    }
    assert!(exists(&db, late).await, "the late dead letter is kept");
    assert!(!text.contains(&late.to_string()), "{text}");
}

#[tokio::test]
async fn purge_with_yes_deletes_what_matched_in_batches() {
    let db = TestDb::new().await;
    let aggregates: Vec<String> = (0..2_500).map(|i| format!("agg-{i}")).collect();
    let refs: Vec<&str> = aggregates.iter().map(String::as_str).collect();
    let ids = dead_letters(&db, &refs).await;
    let out = outbox(&db)
        .args(["dead-letters", "purge", "--all", "--yes"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("purged 2500 dead letters"), "{text}");
    assert!(!exists(&db, ids[0]).await && !exists(&db, ids[2_499]).await);
}

/// A listing read by `head` (stdout closed after a line) and a purge whose output is cut off
/// finish their work and exit 0. `println!` panicked (exit 101, and a backtrace with
/// `RUST_BACKTRACE` set).
#[tokio::test]
async fn output_into_a_closed_pipe_ends_quietly_and_the_work_is_done() {
    let db = TestDb::new().await;
    let aggregates: Vec<String> = (0..3_000).map(|i| format!("agg-{i}")).collect();
    let refs: Vec<&str> = aggregates.iter().map(String::as_str).collect();
    let ids = dead_letters(&db, &refs).await;
    for args in [
        &["dead-letters", "list", "--limit", "3000"][..],
        &["dead-letters", "purge", "--all", "--yes"][..],
    ] {
        let mut child = outbox(&db)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 16];
        stdout.read_exact(&mut first).unwrap();
        drop(stdout); // as `head -c 16` does
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    assert!(!exists(&db, ids[0]).await && !exists(&db, ids[2_999]).await);
}

/// An event id given to `retry` or `purge` that is not a dead letter (mistyped, or published) fails
/// the command, naming it (once, however often it was given); `purge` then deletes nothing,
/// `retry` still retries the others.
#[tokio::test]
async fn an_event_id_that_is_not_a_dead_letter_fails_retry_and_purge() {
    let db = TestDb::new().await;
    let dead = dead_letters(&db, &["a", "b"]).await;
    let stranger = Uuid::new_v4();
    let run = |args: &[String]| {
        let out = outbox(&db).args(args).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let purge: Vec<String> = ["dead-letters", "purge", "--yes"]
        .iter()
        .map(ToString::to_string)
        .chain([dead[0].to_string(), stranger.to_string()])
        .collect();
    let (code, text) = run(&purge);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains(&stranger.to_string()), "named: {text}");
    assert!(exists(&db, dead[0]).await, "nothing purged: {text}");

    let retry: Vec<String> = ["dead-letters", "retry"]
        .iter()
        .map(ToString::to_string)
        .chain([
            dead[1].to_string(),
            stranger.to_string(),
            stranger.to_string(),
        ])
        .collect();
    let (code, text) = run(&retry);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("retried 1 dead letter\n"), "{text}");
    // Named once, though given twice (a black-box run read "2 of the event ids given are not …").
    assert_eq!(text.matches(&stranger.to_string()).count(), 1, "{text}");
    assert!(
        text.contains("1 of the event ids given is not a dead letter"),
        "{text}"
    );

    let (code, text) = run(&["dead-letters".into(), "retry".into(), dead[0].to_string()]);
    assert_eq!(code, Some(0), "every id matched: {text}");
}

/// `outbox stats` on the plain layout needs only SELECT on the outbox's own tables (it read
/// `outbox_partitioning`, which the README grants only for the partitioned layout, and failed).
#[tokio::test]
async fn stats_on_the_plain_layout_runs_as_a_read_only_role() {
    let db = TestDb::plain().await; // also in the partitioned re-run
    let operator = outbox_tests::TestRole::create(&db, "outbox_operator", "LOGIN").await;
    let role = operator.name();
    db.execute(&format!(
        "GRANT CONNECT ON DATABASE {name} TO {role};
         GRANT USAGE ON SCHEMA public TO {role};
         GRANT SELECT ON outbox_events, outbox_dead_letters TO {role};",
        name = db.name()
    ))
    .await;
    let out = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .env("DATABASE_URL", operator.url(&db))
        .env_remove("RUST_LOG")
        .args(["stats", "--json"])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("\"pending\": 0"), "{text}");
}

/// Operator commands on a database without the outbox schema say to migrate (they printed the raw
/// SQL error only: relation "outbox_events" does not exist).
#[tokio::test]
async fn operator_commands_on_an_unmigrated_database_say_to_migrate() {
    let db = TestDb::empty().await;
    for args in [
        &["stats"][..],
        &["dead-letters", "list"],
        &["partitions", "list"],
        &["cleanup", "--older-than", "1d"],
    ] {
        let out = outbox(&db).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("run `outbox migrate`"),
            "{args:?}: {stderr}"
        );
    }
}

/// Operator commands on a database an older `outbox` migrated say which version it is at and
/// which this binary needs, as the relay does: `stats` said only that function
/// `outbox_published_since(…)` did not exist (black-box run of an upgrade).
#[tokio::test]
async fn operator_commands_on_an_older_schema_name_its_version() {
    let db = TestDb::empty().await;
    outbox_core::migrate_up_to(&mut db.connect().await, 2)
        .await
        .unwrap();
    let says = format!(
        "the outbox schema in database {} is at version 2, this binary needs version {}: run \
         `outbox migrate` as the schema owner",
        db.name(),
        outbox_core::schema_version()
    );
    let mut failed = 0;
    for args in [
        &["stats"][..],
        &["dead-letters", "list"],
        &["cleanup", "--older-than", "1d"],
        &["cleanup", "--inbox-older-than", "30d"],
    ] {
        let out = outbox(&db).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // What works on the older schema may work; what fails says why.
        if out.status.code() != Some(0) {
            failed += 1;
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(stderr.contains(&says), "{args:?}: {stderr}");
            assert!(!stderr.contains("SQLSTATE"), "{args:?}: {stderr}");
        }
    }
    assert!(failed > 0, "every command ran on version 2");
}

/// A session holding `outbox_events` locked (`ACCESS EXCLUSIVE`) until it rolls back.
async fn lock_the_table(db: &TestDb) -> tokio_postgres::Client {
    let holder = db.connect().await;
    holder
        .batch_execute("BEGIN; LOCK TABLE outbox_events IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    holder
}

/// The test database's URL with `options` (URL-encoded) added.
fn url_with_options(db: &TestDb, options: &str) -> String {
    let separator = if db.url().contains('?') { "&" } else { "?" };
    format!("{}{separator}options={options}", db.url())
}

/// A statement cancelled by a short `statement_timeout` (here in the URL's options, waiting on a
/// lock another session holds) says what cancelled it (black-box run: a bare SQLSTATE 57014).
#[tokio::test]
async fn a_statement_timeout_too_short_is_named_in_the_hint() {
    let db = TestDb::new().await;
    let holder = lock_the_table(&db).await;
    let url = url_with_options(&db, "-c%20statement_timeout%3D200");
    let out = outbox(&db)
        .env("DATABASE_URL", url)
        .arg("stats")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("hint: a statement was cancelled: a statement_timeout"),
        "{stderr}"
    );
    holder.batch_execute("ROLLBACK").await.unwrap();
}

/// Behind a lock another session holds on the table (`LOCK TABLE`, `ALTER TABLE`, `VACUUM FULL`),
/// the operator's commands give up after 5 s with a hint, and show in `pg_stat_activity` as
/// `outbox-cli`: they waited, silently and unnamed, as long as the lock was held (black-box run).
/// A `lock_timeout` in the URL's options is kept.
#[tokio::test]
async fn operator_commands_give_up_behind_a_held_lock_with_a_hint() {
    let db = TestDb::new().await;
    let holder = lock_the_table(&db).await;
    // (Not the holder: a transaction sees one snapshot of pg_stat_activity.)
    let observer = db.connect().await;
    for command in [&["stats"][..], &["dead-letters", "list"]] {
        let started = Instant::now();
        let child = outbox(&db)
            .args(command)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut named = false;
        while !named && started.elapsed() < Duration::from_secs(4) {
            let waiting: i64 = observer
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'outbox-cli' \
                     AND wait_event_type = 'Lock' AND datname = current_database()",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            named = waiting == 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(named, "{command:?}: waits for the lock as outbox-cli");
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command:?}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{command:?}: gave up within about 5 s: {:?}",
            started.elapsed()
        );
        assert!(
            stderr.contains("lock timeout")
                && stderr.contains("hint: another session holds a lock on the outbox's tables"),
            "{command:?}: {stderr}"
        );
    }
    let url = url_with_options(&db, "-c%20lock_timeout%3D300");
    let started = Instant::now();
    let out = outbox(&db)
        .env("DATABASE_URL", url)
        .arg("stats")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the URL's lock_timeout kept: {:?}",
        started.elapsed()
    );
    holder.batch_execute("ROLLBACK").await.unwrap();
}

/// Stored text with control characters is printed escaped: it cannot break the table's lines or
/// send escape sequences to the terminal. A purge that would ask with no terminal to ask on
/// refuses before it lists anything.
#[tokio::test]
async fn dead_letter_listings_escape_control_characters_and_purge_refuses_before_listing() {
    let db = TestDb::new().await;
    let ids = dead_letters(&db, &["a"]).await;
    db.execute(&format!(
        "UPDATE outbox_events SET last_error = E'boom\\n\\x1b[31mred' WHERE id = '{}'",
        ids[0]
    ))
    .await;
    let out = outbox(&db).args(["dead-letters", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("boom\\n\\u{1b}[31mred"), "{text:?}");
    assert_eq!(text.lines().count(), 2, "a header and one line: {text:?}");

    let out = outbox(&db)
        .args(["dead-letters", "purge", "--all"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        String::from_utf8_lossy(&out.stdout).is_empty(),
        "nothing listed"
    );
    assert!(exists(&db, ids[0]).await);
}

#[tokio::test]
async fn a_duration_that_overflows_is_a_usage_error() {
    let db = TestDb::new().await;
    for bad in ["99999999999999w", "18446744073709551615s1s", "200000d"] {
        let out = outbox(&db)
            .args(["cleanup", "--older-than", bad])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("too large"), "{bad}: {stderr}");
    }
}

/// `retry` or `purge` without ids, a filter or `--all` is a usage error (exit 2, as `--help` says
/// of usage errors), not a failure (it exited 1).
#[tokio::test]
async fn retry_or_purge_without_a_selection_is_a_usage_error() {
    let db = TestDb::new().await;
    for command in ["retry", "purge"] {
        let out = outbox(&db)
            .args(["dead-letters", command])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains("--all"), "{command}: {stderr}");
    }
}

/// Backdates the inbox records of these ids by `days`.
async fn backdate(db: &TestDb, ids: &[Uuid], days: f64) {
    let client = db.pool().get().await.unwrap();
    client
        .execute(
            "UPDATE processed_events SET processed_at = now() - make_interval(days => $2::float8::int) \
             WHERE event_id = ANY($1)",
            &[&ids, &days],
        )
        .await
        .unwrap();
}

async fn inbox_ids(db: &TestDb) -> Vec<Uuid> {
    let client = db.pool().get().await.unwrap();
    let mut ids: Vec<Uuid> = client
        .query("SELECT event_id FROM processed_events", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn cleanup_deletes_old_inbox_records_only() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    for id in &ids {
        assert!(process_once(&client, "billing", *id).await.unwrap());
    }
    backdate(&db, &ids[..2], 40.0).await;
    let out = outbox(&db)
        .args(["cleanup", "--inbox-older-than", "30d"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("deleted 2 inbox records"), "{text}");
    assert_eq!(inbox_ids(&db).await, vec![ids[2]]);
    // The library function, in batches of 1000.
    let many: Vec<Uuid> = (0..2_100).map(|_| Uuid::new_v4()).collect();
    for id in &many {
        process_once(&client, "shipping", *id).await.unwrap();
    }
    backdate(&db, &many, 2.0).await;
    let deleted = outbox_core::cleanup_inbox(&client, Duration::from_secs(86_400))
        .await
        .unwrap();
    assert_eq!(deleted, 2_100);
    assert_eq!(inbox_ids(&db).await, vec![ids[2]]);

    // Nothing to clean named: a usage error.
    let out = outbox(&db).arg("cleanup").output().unwrap();
    assert_eq!(out.status.code(), Some(2));

    // An inbox retention under an hour (here `30m` typed for 30 days) is refused, deleting nothing.
    backdate(&db, &ids[2..], 1.0).await;
    let out = outbox(&db)
        .args(["cleanup", "--older-than", "7d", "--inbox-older-than", "30m"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a usage error: {err}");
    assert!(
        err.contains("an inbox retention of 1800 s is too short: at least 1 h"),
        "{err}"
    );
    assert_eq!(inbox_ids(&db).await, vec![ids[2]]);
    let refused = outbox_core::cleanup_inbox(&client, Duration::ZERO).await;
    assert_eq!(refused.unwrap_err().kind(), outbox_core::ErrorKind::Config);
    assert_eq!(inbox_ids(&db).await, vec![ids[2]]);
}

/// `outbox relay --inbox-retention` deletes old inbox records; its text logs, written to a file,
/// carry no ANSI escape codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_runs_inbox_retention_and_logs_to_a_file_without_colour_codes() {
    let db = TestDb::new().await;
    let queue = TestQueue::standard().await;
    let client = db.pool().get().await.unwrap();
    let old = Uuid::new_v4();
    let fresh = Uuid::new_v4();
    process_once(&client, "billing", old).await.unwrap();
    process_once(&client, "billing", fresh).await.unwrap();
    backdate(&db, &[old], 10.0).await;
    let log_path = std::env::temp_dir().join(format!("outbox-relay-{}.log", Uuid::new_v4()));
    let log = std::fs::File::create(&log_path).unwrap();
    let mut relay = outbox(&db)
        .args([
            "relay",
            "--default-queue",
            queue.url(),
            "--inbox-retention",
            "7d",
        ])
        .env("AWS_ENDPOINT_URL_SQS", outbox_tests::sqs::endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        if text.contains("inbox retention deleted") && text.contains("relay started") {
            break;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = relay.kill();
            panic!("no inbox retention within 30 s: {text}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(inbox_ids(&db).await, vec![fresh]);
    Command::new("kill")
        .args(["-TERM", &relay.id().to_string()])
        .status()
        .unwrap();
    assert!(relay.wait().unwrap().success());
    let bytes = std::fs::read(&log_path).unwrap();
    let _ = std::fs::remove_file(&log_path);
    assert!(!bytes.is_empty());
    assert!(
        !bytes.contains(&0x1b),
        "ANSI escapes in a log file: {}",
        String::from_utf8_lossy(&bytes)
    );
}

/// CPU time (user + system) of process `pid`, from /proc.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses): state is field 3; utime 14, stime 15.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10) // CLK_TCK is 100 on Linux
}

/// Out of file descriptors, the metrics endpoint's accept fails at once, again and again: it backs
/// off instead of spinning a core, and answers again once descriptors are free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_endpoint_backs_off_when_out_of_file_descriptors() {
    let db = TestDb::new().await;
    let queue = TestQueue::standard().await;
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    // A relay limited to 40 descriptors: 32 metrics connections are more than it has left.
    let mut relay = Command::new("prlimit")
        .args(["--nofile=40", "--"])
        .arg(env!("CARGO_BIN_EXE_outbox"))
        .args([
            "relay",
            "--default-queue",
            queue.url(),
            "--metrics-addr",
            &addr,
            "--concurrency",
            "1",
        ])
        .env("DATABASE_URL", db.url())
        .env("AWS_ENDPOINT_URL_SQS", outbox_tests::sqs::endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prlimit (util-linux) runs the relay");
    let logs = collect(relay.stderr.take().unwrap());
    let started = Instant::now();
    while !logs.lock().unwrap().contains("relay started") {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = relay.kill();
            panic!("relay did not start: {}", logs.lock().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Idle connections until the relay runs out of descriptors.
    let mut idle = Vec::new();
    for _ in 0..60 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = cpu_time(relay.id());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let spent = cpu_time(relay.id()) - before;
    let text = logs.lock().unwrap().clone();
    assert!(
        text.contains("metrics endpoint: accept failed"),
        "the relay ran out of descriptors: {text}"
    );
    assert!(
        spent < Duration::from_millis(1_000),
        "no hot accept loop: {spent:?} of CPU in 3 s"
    );
    // Descriptors free again: it answers.
    drop(idle);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let answer = tokio::task::spawn_blocking({
        let addr = addr.clone();
        move || {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
                .unwrap();
            let mut text = String::new();
            s.read_to_string(&mut text).unwrap();
            text
        }
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    Command::new("kill")
        .args(["-TERM", &relay.id().to_string()])
        .status()
        .unwrap();
    let _ = relay.wait();
}

/// Behind a pooler that refuses start-up `options` (PgBouncer does, unless its
/// `ignore_startup_parameters` lists it), the commands connect without them, warning that their
/// lock bound is gone, and the relay's start-up checks pass. Before, `stats`, `dead-letters`,
/// `cleanup` and `partitions list` failed with "unsupported startup parameter: options", as they
/// added their `lock_timeout` there (black-box run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_pooler_that_refuses_start_up_options_the_commands_still_work() {
    let db = TestDb::new().await;
    let proxy = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    proxy.refuse_startup_options();
    let url = format!(
        "postgres://postgres@{}/{}?sslmode=disable",
        proxy.addr(),
        db.name()
    );
    for args in [
        &["stats"][..],
        &["dead-letters", "list"],
        &["cleanup", "--older-than", "7d"],
    ] {
        let mut command = outbox(&db);
        command.env("DATABASE_URL", &url).args(args);
        let out = output_of(command).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(
            stderr.contains("refused start-up options")
                && stderr.contains("without the 5000 ms bound"),
            "{args:?}: {stderr}"
        );
    }
    // The URL's own options: refused still, saying what to do.
    let mut own = outbox(&db);
    own.env(
        "DATABASE_URL",
        format!("{url}&options=-c%20lock_timeout%3D2s"),
    )
    .arg("stats");
    let out = output_of(own).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("remove them from the URL and set those settings for the role"),
        "{stderr}"
    );
    let mut relay = outbox(&db);
    relay
        .env("DATABASE_URL", &url)
        .args(["relay", "--no-listen", "--default-queue"])
        .arg("http://127.0.0.1:9/000000000000/never")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test");
    let out = output_of(relay).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("database ready"), "{stderr}");
}

/// Behind a pooler that drops start-up `options` without a word (PgBouncer with
/// `ignore_startup_parameters = options`), a command warns that its lock bound is gone, where it
/// waited as long as the lock was held, silently (black-box run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_pooler_that_drops_start_up_options_the_commands_say_their_lock_bound_is_gone() {
    let db = TestDb::new().await;
    let proxy = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    proxy.drop_startup_options();
    let url = format!(
        "postgres://postgres@{}/{}?sslmode=disable",
        proxy.addr(),
        db.name()
    );
    let mut command = outbox(&db);
    command.env("DATABASE_URL", &url).arg("stats");
    let out = output_of(command).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("did not apply the start-up options")
            && stderr.contains("without the 5000 ms bound"),
        "{stderr}"
    );
    // Direct, the bound holds and nothing is said.
    let out = outbox(&db).arg("stats").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `cmd` off the async runtime: its output.
async fn output_of(mut cmd: Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// Runs `cmd`, which must exit 1 within `limit` (killed at twice that): its stderr.
async fn fails_within(mut cmd: Command, limit: Duration) -> String {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = collect(child.stderr.take().unwrap());
    let started = Instant::now();
    let exited =
        outbox_tests::eventually(2 * limit, async || child.try_wait().unwrap().is_some()).await;
    if !exited {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    let took = started.elapsed();
    // The collecting thread reads to the end.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let err = err.lock().unwrap().clone();
    assert!(exited, "still running after {took:?}: {err}");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(took < limit, "took {took:?}: {err}");
    err
}

/// The URL of `db` through `proxy`, without TLS.
fn via(proxy: &outbox_tests::BlackHoleProxy, db: &TestDb) -> String {
    format!(
        "postgres://postgres@{}/{}?sslmode=disable&connect_timeout=2",
        proxy.addr(),
        db.name()
    )
}

/// A one-off command whose connection stalls after login (a middlebox holding its bytes, both
/// sockets open) fails once its session has sat idle 30 s while it waited, saying so, and its server
/// session is ended. Before, `outbox stats` waited for ever without a word, its session left behind
/// (black-box run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_whose_connection_stalls_fails_and_its_session_is_ended() {
    let db = TestDb::new().await;
    let proxy = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    // The statistics' statement never arrives; the connections after it pass.
    proxy.catch_first_sending(b"AS blocked_aggregates");
    let mut stats = outbox(&db);
    stats.env("DATABASE_URL", via(&proxy, &db)).arg("stats");
    let err = fails_within(stats, Duration::from_secs(45)).await;
    assert!(
        err.contains("the outbox-cli connection stopped answering")
            && err.contains("while the connection waited for an answer (ended now)"),
        "{err}"
    );
    let ended = outbox_tests::eventually(Duration::from_secs(5), async || {
        db.sessions_named("outbox-cli").await.is_empty()
    })
    .await;
    assert!(ended, "left: {:?}", db.sessions_named("outbox-cli").await);
}

/// A cleanup whose connection stalls after some batches fails saying how many rows those deleted
/// (they committed): it said only that the connection had stopped answering, the count lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_stalled_after_some_batches_says_what_they_deleted() {
    let db = TestDb::new().await;
    db.execute(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
         SELECT 'old', i::text, 'old.event', '{}', now() - interval '2 days'
           FROM generate_series(1, 1500) i",
    )
    .await;
    let proxy = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    // The first batch (1 000 rows) passes; the second's statement never arrives.
    proxy.catch_nth_sending(b"DELETE FROM outbox_events", 2);
    let mut cleanup = outbox(&db);
    cleanup
        .env("DATABASE_URL", via(&proxy, &db))
        .args(["cleanup", "--older-than", "1d"]);
    let err = fails_within(cleanup, Duration::from_secs(50)).await;
    assert!(
        err.contains("the outbox-cli connection stopped answering")
            && err.contains("1000 rows deleted (committed) before this batch failed"),
        "{err}"
    );
    let left: i64 = db
        .connect()
        .await
        .query_one("SELECT count(*) FROM outbox_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 500);
}

/// A command whose connection stalls right after login fails within its connect timeout (it waited
/// for ever; then that and 5 s more: black-box run); one whose every connection stalls mid-command
/// (the server or the network to it) fails once no other connection could look at its session for
/// 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_fails_when_no_connection_answers() {
    let db = TestDb::new().await;
    let at_login = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    at_login.catch_first_sending(b"SHOW lock_timeout");
    let mut stats = outbox(&db);
    stats.env("DATABASE_URL", via(&at_login, &db)).arg("stats");
    let err = fails_within(stats, Duration::from_secs(5)).await;
    assert!(
        err.contains("did not answer the connection's first statement within 2 s of login"),
        "{err}"
    );

    let frozen = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    frozen.catch_first_sending(b"AS blocked_aggregates");
    let mut stats = outbox(&db);
    stats.env("DATABASE_URL", via(&frozen, &db)).arg("stats");
    let (err, ()) = tokio::join!(fails_within(stats, Duration::from_secs(55)), async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        frozen.black_hole();
    });
    assert!(
        err.contains("no other connection could look at its server session for 3"),
        "{err}"
    );
}

/// Against a server that does not know `idle_session_timeout` (PostgreSQL 13 and older refuse it
/// at start-up), the commands connect without it and keep their lock bound, without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_idle_session_timeout_keeps_the_commands_lock_bound() {
    let db = TestDb::new().await;
    let proxy = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    proxy.refuse_idle_session_timeout();
    let mut stats = outbox(&db);
    stats.env("DATABASE_URL", via(&proxy, &db)).arg("stats");
    let out = output_of(stats).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    let _holder = lock_the_table(&db).await;
    let mut stats = outbox(&db);
    stats.env("DATABASE_URL", via(&proxy, &db)).arg("stats");
    let err = fails_within(stats, Duration::from_secs(15)).await;
    assert!(
        err.contains("hint: another session holds a lock on the outbox's tables"),
        "{err}"
    );
}

/// An answer the server has sent but that is still on its way (a slow link, a large answer) is
/// waited for: the session sits idle meanwhile, which is no stall. Before, `dead-letters list` was
/// given up 5 s into receiving 1.1 MB at 50 KB/s (black-box run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_still_on_its_way_is_waited_for() {
    let db = TestDb::new().await;
    let ids = dead_letters(&db, &["slow-1", "slow-2"]).await;
    let proxy = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
    proxy.hold_answer_to(b"FROM outbox_dead_letters", Duration::from_secs(8));
    let mut list = outbox(&db);
    list.env("DATABASE_URL", via(&proxy, &db))
        .args(["dead-letters", "list", "--json"]);
    let out = output_of(list).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.len(), ids.len(), "{listed:?}");
}

/// An answer that keeps arriving over a slow link for longer than the idle limit is waited for:
/// its bytes keep coming, though the server, its answer sent, sits idle. Before, `dead-letters
/// list` was given up 30 s into receiving (black-box recheck).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_arriving_slowly_for_long_is_waited_for() {
    let db = TestDb::new().await;
    let names: Vec<String> = (0..220).map(|i| format!("slow-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let ids = dead_letters(&db, &names).await;
    let client = db.pool().get().await.unwrap();
    client
        .execute(
            "UPDATE outbox_events SET last_error = repeat('e', 2000)",
            &[],
        )
        .await
        .unwrap();
    // ~460 KB at 10 KB/s: ~46 s.
    let proxy = outbox_tests::DelayProxy::slow_download(db.server_addr(), 10_000).await;
    let url = format!(
        "postgres://postgres@{}/{}?sslmode=disable",
        proxy.addr(),
        db.name()
    );
    let mut list = outbox(&db);
    list.env("DATABASE_URL", url)
        .args(["dead-letters", "list", "--json", "--limit", "1000"]);
    let started = Instant::now();
    let out = output_of(list).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        started.elapsed() > Duration::from_secs(35),
        "not slow enough"
    );
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.len(), ids.len());
}
