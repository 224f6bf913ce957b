//! Throwaway PostgreSQL clusters (initdb + pg_ctl as the `postgres` user).

use std::process::Command;

use uuid::Uuid;

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

    /// Stops the server (fast shutdown: every connection is cut); [`start_again`](Self::start_again)
    /// brings it back.
    pub fn stop(&self) {
        self.pg_ctl("stop");
    }

    /// Starts the server stopped by [`stop`](Self::stop).
    pub fn start_again(&self) {
        self.pg_ctl("start");
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
