//! One place that opens connections: the TLS connector, the per-connection password, clear errors.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::attempts::{AttemptError, connect_each};
use super::connect_config::ConnectConfig;
use super::creation_gate::CreationGate;
use super::describe::{PasswordSource, describe};
use super::idle_limit::IdleLimit;
use super::password::{BoxError, DynPasswordProvider, PasswordProvider};
use super::pool_connect::PoolConnect;
use super::startup_options::{self, Refused};
use super::tls::Tls;
use super::tls_source::TlsSource;
use crate::error::{Error, ErrorKind};

/// How long a password provider may take for one new connection (at least; a longer
/// `connect_timeout` gives it that).
const PASSWORD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The connection [`PgConnector::connect`] returns: drive it (await it, or poll its messages).
pub type PgConnection =
    tokio_postgres::Connection<Socket, <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream>;

/// Opens connections to one database with one TLS setting (and optionally a fresh password for each
/// connection): the pool ([`PgConnector::pool`]), the relay's LISTEN connection
/// ([`RelayBuilder::listen_with`](crate::RelayBuilder::listen_with)) and one-off connections all
/// go through it, so they all get the same TLS.
///
/// ```no_run
/// # async fn run() -> Result<(), outbox_core::Error> {
/// let db = outbox_core::PgConnector::from_url(
///     "postgres://app@db.example.com/app?sslmode=verify-full&sslrootcert=/etc/rds-global-bundle.pem",
/// )?;
/// let pool = db.pool(8)?;
/// # let _ = pool; Ok(()) }
/// ```
#[derive(Clone)]
pub struct PgConnector {
    pub(super) pg: tokio_postgres::Config,
    tls: Tls,
    make_tls: Arc<TlsSource>,
    password: Option<Arc<dyn DynPasswordProvider>>,
    /// Where the password comes from, for the error when the server refuses it.
    password_source: PasswordSource,
    /// For the relay's own connections: whether to ask for `idle_session_timeout` at start-up.
    pub(super) idle_limit: Option<IdleLimit>,
    /// For a relay's pool: new connections one at a time while they stall.
    pub(super) creation_gate: Option<CreationGate>,
    /// A `lock_timeout` added to the start-up options ([`with_default_lock_timeout`]).
    ///
    /// [`with_default_lock_timeout`]: Self::with_default_lock_timeout
    pub(super) lock_timeout: Option<std::time::Duration>,
    /// Whether the options this connector adds were refused once (PgBouncer refuses any).
    pub(super) options_refused: Refused,
}

impl fmt::Debug for PgConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConnector")
            .field("pg", &self.pg)
            .field("tls", &self.tls)
            .field("password_provider", &self.password.is_some())
            .finish()
    }
}

impl PgConnector {
    /// A connector for `config`; fails when the TLS settings cannot be met (e.g. an unreadable
    /// `sslrootcert`).
    pub fn new(config: ConnectConfig) -> Result<PgConnector, Error> {
        let make_tls = Arc::new(TlsSource::new(config.tls.clone())?);
        Ok(PgConnector {
            pg: config.pg,
            tls: config.tls,
            make_tls,
            password: None,
            password_source: PasswordSource::Url,
            idle_limit: None,
            creation_gate: None,
            lock_timeout: None,
            options_refused: Refused::default(),
        })
    }

    /// A connector for a connection string (URL or `key=value`), see [`ConnectConfig`].
    pub fn from_url(url: &str) -> Result<PgConnector, Error> {
        PgConnector::new(url.parse()?)
    }

    /// Takes the password of every new connection from `provider` (the connection string's
    /// password, if any, is then ignored).
    pub fn password_provider(mut self, provider: impl PasswordProvider) -> PgConnector {
        self.password = Some(Arc::new(provider));
        self.password_source = PasswordSource::Provider;
        self
    }

    /// Authenticates every new connection with a fresh RDS IAM auth token for this connector's host,
    /// port and user, signed with the default AWS credential chain and region (see
    /// [`RdsIamTokenProvider`](super::RdsIamTokenProvider)). Refuses `sslmode` below `require`: RDS
    /// rejects IAM auth in plaintext, and a token sent in clear is a credential for 15 minutes.
    /// Fails, before any token is made or anything contacted, on settings RDS IAM auth
    /// conflicts with ([`rds_iam_conflict`](Self::rds_iam_conflict)).
    #[cfg(feature = "rds-iam")]
    pub async fn with_rds_iam(self) -> Result<PgConnector, Error> {
        if let Some(conflict) = self.rds_iam_conflict() {
            return Err(Error::config(conflict));
        }
        let provider = super::RdsIamTokenProvider::from_env(&self.pg)
            .await
            .map_err(|e| Error::config(e.to_string()).with_source(e))?;
        let mut connector = self.password_provider(provider);
        connector.password_source = PasswordSource::RdsIam;
        Ok(connector)
    }

