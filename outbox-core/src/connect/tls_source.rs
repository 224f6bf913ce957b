//! The TLS connector of new connections, rebuilt when the `sslrootcert` file changes.
//!
//! libpq reads `sslrootcert` for every connection, so a CA bundle replaced on disk (a rotated
//! private CA, a Kubernetes secret mounted as a file) is trusted from the next connection on. A
//! relay runs for months: it looks at the file's size and modification time before each new
//! connection (one `stat`) and reads it again when they changed. A file that cannot be read or
//! holds no certificate at that moment (half-written, say) keeps the roots in hand, with a warning,
//! rather than failing every connection.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use tokio_postgres_rustls::MakeRustlsConnect;

use super::tls::Tls;
use crate::error::Error;

/// What identifies a version of the root file: its size and modification time.
type Stamp = Option<(u64, SystemTime)>;

fn stamp(path: &PathBuf) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

/// The connector for new connections under one [`Tls`] setting.
pub(crate) struct TlsSource {
    tls: Tls,
    /// The CA file the roots were read from, when the mode checks certificates against one.
    file: Option<PathBuf>,
    current: Mutex<Current>,
}

struct Current {
    make: MakeRustlsConnect,
    /// The file's stamp when `make` was built from it (or last found unusable: not warned again).
    stamp: Stamp,
}

impl TlsSource {
    /// Builds the connector; fails when the settings cannot be met (an unreadable root file).
    pub(crate) fn new(tls: Tls) -> Result<TlsSource, Error> {
        let file = tls.root_file();
        let stamp = file.as_ref().and_then(stamp);
        let make = MakeRustlsConnect::new(tls.client_config()?);
        Ok(TlsSource {
            tls,
            file,
            current: Mutex::new(Current { make, stamp }),
        })
    }

    /// The connector for a new connection: built again first if the root file changed.
    pub(crate) fn connector(&self) -> MakeRustlsConnect {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(path) = &self.file {
            let now = stamp(path);
            if now != current.stamp {
                current.stamp = now;
                match self.tls.client_config() {
                    Ok(config) => {
                        tracing::info!(sslrootcert = %path.display(),
                            "the sslrootcert file changed: new connections trust its certificates");
                        current.make = MakeRustlsConnect::new(config);
                    }
                    Err(e) => tracing::warn!(sslrootcert = %path.display(),
                        error = %crate::error_chain(&e),
                        "the sslrootcert file changed but cannot be used; new connections keep \
                         trusting the certificates read before"),
                }
            }
        }
        current.make.clone()
    }
}
