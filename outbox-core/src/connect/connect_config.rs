//! A connection string as libpq reads it: tokio-postgres' settings plus the TLS ones it lacks.

use std::str::FromStr;

use super::tls::Tls;
use crate::error::Error;

/// A parsed connection string: everything tokio-postgres understands, plus `sslmode` with libpq's
/// five values and `sslrootcert` (which tokio-postgres does not read).
///
/// Both forms are accepted: `postgres://user:pass@host:5432/db?sslmode=verify-full&sslrootcert=/ca.pem`
/// and `host=... user=... sslmode=verify-full sslrootcert=system`. `Debug` redacts the password.
///
/// ```
/// use outbox_core::{ConnectConfig, SslMode};
/// let c: ConnectConfig = "postgres://app@db.example.com/app?sslmode=verify-full&sslrootcert=system"
///     .parse()?;
/// assert_eq!(c.tls.mode, SslMode::VerifyFull);
/// # Ok::<(), outbox_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ConnectConfig {
    /// Host, port, user, password, database and the other settings.
    pub pg: tokio_postgres::Config,
    /// `sslmode` and `sslrootcert`.
    pub tls: Tls,
}

impl ConnectConfig {
    /// Settings from a tokio-postgres configuration: its `sslmode` (disable, prefer, require) and no
    /// certificate verification (tokio-postgres has no other).
    pub fn from_pg(pg: tokio_postgres::Config) -> ConnectConfig {
        let mode = match pg.get_ssl_mode() {
            tokio_postgres::config::SslMode::Disable => super::SslMode::Disable,
            tokio_postgres::config::SslMode::Require => super::SslMode::Require,
            _ => super::SslMode::Prefer,
        };
        ConnectConfig {
            pg,
            tls: Tls {
                mode,
                root_certs: super::RootCerts::Unset,
            },
        }
    }
}

impl FromStr for ConnectConfig {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        // Without credentials, an `@` in the path or query (`…/db?application_name=a@b`) is read
        // as the end of a user name and password that swallow the host (and with it `sslmode`):
        // refused, by libpq's rule (credentials end before the first `/`), rather than connecting
        // to the wrong host with the wrong settings. Checked on the raw text, not the parsed user
        // (a role name may hold a `/`, percent-encoded).
        if let Some(after_scheme) = s
            .strip_prefix("postgres://")
            .or_else(|| s.strip_prefix("postgresql://"))
        {
            let credentials = after_scheme.split_once('@').map(|(c, _)| c);
            if credentials.is_some_and(|c| c.contains('/')) {
                return Err(Error::config(
                    "the database URL has an `@` after its host, or a raw `/` in its user name or \
                     password: percent-encode them (%40, %2F)",
                ));
            }
        }
        if let Some(key) = client_certificate_key(s) {
            // tokio-postgres' words ("unknown option") came after a hint about percent-encoding
            // the password (black-box run).
            return Err(Error::config(format!(
                "`{key}`: client certificates (sslcert, sslkey, sslpassword) are not supported; \
                 authenticate with a password or --rds-iam"
            )));
        }
        let (rest, mode, root) = if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            split_url(s)
        } else {
            split_key_values(s)?
        };
        let tls = Tls::resolve(mode.as_deref(), root.as_deref())?;
        let mut pg = tokio_postgres::Config::from_str(&rest).map_err(|e| {
            // A raw `@` in a user name, the password after it then read as a bad port, said
            // without a word about either (black-box run).
            let credentials =
                s.contains("://") && s.split('/').nth(2).is_some_and(|a| a.contains('@'));
            let message = if credentials {
                "the database URL is not a valid connection string (an `@`, `:`, `/`, `#`, `?` \
                 or `%` in the user name or password must be percent-encoded: %40, %3A, %2F, \
                 %23, %3F, %25)"
            } else {
                "the database URL is not a valid connection string"
            };
            Error::config(message).with_source(e)
        })?;
        // The user and password end at the first `@`: a raw `@` in a password leaves the rest of
        // the password in the host name, which error messages would then show. Refused without
        // quoting the host.
        let at_in_host = pg
            .get_hosts()
            .iter()
            .any(|h| matches!(h, tokio_postgres::config::Host::Tcp(h) if h.contains('@')));
        if at_in_host {
            return Err(Error::config(
                "the database URL's host name contains `@`: percent-encode an `@` in the user \
                 name or password as %40",
            ));
        }
        // Addresses without host names (`hostaddr=` alone): libpq encrypts below verify-full
        // without a name, tokio-postgres refuses TLS without one ("no hostname provided"): the
        // address stands in as the name (only verify-full would check it, and it needs a name).
        if pg.get_hosts().is_empty() && !pg.get_hostaddrs().is_empty() {
            if tls.mode == super::SslMode::VerifyFull {
                return Err(Error::config(
                    "sslmode=verify-full needs a host name to check the certificate against: set \
                     host= beside hostaddr=",
                ));
            }
            for ip in pg.get_hostaddrs().to_vec() {
                pg.host(ip.to_string());
            }
        }
        // No host: tokio-postgres refuses it only when connecting ("both host and hostaddr are
        // missing", under an empty host name); libpq would try its compiled-in socket directory,
        // which differs between builds. A missing setting, said before anything is contacted.
        if pg.get_hosts().is_empty() {
            return Err(Error::config(if s.trim().is_empty() {
                "the database URL is empty"
            } else {
                "the database URL names no host: give one (postgres://HOST/DB, or host=HOST; \
                 host=/var/run/postgresql for a Unix-domain socket)"
            }));
        }
        // libpq ignores sslmode on a Unix-domain socket (the connection never leaves the
        // machine); so does this, instead of asking for TLS on a socket, which the server refuses
        // ("does not offer TLS"): one URL serves a local socket and a TCP host alike.
        let only_sockets = !pg.get_hosts().is_empty()
            && pg
                .get_hosts()
                .iter()
                .all(|h| !matches!(h, tokio_postgres::config::Host::Tcp(_)));
        // A mode checking certificates with no CA to check them against: a missing setting, said
        // here rather than when the first connection is made (as the connector would).
        if let Some(missing) = tls.missing_roots().filter(|_| !only_sockets) {
            return Err(missing);
        }
        pg.ssl_mode(match tls.mode {
            _ if only_sockets => tokio_postgres::config::SslMode::Disable,
            super::SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            super::SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        });
        Ok(ConnectConfig { pg, tls })
    }
}