    /// Why RDS IAM auth cannot be used with these settings, or `None`: `sslmode` below `require`
    /// (RDS rejects IAM auth in plaintext, and a token sent in clear is a credential for 15
    /// minutes), several hosts, a socket, or no user (a token is signed for one host and user), or
    /// a password in the connection string (the token replaces it).
    /// Settings in conflict, found without contacting anything; a failure to get credentials or a
    /// region is not one of them.
    #[cfg(feature = "rds-iam")]
    pub fn rds_iam_conflict(&self) -> Option<String> {
        if self.tls.mode < super::SslMode::Require {
            return Some(format!(
                "RDS IAM auth needs TLS, but sslmode is {}: RDS refuses IAM auth over plaintext and \
                 a token sent in clear is a credential for 15 minutes; use sslmode=verify-full with \
                 sslrootcert=<RDS CA bundle>",
                self.tls.mode
            ));
        }
        super::rds_iam::url_refusal(&self.pg).map(str::to_owned)
    }

    /// The tokio-postgres settings (host, user, ...).
    pub fn pg_config(&self) -> &tokio_postgres::Config {
        &self.pg
    }

    /// The TLS settings.
    pub fn tls(&self) -> &Tls {
        &self.tls
    }

    /// The rustls `MakeTlsConnect` these settings give, for code that connects by itself (with the
    /// `sslrootcert` file as it is now: it is read again when it changed).
    pub fn make_tls_connect(&self) -> MakeRustlsConnect {
        self.make_tls.connector()
    }

    /// `host:port` (or the list of them), for messages.
    pub fn target(&self) -> String {
        let ports = self.pg.get_ports();
        self.pg
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let host = match h {
                    // Never anything before an `@` (a password's end, were one to get here).
                    tokio_postgres::config::Host::Tcp(h) => h
                        .rsplit_once('@')
                        .map_or(h.as_str(), |(_, host)| host)
                        .to_owned(),
                    tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
                };
                let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
                format!("{host}:{port}")
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Opens one connection. The error names the host and says what failed (unreachable, password,
    /// TLS required, certificate not trusted or not valid for the host, ...). Certificate and
    /// host-name failures are [`ErrorKind::Config`] (retrying unchanged cannot help); password and
    /// password-provider failures stay retryable (a secret may be mid-rotation).
    pub async fn connect(&self) -> Result<(Client, PgConnection), Error> {
        self.raw_connect().await.map_err(|e| match e {
            RawError::Password(e) => Error::new(
                ErrorKind::Database,
                format!(
                    "cannot connect to PostgreSQL at {}: no password for the new connection",
                    self.target()
                ),
            )
            .with_source(e),
            RawError::Pg(e) => describe(&e, &self.target(), self.tls.mode, self.password_source),
            RawError::Timeout(limit) => Error::new(
                ErrorKind::Database,
                format!(
                    "cannot connect to PostgreSQL at {} (sslmode={}): no answer within {limit:?} \
                     (TCP connect, TLS handshake and login; connect_timeout per host and address)",
                    self.target(),
                    self.tls.mode
                ),
            ),
        })
    }

    /// Opens one connection and drives it on a task. With a
    /// [default lock timeout](Self::with_default_lock_timeout), checks that the server applied it
    /// (one round trip), warning when it did not (a pooler that drops start-up options); no
    /// answer within the connect timeout is an [`ErrorKind::Timeout`] error.
    pub async fn connect_spawned(&self) -> Result<Client, Error> {
        self.connect_driven(None).await
    }

    /// [`connect_spawned`](Self::connect_spawned), counting each wake-up of the connection's task
    /// in `activity` when given (bytes arriving or leaving: a connection receiving an answer over
    /// a slow link is woken as they arrive, a stalled one never).
    pub(super) async fn connect_driven(
        &self,
        activity: Option<Arc<AtomicU64>>,
    ) -> Result<Client, Error> {
        let (client, connection) = self.connect().await?;
        let mut connection = Box::pin(connection);
        tokio::spawn(async move {
            let driven = std::future::poll_fn(|cx| {
                if let Some(activity) = &activity {
                    activity.fetch_add(1, Ordering::SeqCst);
                }
                connection.as_mut().poll(cx)
            });
            if let Err(e) = driven.await {
                super::pool_connect::connection_ended(&e);
            }
        });
        self.check_lock_timeout_applied(&client).await?;
        Ok(client)
    }

    /// A deadpool pool of at most `max_size` connections, each opened by this connector (same TLS,
    /// fresh password per new connection).
    pub fn pool(&self, max_size: usize) -> Result<Pool, Error> {
        Pool::builder(self.manager(ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        }))
        .max_size(max_size)
        .build()
        .map_err(|e| Error::config("cannot build the connection pool").with_source(e))
    }

    /// The same connector with the settings a relay's connections need
    /// ([`connect::harden`](crate::connect::harden)): TCP keepalives and a TCP user timeout
    /// sized to `publish_timeout`, so a dead network path fails in seconds, not hours.
    pub fn hardened(mut self, publish_timeout: std::time::Duration) -> PgConnector {
        crate::connect::harden(&mut self.pg, publish_timeout);
        self
    }

    /// Like [`pool`](Self::pool), its connections named
    /// [`RELAY_APPLICATION_NAME`](crate::RELAY_APPLICATION_NAME) unless the connection string
    /// names them, with the relay's pool time-outs
    /// ([`connect::pool_timeouts`](crate::connect::pool_timeouts)): waiting for a connection
    /// at most `publish_timeout`, recycling one within seconds; their server sessions end
    /// themselves after a minute idle
    /// ([`connect::end_idle_sessions`](crate::connect::end_idle_sessions); asked for at start-up
    /// once the first connection has shown that the server takes it; unless the connection
    /// string's `options` set `idle_session_timeout`). Creating one is bounded by this
    /// connector itself — `connect_timeout` for each host and address it tries — not by the pool,
    /// so that the pool too reaches the next host of a multi-host URL when the first does not
    /// answer.
    pub fn relay_pool(
        &self,
        max_size: usize,
        publish_timeout: std::time::Duration,
    ) -> Result<Pool, Error> {
        // Named (unless the connection string names them): an operator counting who holds the
        // server's connections saw the relays' pools unnamed (black-box run).
        let mut named = self
            .clone()
            .with_default_application_name(crate::relay::RELAY_APPLICATION_NAME)
            .limiting_idle_sessions();
        let gate = CreationGate::new();
        named.creation_gate = Some(gate.clone());
        let learned = named.idle_limit.clone();
        let builder = Pool::builder(named.manager(ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        }))
        .max_size(max_size);
        // No statement when the connection string sets the limit itself.
        let set = learned.is_some();
        let builder = crate::connect::end_idle_sessions_learning(builder, set, learned, Some(gate));
        crate::connect::pool_timeouts(builder, publish_timeout)
            .create_timeout(None)
            .build()
            .map_err(|e| Error::config("cannot build the connection pool").with_source(e))
    }

