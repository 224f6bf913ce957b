//! Connecting to PostgreSQL in production: TLS with libpq's `sslmode` semantics (rustls, no
//! OpenSSL), one connector shared by the pool, the relay's LISTEN connection and one-off
//! connections, a per-connection password seam (RDS IAM auth tokens with the `rds-iam` feature),
//! and errors that name the host and the reason.
//!
//! | `sslmode`     | encrypted | certificate checked             | plaintext fallback          |
//! |---------------|-----------|---------------------------------|-----------------------------|
//! | `disable`     | no        | -                               | -                           |
//! | `prefer`      | if offered| no                              | only if the server refuses TLS |
//! | `require`     | yes       | no (chain if `sslrootcert` set) | never                       |
//! | `verify-ca`   | yes       | chain to `sslrootcert`          | never                       |
//! | `verify-full` | yes       | chain and host name             | never                       |
//!
//! `sslrootcert` is a PEM file (e.g. the RDS global bundle) or `system` (the OS trust store, which
//! implies `verify-full`). Without it, `verify-ca` / `verify-full` read `~/.postgresql/root.crt`.
//! The file is read again for a new connection when it changed (a rotated CA needs no restart).

mod attempts;
mod connect_config;
mod connector;
mod connector_options;
mod creation_gate;
mod describe;
mod harden;
mod idle_limit;
mod password;
mod pool_connect;
#[cfg(feature = "rds-iam")]
mod rds_iam;
mod startup_options;
mod tls;
mod tls_source;
mod verifier;
mod watched_client;

pub use connect_config::ConnectConfig;
pub use connector::{PgConnection, PgConnector};
pub(crate) use harden::end_idle_sessions_learning;
pub use harden::{
    CONNECT_TIMEOUT, IDLE_SESSION_TIMEOUT, KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_RETRIES,
    POOL_CREATE_TIMEOUT, POOL_RECYCLE_TIMEOUT, end_idle_sessions, harden, pool_timeouts,
};
pub(crate) use idle_limit::limit_idle_session;
pub use password::{Password, PasswordProvider};
#[cfg(feature = "rds-iam")]
pub use rds_iam::{RDS_TOKEN_LIFETIME, RdsIamError, RdsIamTokenProvider, rds_auth_token};
pub use tls::{RootCerts, SslMode, Tls};
pub use watched_client::{IDLE_AT_MOST, UNSEEN_AT_MOST, WatchedClient};

/// The error of a connection to `target` that did not answer its first statement within `limit`
/// of login.
pub(crate) fn stalled_after_login(target: &str, limit: std::time::Duration) -> crate::Error {
    crate::Error::new(
        crate::ErrorKind::Timeout,
        format!(
            "PostgreSQL at {target} did not answer the connection's first statement within {} s \
             of login: the connection stalled (a proxy or middlebox holding it?) or the server \
             is overloaded",
            limit.as_secs_f64()
        ),
    )
}
