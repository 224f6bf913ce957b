//! Every connection the CLI opens (pool, LISTEN, one-offs, migrate) goes through one
//! [`PgConnector`]: `DATABASE_URL` read as libpq reads it (`sslmode`, `sslrootcert`), TLS with
//! rustls, and with `--rds-iam` a fresh RDS auth token as the password of each new connection.

use std::sync::OnceLock;
use std::time::Duration;

use outbox_core::{ConnectConfig, PgConnector, WatchedClient};

use crate::{Failure, usage};

/// How long one connection attempt may take when the URL sets no `connect_timeout`: start-up fails
/// within seconds on an unreachable host instead of hanging.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Settings for every connection, set once by `main` from the global flags.
#[derive(Debug, Clone, Copy)]
pub struct DbOptions {
    /// Use RDS IAM auth tokens as passwords.
    pub rds_iam: bool,
    /// What errors about the main database's URL call it: `--database-url` or `DATABASE_URL`.
    pub url_name: &'static str,
}

static OPTIONS: OnceLock<DbOptions> = OnceLock::new();

/// Records the global connection settings (first call wins).
pub fn init(options: DbOptions) {
    let _ = OPTIONS.set(options);
}

/// The connector for the main database's `url`.
pub async fn connector(url: Option<&str>) -> Result<PgConnector, Failure> {
    let url =
        url.ok_or_else(|| usage("no database given: set DATABASE_URL or pass --database-url"))?;
    let name = OPTIONS.get().map_or("DATABASE_URL", |o| o.url_name);
    connector_named(url, Some(name)).await
}

/// The connector for `url`; a parse error starts with `name` when given (the caller names the
/// URL itself otherwise, e.g. `--listen-url`).
pub async fn connector_named(url: &str, name: Option<&str>) -> Result<PgConnector, Failure> {
    let mut config: ConnectConfig = url.parse().map_err(|e| {
        let e = outbox_core::error_chain(&e);
        usage(name.map_or_else(|| e.clone(), |name| format!("{name}: {e}")))
    })?;
    if config.pg.get_connect_timeout().is_none() {
        config.pg.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
    }
    let connector = PgConnector::new(config)?;
    if !OPTIONS.get().is_some_and(|o| o.rds_iam) {
        return Ok(connector);
    }
    // IAM over a connection that could be plaintext, or with a URL a token cannot be signed for
    // (several hosts, a socket, no user), is refused before any token is made: a conflict of
    // settings (a usage error); a failure to get credentials or a region is not.
    let conflict = connector.rds_iam_conflict().is_some();
    connector.with_rds_iam().await.map_err(|e| {
        let e = format!("--rds-iam: {}", outbox_core::error_chain(&e));
        if conflict { usage(e) } else { e.into() }
    })
}

/// The `application_name` of the CLI's own connections (unless the URL sets one), so operators
/// can tell them apart in `pg_stat_activity` (they had none; the relay's are `outbox-relay…`).
pub const CLI_APPLICATION_NAME: &str = "outbox-cli";

/// How long a statement of `stats`, `dead-letters`, `cleanup` and `partitions list` waits for a
/// lock (unless the URL's `options` set a `lock_timeout`): behind a `LOCK TABLE`, an `ALTER TABLE`
/// or a `VACUUM FULL` they waited, silently, as long as it was held (black-box run). `migrate` and
/// `partitions maintain` bound their own waits.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// One connection, driven on a task.
pub async fn connect(url: Option<&str>) -> Result<tokio_postgres::Client, Failure> {
    let connector = connector(url).await?;
    Ok(connector
        .with_default_application_name(CLI_APPLICATION_NAME)
        .connect_spawned()
        .await?)
}

/// What errors and the log call the connection of `stats`, `dead-letters`, `cleanup` and
/// `partitions list`.
pub const WATCHED_CONNECTION: &str = "outbox-cli connection";

/// One connection for `stats`, `dead-letters`, `cleanup` and `partitions list`: its statements wait
/// at most [`LOCK_WAIT`] for a lock, and are watched from another connection while an answer takes
/// long ([`WatchedClient::answer`]): one stalled after login (a middlebox holding its bytes, a
/// server that stopped answering) hung the command for ever without a word, its server session
/// left behind (black-box run). Should even that fail, the session ends itself once idle for the
/// server's `idle_session_timeout`, asked for at start-up (PostgreSQL 14 and later; not through a
/// pooler; unless the URL's `options` set one).
pub async fn connect_bounded(url: Option<&str>) -> Result<WatchedClient, Failure> {
    let connector = connector(url)
        .await?
        .with_default_application_name(CLI_APPLICATION_NAME)
        .with_default_lock_timeout(LOCK_WAIT)
        .with_idle_session_limit();
    Ok(WatchedClient::connect(&connector, WATCHED_CONNECTION).await?)
}