    /// A deadpool manager opening connections through this connector, for a pool built by hand
    /// (other recycling, time-outs, hooks): `Pool::builder(connector.manager(config))`.
    pub fn manager(&self, config: ManagerConfig) -> Manager {
        Manager::from_connect(self.pg.clone(), PoolConnect(self.clone()), config)
    }

    /// How long one attempt of opening a connection may take: one address of one host, TCP
    /// connect, TLS handshake, login and the `target_session_attrs` check (`connect_timeout`, as
    /// libpq applies it to each host and address). tokio-postgres' own `connect_timeout` bounds
    /// only the TCP connect, so a server that accepts and then never answers would otherwise hang
    /// the caller for ever, or use up the time of the hosts after it.
    pub(super) fn attempt_timeout(&self) -> std::time::Duration {
        self.pg
            .get_connect_timeout()
            .copied()
            .unwrap_or(super::CONNECT_TIMEOUT)
    }

    pub(super) async fn raw_connect(&self) -> Result<(Client, PgConnection), RawError> {
        let per_attempt = self.attempt_timeout();
        let mut pg = self.pg.clone();
        if let Some(provider) = &self.password {
            // Its own time (a credential chain can be slower than one connect attempt).
            let limit = per_attempt.max(PASSWORD_TIMEOUT);
            let password = tokio::time::timeout(limit, provider.password())
                .await
                .map_err(|_| RawError::Password(format!("no password within {limit:?}").into()))?
                .map_err(RawError::Password)?;
            pg.password(password.expose());
        }
        // A refusal drops what it was about (the idle limit a server before 14 does not know), or
        // every option added: at most three attempts.
        let connected = loop {
            let mut added = pg.clone();
            let adding = self.add_options(&mut added);
            let with = if adding { &added } else { &pg };
            match connect_each(with, self.make_tls.connector(), per_attempt).await {
                Err(AttemptError::Pg(e)) if adding && startup_options::refused_for_options(&e) => {
                    if !self.idle_limit_unknown(&e) {
                        self.options_refused(&e);
                    }
                }
                other => break other,
            }
        };
        connected.map_err(|e| match e {
            AttemptError::Pg(e) => RawError::Pg(e),
            AttemptError::Timeout(limit) => RawError::Timeout(limit),
        })
    }

    /// The gate of a [`relay_pool`](Self::relay_pool)'s new connections.
    pub(super) fn creation_gate(&self) -> Option<&CreationGate> {
        self.creation_gate.as_ref()
    }
}

pub(super) enum RawError {
    Password(BoxError),
    Pg(tokio_postgres::Error),
    Timeout(std::time::Duration),
}
