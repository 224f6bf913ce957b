//! A throwaway PostgreSQL that only speaks TLS: a CA and a server certificate made at test time
//! with the `openssl` command, `ssl=on`, and `pg_hba.conf` refusing every plaintext TCP connection.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Cluster;

/// The TLS-only cluster: `postgres` logs in without a password (over TLS), other roles with a
/// SCRAM password; `hostnossl` is rejected.
pub struct TlsCluster {
    pub cluster: Cluster,
    /// The CA that signed the server certificate (valid for IP 127.0.0.1 only, not `localhost`).
    pub ca: PathBuf,
    /// Another CA, that signed nothing the server has.
    pub wrong_ca: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the `openssl` command is needed to make the test certificates (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-subj",
            &format!("/CN=outbox test {name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

impl TlsCluster {
    /// Makes the certificates, initialises and starts the cluster.
    pub fn start() -> TlsCluster {
        let cluster = Cluster::init();
        let certs = cluster.dir.join("certs");
        std::fs::create_dir_all(&certs).unwrap();
        make_ca(&certs, "ca");
        make_ca(&certs, "wrong-ca");
        openssl(
            &certs,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=outbox-test-server",
            ],
        );
        std::fs::write(
            certs.join("server.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(
            &certs,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.crt",
                "-days",
                "2",
                "-extfile",
                "server.ext",
            ],
        );
        let data = cluster.dir.join("data");
        for f in ["server.crt", "server.key"] {
            std::fs::copy(certs.join(f), data.join(f)).unwrap();
        }
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             hostssl all postgres 127.0.0.1/32 trust\n\
             hostssl all all 127.0.0.1/32 scram-sha-256\n\
             hostnossl all all 127.0.0.1/32 reject\n",
        )
        .unwrap();
        let _ = Command::new("chown")
            .args(["-R", "postgres:postgres", data.to_str().unwrap()])
            .status();
        let _ = Command::new("chmod")
            .args(["600", data.join("server.key").to_str().unwrap()])
            .status();
        let mut cluster = cluster;
        cluster.opts = "-c ssl=on".to_string();
        cluster.launch();
        TlsCluster {
            ca: certs.join("ca.crt"),
            wrong_ca: certs.join("wrong-ca.crt"),
            cluster,
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.cluster.port
    }

    /// `postgres://USER@127.0.0.1:PORT/DB?QUERY`.
    pub fn url(&self, user: &str, db: &str, query: &str) -> String {
        format!(
            "postgres://{user}@127.0.0.1:{}/{db}?{query}",
            self.cluster.port
        )
    }

    /// `sslmode=verify-full&sslrootcert=<the right CA>`.
    pub fn verify_full(&self) -> String {
        format!("sslmode=verify-full&sslrootcert={}", self.ca.display())
    }

    /// An admin connection (TLS, `postgres`) to `db`.
    pub async fn admin(&self, db: &str) -> tokio_postgres::Client {
        outbox_core::PgConnector::from_url(&self.url("postgres", db, &self.verify_full()))
            .unwrap()
            .connect_spawned()
            .await
            .unwrap_or_else(|e| panic!("admin connection to the TLS cluster: {e}"))
    }

    /// Makes the server present a certificate its clients do not trust (the wrong CA's own, which
    /// no `sslrootcert` of these tests accepts), or, with `wrong == false`, its own again; waits
    /// until new connections see the change. `admin` is a connection opened before.
    pub async fn serve_wrong_certificate(&self, admin: &tokio_postgres::Client, wrong: bool) {
        let data = self.cluster.dir.join("data");
        let certs = self.ca.parent().expect("the certificates' folder");
        for (from, to) in [("wrong-ca.crt", "wrong.crt"), ("wrong-ca.key", "wrong.key")] {
            std::fs::copy(certs.join(from), data.join(to)).unwrap();
        }
        let _ = Command::new("chown")
            .args(["postgres:postgres", "wrong.crt", "wrong.key"])
            .current_dir(&data)
            .status();
        let _ = Command::new("chmod")
            .args(["600", data.join("wrong.key").to_str().unwrap()])
            .status();
        let statements: [&str; 2] = if wrong {
            [
                "ALTER SYSTEM SET ssl_cert_file = 'wrong.crt'",
                "ALTER SYSTEM SET ssl_key_file = 'wrong.key'",
            ]
        } else {
            [
                "ALTER SYSTEM RESET ssl_cert_file",
                "ALTER SYSTEM RESET ssl_key_file",
            ]
        };
        for s in statements.into_iter().chain(["SELECT pg_reload_conf()"]) {
            admin
                .batch_execute(s)
                .await
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        let verify = outbox_core::PgConnector::from_url(&self.url(
            "postgres",
            "postgres",
            &self.verify_full(),
        ))
        .unwrap();
        let changed = outbox_tests::eventually(std::time::Duration::from_secs(10), async || {
            verify.connect_spawned().await.is_err() == wrong
        })
        .await;
        assert!(
            changed,
            "the server did not load the certificate (wrong: {wrong})"
        );
    }

    /// How many plaintext connections the server refused so far (from its log).
    pub fn plaintext_refusals(&self) -> usize {
        std::fs::read_to_string(self.cluster.dir.join("server.log"))
            .unwrap_or_default()
            .matches("no encryption")
            .count()
    }
}
