//! Support for the fault suite: relay processes, a restricted database role, writers, and the
//! history check.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outbox_core::emit_all;
use outbox_queries::queries::admin;
use outbox_tests::{TestDb, TestEvent};
use uuid::Uuid;

/// One scenario at a time: they start processes and load the machine.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A database role that may only read and update the outbox's relay columns (no DDL, no business
/// tables): what the README's least-privilege grants give the relay.
pub struct RelayRole {
    name: String,
}

impl RelayRole {
    /// Creates the role on `db`'s server with the documented grants on `db`.
    pub async fn create(db: &TestDb) -> RelayRole {
        let name = format!("outbox_relay_{}", &db.name()["outbox_test_".len()..][..12]);
        let admin = db.connect().await;
        admin
            .batch_execute(&format!(
                "CREATE ROLE {name} LOGIN;
                 GRANT CONNECT ON DATABASE {db} TO {name};
                 GRANT USAGE ON SCHEMA public TO {name};
                 GRANT SELECT ON outbox_events, outbox_schema_history TO {name};
                 GRANT UPDATE (attempts, retry_after, last_error, processed_at, dead_lettered_at)
                     ON outbox_events TO {name};",
                db = db.name()
            ))
            .await
            .expect("create the relay role");
        RelayRole { name }
    }

    /// `db`'s URL with this role as the user.
    pub fn url(&self, db: &TestDb) -> String {
        db.url()
            .replacen("postgres@", &format!("{}@", self.name), 1)
    }

    /// The role's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for RelayRole {
    fn drop(&mut self) {
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let config: tokio_postgres::Config =
                    outbox_tests::db::database_url().parse().unwrap();
                if let Ok((client, conn)) = config.connect(tokio_postgres::NoTls).await {
                    tokio::spawn(conn);
                    // The test database (holding the grants) is dropped first; retry briefly.
                    for _ in 0..20 {
                        if client
                            .batch_execute(&format!("DROP ROLE IF EXISTS {name}"))
                            .await
                            .is_ok()
                        {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            })
        })
        .join();
    }
}

/// A running `outbox relay` process with its captured logs.
pub struct RelayProcess {
    child: Child,
    logs: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// How to start relay processes for a scenario.
#[derive(Clone)]
pub struct RelaySpec {
    pub database_url: String,
    pub sqs_endpoint: String,
    pub queue_url: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl RelaySpec {
    pub fn new(database_url: String, sqs_endpoint: String, queue_url: String) -> Self {
        RelaySpec {
            database_url,
            sqs_endpoint,
            queue_url,
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.to_string(), v.to_string()));
        self
    }

    pub fn spawn(&self) -> RelayProcess {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_outbox"));
        cmd.args([
            "relay",
            "--default-queue",
            &self.queue_url,
            "--log-format",
            "json",
        ])
        .args(&self.args)
        .env("DATABASE_URL", &self.database_url)
        .env("AWS_ENDPOINT_URL_SQS", &self.sqs_endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test-secret-never-logged")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn outbox relay");
        let mut stderr = child.stderr.take().unwrap();
        let logs = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&logs);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        RelayProcess {
            child,
            logs,
            reader: Some(reader),
        }
    }
}

impl RelayProcess {
    /// The process id (for `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// `kill -9`: no chance to clean up.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM: graceful shutdown.
    pub fn sigterm(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM");
    }

