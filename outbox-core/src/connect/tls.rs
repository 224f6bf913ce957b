//! `sslmode` / `sslrootcert` as libpq means them, and the rustls client configuration they give.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::verifier::{ChainOnly, EncryptOnly};
use crate::error::Error;

/// How much TLS a connection demands, as libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum SslMode {
    /// Plaintext only.
    Disable,
    /// TLS when the server offers it, plaintext when it refuses TLS (libpq's default); the
    /// certificate is not checked.
    #[default]
    Prefer,
    /// TLS or nothing; the certificate is not checked (unless a root certificate is given, which
    /// libpq then treats as `verify-ca`).
    Require,
    /// TLS, and the server's certificate chains to a trusted CA (any host name).
    VerifyCa,
    /// TLS, the certificate chains to a trusted CA and is valid for the host connected to.
    VerifyFull,
}

impl SslMode {
    /// The libpq spelling (`verify-full`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether the certificate chain is checked.
    pub fn verifies(self) -> bool {
        self >= SslMode::VerifyCa
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SslMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => {
                return Err(Error::config(
                    "sslmode=allow (plaintext first, TLS only if refused) is not supported: \
                     use prefer, require, verify-ca or verify-full",
                ));
            }
            other => {
                return Err(Error::config(format!(
                    "sslmode `{other}` is not one of disable, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }
}

/// Which certificate authorities are trusted, as libpq's `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RootCerts {
    /// None given: `verify-ca` / `verify-full` then read `~/.postgresql/root.crt`, as libpq does
    /// (and `require` becomes `verify-ca` when that file exists).
    #[default]
    Unset,
    /// A PEM file of one or more CA certificates (e.g. the RDS global bundle).
    File(PathBuf),
    /// The operating system's trust store (`sslrootcert=system`).
    System,
}

/// The TLS settings of a connection: the mode and the trusted roots.
///
/// [`Tls::resolve`] applies libpq's rules: `sslrootcert=system` means `verify-full` (weaker modes are
/// refused), `require` with a root file (given, or `~/.postgresql/root.crt`) means `verify-ca`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tls {
    /// The `sslmode` (default [`SslMode::Prefer`], as libpq).
    pub mode: SslMode,
    /// The `sslrootcert`.
    pub root_certs: RootCerts,
}

impl Tls {
    /// Settings from the raw `sslmode` / `sslrootcert` values of a connection string (either may be
    /// absent), with libpq's rules applied: `require` with a root file — given, or
    /// `~/.postgresql/root.crt` when none is — checks the chain (`verify-ca`).
    pub fn resolve(mode: Option<&str>, root_cert: Option<&str>) -> Result<Tls, Error> {
        Tls::resolve_with(mode, root_cert, default_root_cert())
    }

    /// [`resolve`](Self::resolve), with the default root file (`~/.postgresql/root.crt` if it
    /// exists) given.
    fn resolve_with(
        mode: Option<&str>,
        root_cert: Option<&str>,
        default_root: Option<PathBuf>,
    ) -> Result<Tls, Error> {
        let root_certs = match root_cert {
            None | Some("") => RootCerts::Unset,
            Some("system") => RootCerts::System,
            Some(path) => RootCerts::File(PathBuf::from(path)),
        };
        let mode = match (mode.map(SslMode::from_str).transpose()?, &root_certs) {
            (None, RootCerts::System) => SslMode::VerifyFull,
            (Some(m), RootCerts::System) if m != SslMode::VerifyFull => {
                return Err(Error::config(format!(
                    "sslmode={m} with sslrootcert=system: the system trust store is only used with \
                     verify-full (as libpq); drop sslmode or set sslmode=verify-full"
                )));
            }
            (Some(SslMode::Require), RootCerts::File(_)) => SslMode::VerifyCa,
            // libpq: "if a root CA file exists, the connection is verified as with verify-ca".
            (Some(SslMode::Require), RootCerts::Unset) if default_root.is_some() => {
                SslMode::VerifyCa
            }
            (m, _) => m.unwrap_or_default(),
        };
        Ok(Tls { mode, root_certs })
    }

    /// Plaintext only.
    pub fn disabled() -> Tls {
        Tls {
            mode: SslMode::Disable,
            root_certs: RootCerts::Unset,
        }
    }

    /// The rustls client configuration these settings give (the `aws-lc-rs` provider, TLS 1.2+).
    pub fn client_config(&self) -> Result<ClientConfig, Error> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = if self.mode.verifies() {
            let roots = Arc::new(self.root_store()?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| {
                    Error::config("cannot build the certificate verifier").with_source(e)
                })?;
            if self.mode == SslMode::VerifyFull {
                webpki
            } else {
                Arc::new(ChainOnly::new(webpki))
            }
        } else {
            Arc::new(EncryptOnly::new(provider.clone()))
        };
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::config("no TLS protocol version available").with_source(e))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        // PostgreSQL 17 refuses a direct TLS connection (`sslnegotiation=direct`) that does not
        // ask for the `postgresql` protocol by ALPN; libpq always asks, and older servers ignore it.
        config.alpn_protocols = vec![POSTGRESQL_ALPN.to_vec()];
        Ok(config)
    }

    /// The PEM file the certificate check reads its roots from: `sslrootcert`, or
    /// `~/.postgresql/root.crt` when none is set; `None` when nothing is checked or the system
    /// store is.
    pub(crate) fn root_file(&self) -> Option<PathBuf> {
        if !self.mode.verifies() {
            return None;
        }
        match &self.root_certs {
            RootCerts::File(path) => Some(path.clone()),
            RootCerts::Unset => default_root_cert(),
            RootCerts::System => None,
        }
    }

    fn root_store(&self) -> Result<RootCertStore, Error> {
        let mut roots = RootCertStore::empty();
        match &self.root_certs {
            RootCerts::System => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(Error::config(
                        "sslrootcert=system: no CA certificate found in the system trust store",
                    ));
                }
            }
            RootCerts::File(path) => add_pem_file(&mut roots, path)?,
            RootCerts::Unset => match default_root_cert() {
                Some(path) => add_pem_file(&mut roots, &path)?,
                None => return Err(self.no_roots()),
            },
        }
        Ok(roots)
    }

    /// The error of a mode that checks the server's certificate without a CA to check it
    /// against: no `sslrootcert`, and no `~/.postgresql/root.crt` (libpq's default); `None`
    /// otherwise. A missing setting, found without contacting anything (what
    /// [`ConnectConfig`](super::ConnectConfig)'s parse refuses).
    pub(crate) fn missing_roots(&self) -> Option<Error> {
        let missing = self.mode.verifies()
            && matches!(self.root_certs, RootCerts::Unset)
            && default_root_cert().is_none();
        missing.then(|| self.no_roots())
    }

    fn no_roots(&self) -> Error {
        Error::config(format!(
            "sslmode={} needs the CA that signed the server's certificate: set \
             sslrootcert=<PEM file> (e.g. the RDS global bundle) or sslrootcert=system",
            self.mode
        ))
    }
}

