//! Connection failures as one clear sentence naming the host and the reason.

use std::error::Error as StdError;
use std::io;

use rustls::CertificateError;
use tokio_postgres::error::SqlState;

use super::tls::SslMode;
use crate::error::{Error, ErrorKind};

/// Where a connection's password comes from: what a refusal of it is said to be about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PasswordSource {
    /// The connection string.
    Url,
    /// A [`PasswordProvider`](super::PasswordProvider).
    Provider,
    /// An RDS IAM auth token.
    #[cfg(feature = "rds-iam")]
    RdsIam,
}

/// Turns a failed connection attempt into an error that says what to fix.
pub(crate) fn describe(
    e: &tokio_postgres::Error,
    target: &str,
    mode: SslMode,
    source: PasswordSource,
) -> Error {
    let (kind, reason) = reason(e, mode, source);
    Error::new(
        kind,
        format!("cannot connect to PostgreSQL at {target} (sslmode={mode}): {reason}"),
    )
}

fn reason(e: &tokio_postgres::Error, mode: SslMode, source: PasswordSource) -> (ErrorKind, String) {
    if let Some(tls) = find_rustls_error(e) {
        return (ErrorKind::Config, tls_reason(&tls));
    }
    if let Some(db) = e.as_db_error() {
        return (
            ErrorKind::Database,
            server_reason(db.code(), db.message(), mode, source),
        );
    }
    // tokio-postgres' own text and its causes, e.g. "error connecting to server: Connection refused".
    let text = crate::error_chain(e);
    // Said where the password goes (a black-box run tried PGPASSWORD, as with psql).
    if text.ends_with("password missing") {
        return (
            ErrorKind::Config,
            "the server asks for a password and the connection string has none: put it in the \
             URL (postgres://USER:PASSWORD@HOST/DB, percent-encoded), or use RDS IAM auth \
             (`outbox --rds-iam`, `PgConnector::with_rds_iam`); PGPASSWORD and ~/.pgpass are not \
             read"
                .to_owned(),
        );
    }
    if text.contains("server does not support TLS") {
        return (
            ErrorKind::Config,
            format!("the server does not offer TLS, which sslmode={mode} demands"),
        );
    }
    (ErrorKind::Database, text)
}

/// What the server's error `code` and `message` say, for a failed connection. Authentication
/// failures stay retryable: a password or token may be mid-rotation. (The CLI's start-up check
/// exits on them at once.)
fn server_reason(code: &SqlState, message: &str, mode: SslMode, source: PasswordSource) -> String {
    let mut text = message.to_string();
    if *code == SqlState::INVALID_PASSWORD {
        return refused(&text, source);
    }
    if *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION {
        // RDS checks IAM tokens through PAM, whose failure is this code, not INVALID_PASSWORD's
        // (black-box run against a server answering as PostgreSQL's PAM does).
        #[cfg(feature = "rds-iam")]
        if source == PasswordSource::RdsIam && text.contains("authentication failed") {
            return refused(&text, source);
        }
        if text.contains("no encryption") && mode < SslMode::Require {
            text.push_str(
                " (the server requires TLS: use sslmode=require, or verify-full with sslrootcert)",
            );
        }
        return format!("access refused: {text}");
    }
    if text.contains("unsupported startup parameter: options") {
        // The connector's own settings were left out already: these are the URL's (black-box
        // run: no word on what to do).
        text.push_str(
            " (a pooler, such as PgBouncer, refuses the connection string's `options`: remove \
             them from the URL and set those settings for the role instead, `ALTER ROLE … SET …`)",
        );
    }
    format!("the server said: {text}")
}

