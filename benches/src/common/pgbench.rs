//! pgbench runs: the baseline of the relay's own SQL.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use outbox_tests::TestDb;

use super::*;

/// The pgbench script (claim + mark, see `benches/claim_mark.sql`).
pub const CLAIM_MARK_SQL: &str = include_str!("../../claim_mark.sql");

/// The pgbench executable: `$PGBENCH`, `pgbench` on the `PATH`, or PostgreSQL's bin directory.
pub fn pgbench_program() -> PathBuf {
    if let Some(p) = std::env::var_os("PGBENCH") {
        return PathBuf::from(p);
    }
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join("pgbench").is_file()))
        .unwrap_or(false);
    if on_path {
        return PathBuf::from("pgbench");
    }
    for version in ["17", "16", "15", "14", "13"] {
        let p = PathBuf::from(format!("/usr/lib/postgresql/{version}/bin/pgbench"));
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("pgbench")
}

/// Runs pgbench with `script` (`-n -M prepared`, `clients` clients on up to `threads` threads,
/// `transactions` transactions each, `-D` variables from `vars`) against `db`. Returns the wall time.
pub async fn pgbench(
    db: &TestDb,
    script: &str,
    vars: &[(&str, String)],
    clients: usize,
    threads: usize,
    transactions: usize,
) -> Result<Duration> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "outbox-bench-{}-{}.sql",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, script)?;
    let mut cmd = std::process::Command::new(pgbench_program());
    cmd.args(["-n", "-M", "prepared", "-f"]).arg(&path);
    for (name, value) in vars {
        cmd.arg("-D").arg(format!("{name}={value}"));
    }
    cmd.args(["-c", &clients.to_string()])
        .args(["-j", &threads.clamp(1, clients.max(1)).to_string()])
        .args(["-t", &transactions.max(1).to_string()])
        .arg(db.url());
    let started = Instant::now();
    let output = tokio::task::spawn_blocking(move || cmd.output()).await;
    let elapsed = started.elapsed();
    let _ = std::fs::remove_file(&path);
    let output = output??;
    if !output.status.success() {
        return Err(format!(
            "pgbench failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(elapsed)
}

/// Runs [`CLAIM_MARK_SQL`] with pgbench against `db` until `events` rows are marked (each client
/// runs `events / (clients × batch)` transactions), and returns the rows marked and the wall time.
pub async fn pgbench_claim_mark(
    db: &TestDb,
    events: usize,
    batch: usize,
    clients: usize,
    threads: usize,
) -> Result<Drain> {
    let per_client = events.div_ceil(clients * batch).max(1);
    let vars = [("batch", batch.to_string())];
    let server = ServerCpu::find(&db.connect().await).await;
    let db_before = server.and_then(|s| s.total());
    let elapsed = pgbench(db, CLAIM_MARK_SQL, &vars, clients, threads, per_client).await?;
    let db_cpu = used_since(server.and_then(|s| s.total()), db_before);
    let events = processed(&db.connect().await).await?;
    Ok(Drain {
        events,
        elapsed,
        capped: false,
        cpu: None,
        fixture_cpu: None,
        max_batches: None,
        db_cpu,
    })
}
