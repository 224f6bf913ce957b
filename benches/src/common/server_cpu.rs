//! The PostgreSQL server's CPU time, read from `/proc` when the server runs on this machine: what a
//! drain costs the database itself, apart from the relay, its SQS client and the SQS fixture that
//! share the machine's cores with it in the lab (and run on other hosts in production).

use std::path::Path;
use std::time::Duration;

/// The server's processes: the postmaster and its children (backends, autovacuum, WAL writer, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerCpu {
    postmaster: u32,
}

impl ServerCpu {
    /// The server `client` is connected to, when it runs on this machine (its backend's process is
    /// visible here and its parent is a `postgres` process); `None` otherwise.
    pub async fn find(client: &tokio_postgres::Client) -> Option<ServerCpu> {
        let row = client
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .ok()?;
        let backend = u32::try_from(row.get::<_, i32>(0)).ok()?;
        let postmaster = parent(backend)?;
        let comm = std::fs::read_to_string(format!("/proc/{postmaster}/comm")).ok()?;
        (comm.trim() == "postgres").then_some(ServerCpu { postmaster })
    }

    /// CPU time the server has used so far: every live process's run time (nanoseconds, from
    /// `schedstat`) plus what its exited children used (clock ticks, as the postmaster reaped them).
    pub fn total(&self) -> Option<Duration> {
        let mut total = run_time(self.postmaster)? + reaped_children(self.postmaster)?;
        for pid in self.children()? {
            // A process that exited since it was listed counts through `reaped_children`.
            total += run_time(pid).unwrap_or_default();
        }
        Some(total)
    }

    /// The postmaster's process id.
    pub fn postmaster(&self) -> u32 {
        self.postmaster
    }

    /// The postmaster's live children (backends, background workers), as `/proc` lists them now.
    pub fn children(&self) -> Option<Vec<u32>> {
        let pids = std::fs::read_dir("/proc")
            .ok()?
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| parent(pid) == Some(self.postmaster))
            .collect();
        Some(pids)
    }
}

/// The CPU time used between two readings (`None` when either is unknown).
pub fn used_since(after: Option<Duration>, before: Option<Duration>) -> Option<Duration> {
    after
        .zip(before)
        .map(|(after, before)| after.saturating_sub(before))
}

/// The fields of a `/proc/…/stat` file after the command name (which may hold spaces).
pub(super) fn stat_fields(path: &Path) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(path).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The sum of two clock-tick fields of [`stat_fields`], as time.
pub(super) fn ticks(fields: &[String], a: usize, b: usize) -> Option<Duration> {
    let a: u64 = fields.get(a)?.parse().ok()?;
    let b: u64 = fields.get(b)?.parse().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some(Duration::from_millis((a + b) * 10))
}

fn pid_stat(pid: u32) -> Option<Vec<String>> {
    stat_fields(Path::new(&format!("/proc/{pid}/stat")))
}

fn parent(pid: u32) -> Option<u32> {
    pid_stat(pid)?.get(1)?.parse().ok()
}

/// A process's own CPU time (user + system), in nanoseconds.
fn run_time(pid: u32) -> Option<Duration> {
    let schedstat = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    let ns: u64 = schedstat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// The CPU time of a process's exited children it has waited for (`cutime` + `cstime`).
fn reaped_children(pid: u32) -> Option<Duration> {
    ticks(&pid_stat(pid)?, 13, 14)
}