/// The ALPN protocol name of PostgreSQL (what libpq 17 sends).
const POSTGRESQL_ALPN: &[u8] = b"postgresql";

/// `~/.postgresql/root.crt`, libpq's default `sslrootcert`, if it exists.
fn default_root_cert() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".postgresql/root.crt"))
        .filter(|p| p.is_file())
}

fn add_pem_file(roots: &mut RootCertStore, path: &std::path::Path) -> Result<(), Error> {
    let unreadable = |e: rustls::pki_types::pem::Error| {
        Error::config(format!(
            "sslrootcert {}: cannot read certificates",
            path.display()
        ))
        .with_source(e)
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(unreadable)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(unreadable)?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(Error::config(format!(
            "sslrootcert {}: no CA certificate in the file",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_rules() {
        let t = |m: Option<&str>, r: Option<&str>| Tls::resolve(m, r).map(|t| t.mode);
        assert_eq!(t(None, None).unwrap(), SslMode::Prefer);
        assert_eq!(t(Some("require"), None).unwrap(), SslMode::Require);
        assert_eq!(
            t(Some("require"), Some("/ca.pem")).unwrap(),
            SslMode::VerifyCa
        );
        assert_eq!(t(None, Some("system")).unwrap(), SslMode::VerifyFull);
        assert!(t(Some("verify-ca"), Some("system")).is_err());
        assert!(t(Some("allow"), None).is_err());
        assert!(t(Some("verify_full"), None).is_err());
    }

    #[test]
    fn require_checks_the_chain_when_the_default_root_file_exists() {
        let home_root = Some(PathBuf::from("/home/app/.postgresql/root.crt"));
        let t = |m: Option<&str>, root: Option<PathBuf>| Tls::resolve_with(m, None, root).unwrap();
        // As libpq: with ~/.postgresql/root.crt, `require` is `verify-ca` (it did not check).
        assert_eq!(
            t(Some("require"), home_root.clone()).mode,
            SslMode::VerifyCa
        );
        assert_eq!(t(Some("require"), None).mode, SslMode::Require);
        assert_eq!(t(Some("prefer"), home_root.clone()).mode, SslMode::Prefer);
        assert_eq!(t(None, home_root).mode, SslMode::Prefer);
    }

    #[test]
    fn every_connection_asks_for_the_postgresql_protocol_by_alpn() {
        // Without it PostgreSQL 17 refuses sslnegotiation=direct.
        let config = Tls::resolve(Some("require"), None)
            .unwrap()
            .client_config()
            .unwrap();
        assert_eq!(config.alpn_protocols, vec![b"postgresql".to_vec()]);
    }

    #[test]
    fn verifying_without_a_ca_says_what_to_set() {
        let tls = Tls {
            mode: SslMode::VerifyFull,
            root_certs: RootCerts::File("/nonexistent/ca.pem".into()),
        };
        let e = tls.client_config().unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }
}
