//! Splitting the machine's CPUs between the PostgreSQL server and this process, with `taskset`:
//! the production shape (the database on its own host, the relay and SQS elsewhere) measured on
//! one machine. The server's processes get the first half of the CPUs, this process (the relay, its
//! SQS client, the SQS fixture) and the children it starts (pgbench's client) the second half.

use std::process::Command;

use super::*;

/// CPUs split between the server and this process until dropped (then both get every CPU back).
#[derive(Debug)]
pub struct SplitCores {
    server: ServerCpu,
    /// `taskset` CPU lists: the server's, this process's, and every CPU.
    db: String,
    ours: String,
    all: String,
}

impl SplitCores {
    /// Splits the CPUs: `Ok(None)` when there is no second CPU or the server `client` is connected
    /// to does not run on this machine; an error when `taskset` is missing or refused.
    pub async fn apply(client: &tokio_postgres::Client) -> Result<Option<SplitCores>> {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let Some(server) = ServerCpu::find(client).await else {
            return Ok(None);
        };
        if cpus < 2 {
            return Ok(None);
        }
        let half = cpus / 2;
        let list = |from: usize, to: usize| {
            if to - from == 1 {
                from.to_string()
            } else {
                format!("{from}-{}", to - 1)
            }
        };
        let split = SplitCores {
            server,
            db: list(0, half),
            ours: list(half, cpus),
            all: list(0, cpus),
        };
        split.pin_server(&split.db)?;
        pin(std::process::id(), &split.ours)?;
        Ok(Some(split))
    }

    /// `PostgreSQL on CPU 0; this process on CPU 1` (the lists as `taskset` takes them).
    pub fn describe(&self) -> String {
        format!(
            "PostgreSQL on CPU {}; the relay, its SQS client, the SQS fixture and pgbench's client on CPU {}",
            self.db, self.ours
        )
    }

    /// Pins the postmaster (whose new backends inherit it) and every live child to `cpus`.
    fn pin_server(&self, cpus: &str) -> Result<()> {
        pin(self.server.postmaster(), cpus)?;
        for pid in self.server.children().unwrap_or_default() {
            // A backend that exited since it was listed has nothing left to pin.
            if let Err(e) = pin(pid, cpus)
                && std::path::Path::new(&format!("/proc/{pid}")).exists()
            {
                return Err(e);
            }
        }
        Ok(())
    }
}

impl Drop for SplitCores {
    fn drop(&mut self) {
        let all = self.all.clone();
        if let Err(e) = self.pin_server(&all) {
            eprintln!("[bench] could not give PostgreSQL every CPU back: {e}");
        }
        if let Err(e) = pin(std::process::id(), &all) {
            eprintln!("[bench] could not give the bench every CPU back: {e}");
        }
    }
}

/// `taskset -a -p -c cpus pid`: every thread of `pid` (threads started later inherit it).
fn pin(pid: u32, cpus: &str) -> Result<()> {
    let out = Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &pid.to_string()])
        .output()
        .map_err(|e| format!("taskset (util-linux) is needed to split the CPUs: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "taskset -a -p -c {cpus} {pid}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(())
}