/// The server's refusal of the password, said as what the password was (black-box run: a refused
/// RDS IAM token read "wrong password", pointing at nothing to fix).
fn refused(text: &str, source: PasswordSource) -> String {
    match source {
        PasswordSource::Url => format!("wrong password ({text})"),
        PasswordSource::Provider => {
            format!("the password provider's password was refused ({text})")
        }
        #[cfg(feature = "rds-iam")]
        PasswordSource::RdsIam => format!(
            "the RDS IAM auth token was refused ({text}): the instance needs IAM database \
             authentication on, the user `GRANT rds_iam`, and the AWS credentials `rds-db:connect` \
             on this user; the token is signed for the URL's host, port and user, in the region of \
             the RDS host name"
        ),
    }
}

/// The rustls error behind a failed handshake (tokio-rustls wraps it in an `io::Error`).
fn find_rustls_error(e: &tokio_postgres::Error) -> Option<rustls::Error> {
    let mut source: Option<&(dyn StdError + 'static)> = e.source();
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<rustls::Error>() {
            return Some(r.clone());
        }
        if let Some(r) = s
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(r.clone());
        }
        source = s.source();
    }
    None
}

fn tls_reason(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "TLS: the server's certificate is not valid for this host name ({e}); \
                     connect by a name the certificate lists, or use sslmode=verify-ca"
                )
            }
            CertificateError::UnknownIssuer => "TLS: the server's certificate is not signed by a \
                 trusted CA (check sslrootcert: for RDS, the global bundle)"
                .to_string(),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "TLS: the server's certificate has expired".to_string()
            }
            // webpki's reason, within `Other` (rustls names no variant for it). A self-signed
            // certificate made by OpenSSL's defaults is a CA certificate: refused as the
            // server's own even when it is the sslrootcert itself, which libpq accepts; the
            // reason read as Rust debug text (black-box run).
            CertificateError::Other(other)
                if format!("{other:?}").contains("CaUsedAsEndEntity") =>
            {
                "TLS: the server's certificate is a CA certificate (basicConstraints CA:TRUE), \
                 which is refused as a server's own, even when it is the sslrootcert itself \
                 (libpq accepts that): give the server a certificate with CA:FALSE, signed by the \
                 CA in sslrootcert (or self-signed with -addext basicConstraints=critical,CA:FALSE)"
                    .to_string()
            }
            _ => format!("TLS: the server's certificate was refused ({e})"),
        },
        other => format!("TLS handshake failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA certificate as the server's own (a self-signed one made by OpenSSL's defaults) is
    /// said in words, not as Rust debug text.
    #[test]
    fn a_ca_certificate_as_the_servers_own_is_said_in_words() {
        #[derive(Debug)]
        struct CaUsedAsEndEntity;
        impl std::fmt::Display for CaUsedAsEndEntity {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("CaUsedAsEndEntity")
            }
        }
        impl StdError for CaUsedAsEndEntity {}
        let e = rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(
            std::sync::Arc::new(CaUsedAsEndEntity),
        )));
        let reason = tls_reason(&e);
        assert!(
            reason.contains("is a CA certificate (basicConstraints CA:TRUE)")
                && !reason.contains("Other("),
            "{reason}"
        );
    }

    #[test]
    fn a_refusal_is_said_as_what_the_password_was() {
        let wrong = server_reason(
            &SqlState::INVALID_PASSWORD,
            "password authentication failed for user \"relay\"",
            SslMode::Require,
            PasswordSource::Url,
        );
        assert!(wrong.starts_with("wrong password"), "{wrong}");
        let pam = "PAM authentication failed for user \"relay\"";
        let url = server_reason(
            &SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            pam,
            SslMode::Require,
            PasswordSource::Url,
        );
        assert!(url.starts_with("access refused"), "{url}");
        // RDS refuses an IAM token through PAM: 28000, not 28P01 (it read "access refused").
        #[cfg(feature = "rds-iam")]
        for code in [
            SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            SqlState::INVALID_PASSWORD,
        ] {
            let iam = server_reason(&code, pam, SslMode::Require, PasswordSource::RdsIam);
            assert!(
                iam.starts_with("the RDS IAM auth token was refused") && iam.contains("rds_iam"),
                "{iam}"
            );
        }
    }
}
