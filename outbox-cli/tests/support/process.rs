//! `outbox relay` processes started by the tests, with their captured logs.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
        outbox_tests::without_outbox_env(&mut cmd);
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
        // A scenario failing on what the database or the queue shows says nothing of why: show
        // what the relay said (its last lines; the logs carry no payloads or secrets).
        if std::thread::panicking() {
            let logs = self.logs();
            let lines: Vec<&str> = logs.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL)..];
            eprintln!(
                "--- relay {} (the last {} of {} log lines) ---\n{}",
                self.child.id(),
                tail.len(),
                lines.len(),
                tail.join("\n")
            );
        }
    }
}

/// How many of a relay's last log lines a failing scenario prints.
const LOG_TAIL: usize = 60;

/// Sends SIGTERM to every relay, then waits for each: every one must exit cleanly within 10 s.
pub fn stop_all(relays: &mut [RelayProcess]) {
    for r in relays.iter() {
        r.sigterm();
    }
    for r in relays.iter_mut() {
        assert!(r.wait(Duration::from_secs(10)).success());
    }
}