    /// Waits for exit up to `timeout` (then kills it and panics).
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                return s;
            }
            if start.elapsed() > timeout {
                self.kill9();
                panic!(
                    "relay did not exit within {timeout:?}; logs:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The logs so far.
    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An event written by a scenario: its id, aggregate and position within the aggregate.
#[derive(Debug, Clone)]
pub struct Written {
    pub id: Uuid,
    pub aggregate: String,
    pub n: u64,
}

/// What the writers did: committed events, and ids of events in rolled-back transactions.
#[derive(Debug, Default)]
pub struct Writes {
    pub committed: Vec<Written>,
    pub rolled_back: Vec<Uuid>,
}

impl Writes {
    pub fn extend(&mut self, other: Writes) {
        self.committed.extend(other.committed);
        self.rolled_back.extend(other.rolled_back);
    }
}

/// Writes `count` events over `aggregates` aggregates named `{prefix}-{k}`, in transactions of
/// `per_tx` events; every 10th transaction (when `rollbacks`) writes its events and rolls back.
/// Within an aggregate, `n` increases with commit order.
pub async fn write_events(
    db_pool: &deadpool_postgres::Pool,
    prefix: &str,
    count: u64,
    aggregates: u64,
    per_tx: u64,
    rollbacks: bool,
    note: impl Fn(u64) -> String,
) -> Writes {
    let mut writes = Writes::default();
    let mut client = db_pool.get().await.unwrap();
    let mut n = 0;
    let mut tx_no = 0;
    while n < count {
        tx_no += 1;
        let rollback = rollbacks && tx_no % 10 == 0;
        let events: Vec<TestEvent> = (0..per_tx)
            .map(|i| {
                let k = n + i;
                TestEvent::new(format!("{prefix}-{}", k % aggregates), k).note(note(k))
            })
            .collect();
        let tx = client.transaction().await.unwrap();
        let ids = emit_all(&tx, &events).await.unwrap();
        if rollback {
            tx.rollback().await.unwrap();
            writes.rolled_back.extend(ids);
            continue;
        }
        tx.commit().await.unwrap();
        for (id, e) in ids.into_iter().zip(events) {
            writes.committed.push(Written {
                id,
                aggregate: e.order_id,
                n: e.n,
            });
        }
        n += per_tx;
    }
    writes
}

/// A delivered message, as the history check needs it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub event_id: String,
    pub aggregate: String,
    pub n: u64,
}

impl Delivery {
    /// From a message body (a `TestEvent`) and its `event_id` attribute.
    pub fn from_message(event_id: &str, body: &str) -> Delivery {
        let v: serde_json::Value =
            serde_json::from_str(body).expect("the body is the payload JSON");
        Delivery {
            event_id: event_id.to_string(),
            aggregate: v["order_id"].as_str().unwrap().to_string(),
            n: v["n"].as_u64().unwrap(),
        }
    }
}

/// The figures a scenario prints and asserts on.
#[derive(Debug, Default)]
pub struct Figures {
    pub events: usize,
    pub delivered: usize,
    pub lost: usize,
    pub duplicates: usize,
    pub order_violations: usize,
    pub rolled_back_delivered: usize,
    pub unexpected: usize,
}

/// Checks deliveries (in delivery order) against what was written. `expected` is the subset of
/// committed events that must arrive (all of them, unless a scenario blocks some on purpose).
pub fn check(expected: &[Written], writes: &Writes, deliveries: &[Delivery]) -> Figures {
    let expected_ids: HashSet<String> = expected.iter().map(|w| w.id.to_string()).collect();
    let committed: HashSet<String> = writes.committed.iter().map(|w| w.id.to_string()).collect();
    let rolled_back: HashSet<String> = writes.rolled_back.iter().map(|i| i.to_string()).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut last_n: HashMap<&str, u64> = HashMap::new();
    let mut f = Figures {
        events: expected.len(),
        ..Figures::default()
    };
    for d in deliveries {
        if rolled_back.contains(&d.event_id) {
            f.rolled_back_delivered += 1;
            continue;
        }
        if !committed.contains(&d.event_id) {
            f.unexpected += 1;
            continue;
        }
        if !seen.insert(d.event_id.as_str()) {
            f.duplicates += 1;
            continue;
        }
        // Order is judged on first deliveries: a re-sent earlier event is a duplicate, not a
        // violation.
        if let Some(prev) = last_n.insert(d.aggregate.as_str(), d.n) {
            if prev > d.n {
                f.order_violations += 1;
            }
        }
    }
    f.delivered = expected_ids
        .iter()
        .filter(|id| seen.contains(id.as_str()))
        .count();
    f.lost = f.events - f.delivered;
    f
}

/// Prints the scenario's one line of figures — straight to the process's stderr, past the test
/// harness's output capture, so the CI log shows the evidence of passing scenarios too.
pub fn report(scenario: &str, f: &Figures, duration: Duration, extra: &str) {
    use std::io::Write;
    let line = format!(
        "fault-suite {scenario}: events={} delivered={} lost={} duplicates={} order_violations={} \
         rolled_back_delivered={} duration={:.1}s {extra}\n",
        f.events,
        f.delivered,
        f.lost,
        f.duplicates,
        f.order_violations,
        f.rolled_back_delivered,
        duration.as_secs_f64()
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Pending events (not processed, not dead).
pub async fn pending(pool: &deadpool_postgres::Pool) -> i64 {
    let client = pool.get().await.unwrap();
    admin::outbox_pending_count()
        .bind(&client)
        .one()
        .await
        .unwrap()
}

/// Waits until nothing is pending; panics with `context` after `timeout`.
pub async fn wait_drained(pool: &deadpool_postgres::Pool, timeout: Duration, context: &str) {
    wait_pending(pool, 0, timeout, context).await
}

/// Waits until exactly `target` events are pending; panics with `context` after `timeout`.
pub async fn wait_pending(
    pool: &deadpool_postgres::Pool,
    target: i64,
    timeout: Duration,
    context: &str,
) {
    let start = Instant::now();
    loop {
        let p = pending(pool).await;
        if p == target {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "{p} events still pending after {timeout:?}: {context}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Ids of processed events.
pub async fn processed_ids(pool: &deadpool_postgres::Pool, ids: &[Uuid]) -> HashSet<Uuid> {
    let client = pool.get().await.unwrap();
    let mut out = HashSet::new();
    for id in ids {
        let row = admin::get_outbox_event()
            .bind(&client, id)
            .one()
            .await
            .unwrap();
        if row.processed_at.is_some() {
            out.insert(*id);
        }
    }
    out
}

pub mod commands;
pub mod tls_cluster;

/// The throwaway PostgreSQL cluster of the restart scenario: `initdb` + `pg_ctl` on a free port,
/// run as the `postgres` user (initdb refuses root), removed when dropped.
pub struct Cluster {
    pub dir: std::path::PathBuf,
    pub port: u16,
    bin: std::path::PathBuf,
    /// Extra server options (`-c ssl=on`, ...).
    pub opts: String,
}

fn pg_bin() -> std::path::PathBuf {
    let out = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .expect("pg_config is installed");
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn as_postgres(bin: &std::path::Path, tool: &str, args: &[&str]) -> std::process::Output {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false);
    let tool = bin.join(tool);
    let out = if is_root {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(&tool)
            .args(args)
            .output()
    } else {
        Command::new(&tool).args(args).output()
    }
    .expect("run a PostgreSQL tool");
    assert!(
        out.status.success(),
        "{tool:?} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl Cluster {
    /// Creates and starts a cluster on a free port.
    pub fn start() -> Cluster {
        let cluster = Cluster::init();
        cluster.pg_ctl("start");
        cluster
    }

    /// Creates a cluster on a free port without starting it (see [`Cluster::launch`]).
    pub fn init() -> Cluster {
        let bin = pg_bin();
        let dir = std::env::temp_dir().join(format!("outbox-pg-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let _ = Command::new("chown")
            .args(["postgres:postgres", dir.to_str().unwrap()])
            .status();
        let data = dir.join("data");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        as_postgres(
            &bin,
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=trust",
                "-N",
            ],
        );
        Cluster {
            dir,
            port,
            bin,
            opts: String::new(),
        }
    }

    /// Starts a cluster made by [`Cluster::init`].
    pub fn launch(&self) {
        self.pg_ctl("start");
    }

    fn pg_ctl(&self, action: &str) {
        let data = self.dir.join("data");
        let log = self.dir.join("server.log");
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off {}",
            self.port,
            self.dir.display(),
            self.opts
        );
        as_postgres(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &opts,
                "-w",
                "-m",
                "fast",
                action,
            ],
        );
    }

    /// Restarts the server (fast shutdown: every connection is cut).
    pub fn restart(&self) {
        self.pg_ctl("restart");
    }

    /// The server's admin URL, for database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args([
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads every message of `queue` (receive 10, delete them in one batch call) until `expected`
/// distinct event ids arrived, the queue stays empty for `quiet`, or `timeout` passes. Returns the
/// deliveries in receive order.
pub async fn drain_queue(
    client: &aws_sdk_sqs::Client,
    queue_url: &str,
    expected: usize,
    quiet: Duration,
    timeout: Duration,
) -> Vec<Delivery> {
    use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
    let start = Instant::now();
    let mut last_message = Instant::now();
    let mut out = Vec::new();
    let mut distinct = HashSet::new();
    while start.elapsed() < timeout {
        let resp = client
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .message_attribute_names("All")
            .send()
            .await
            .expect("ReceiveMessage");
        let messages = resp.messages();
        if messages.is_empty() {
            if distinct.len() >= expected && last_message.elapsed() >= quiet {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        last_message = Instant::now();
        let mut entries = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let id = m
                .message_attributes()
                .and_then(|a| a.get("event_id"))
                .and_then(|v| v.string_value())
                .expect("event_id attribute")
                .to_string();
            distinct.insert(id.clone());
            out.push(Delivery::from_message(&id, m.body().unwrap_or_default()));
            entries.push(
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap())
                    .build()
                    .unwrap(),
            );
        }
        client
            .delete_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("DeleteMessageBatch");
    }
    out
}