type Split = (String, Option<String>, Option<String>);

/// Takes `sslmode` and `sslrootcert` out of a URL's query string. The query starts at the first
/// `?` after the credentials: like tokio-postgres (and libpq), everything up to the first `@` is
/// user and password, so a raw `?` in a password does not start the query.
fn split_url(url: &str) -> Split {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let host_start = url[after_scheme..]
        .find('@')
        .map_or(after_scheme, |i| after_scheme + i + 1);
    let Some(q) = url[host_start..].find('?').map(|i| host_start + i) else {
        return (url.to_string(), None, None);
    };
    let (base, query) = (&url[..q], &url[q + 1..]);
    let (mut mode, mut root) = (None, None);
    let kept: Vec<String> = query
        .split('&')
        .filter(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match percent_decode(k).as_str() {
                "sslmode" => mode = Some(percent_decode(v)),
                "sslrootcert" => root = Some(percent_decode(v)),
                _ => return !pair.is_empty(),
            }
            false
        })
        .flat_map(|pair| match pair.split_once('=') {
            // Several hosts in one `host=` (libpq's `?host=a,b&port=5432,5433`): tokio-postgres
            // splits them in every form but this one, and looked up `a,b` as one name (black-box
            // run). Given as one `host=` each, they are several hosts.
            Some((k, v)) if percent_decode(k) == "host" => v
                .replace("%2C", ",")
                .replace("%2c", ",")
                .split(',')
                .map(|host| format!("host={host}"))
                .collect::<Vec<_>>(),
            _ => vec![pair.to_owned()],
        })
        .collect();
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (rest, mode, root)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Takes `sslmode` and `sslrootcert` out of a `key=value ...` string, re-quoting the rest.
/// The first key of `s` (a URL's query, or `key=value` pairs) that asks for a client
/// certificate.
fn client_certificate_key(s: &str) -> Option<&'static str> {
    const KEYS: [&str; 3] = ["sslcert", "sslkey", "sslpassword"];
    let keys: Vec<String> = if s.starts_with("postgres://") || s.starts_with("postgresql://") {
        let query = s.split_once('?').map_or("", |(_, q)| q);
        query
            .split('&')
            .map(|pair| percent_decode(pair.split_once('=').map_or(pair, |(k, _)| k)))
            .collect()
    } else {
        key_values(s).ok()?.into_iter().map(|(k, _)| k).collect()
    };
    KEYS.into_iter().find(|k| keys.iter().any(|key| key == k))
}

fn split_key_values(s: &str) -> Result<Split, Error> {
    let (mut mode, mut root) = (None, None);
    let mut rest = Vec::new();
    for (key, value) in key_values(s)? {
        match key.as_str() {
            "sslmode" => mode = Some(value),
            "sslrootcert" => root = Some(value),
            _ => rest.push(format!(
                "{key}='{}'",
                value.replace('\\', "\\\\").replace('\'', "\\'")
            )),
        }
    }
    Ok((rest.join(" "), mode, root))
}

/// libpq's `key = value` syntax: values may be single-quoted, `\` escapes the next character.
fn key_values(s: &str) -> Result<Vec<(String, String)>, Error> {
    let bad = || Error::config("the database URL is not a valid `key=value` connection string");
    let mut chars = s.chars().peekable();
    let mut pairs = Vec::new();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') || key.is_empty() {
            return Err(bad());
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next().ok_or_else(bad)? {
                    '\'' => break,
                    '\\' => value.push(chars.next().ok_or_else(bad)?),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.push(chars.next().ok_or_else(bad)?);
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

#[cfg(test)]
mod tests;
