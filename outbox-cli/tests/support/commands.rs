//! Running the `outbox` binary in tests: success, and fast one-line failures.

use std::process::Command;
use std::time::{Duration, Instant};

/// The binary with `DATABASE_URL` set and no inherited log filter or IAM switch.
pub fn outbox(url: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_outbox"));
    outbox_tests::without_outbox_env(&mut cmd);
    cmd.env("DATABASE_URL", url)
        .env_remove("RUST_LOG")
        .env_remove("OUTBOX_PG_RDS_IAM");
    cmd
}

/// Runs `cmd`, which must succeed; its stdout.
pub fn succeeds(cmd: &mut Command) -> String {
    let out = cmd.output().expect("outbox runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `cmd`, which must exit with `status` within 5 s; its stderr.
fn fails_within_5s(cmd: &mut Command, status: i32) -> String {
    let started = Instant::now();
    let out = cmd.output().expect("outbox runs");
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(status), "{cmd:?}: {err}");
    assert!(
        took < Duration::from_secs(5),
        "{cmd:?} took {took:?}: {err}"
    );
    err
}

/// Runs `cmd`, which must exit 1 within 5 s with exactly one line on stderr containing `expect`.
pub fn fails_fast(cmd: &mut Command, expect: &[&str]) -> String {
    let err = fails_within_5s(cmd, 1);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{cmd:?}: one line expected, got:\n{err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    for e in expect {
        assert!(err.contains(e), "{cmd:?}: `{e}` not in: {err}");
    }
    err
}

/// `outbox relay` with a queue that is never reached (for runs that must fail before SQS).
pub fn relay_cmd(url: &str) -> Command {
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

/// Runs `cmd`, which must be refused as a usage error: exit 2 within 5 s, before anything is
/// contacted, with `error: …` containing `expect` and clap's pointer to the subcommand's help.
pub fn fails_usage(cmd: &mut Command, expect: &str) -> String {
    let err = fails_within_5s(cmd, 2);
    assert!(err.starts_with("error: "), "{cmd:?}: {err}");
    assert!(err.contains(expect), "{cmd:?}: `{expect}` not in: {err}");
    assert!(
        err.contains("For more information, try '"),
        "{cmd:?}: {err}"
    );
    err
}
