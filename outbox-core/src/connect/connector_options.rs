//! What a [`PgConnector`] adds to the connections it opens: a default `application_name`, a
//! default `lock_timeout`, the server's `idle_session_timeout` for a relay's own connections; and
//! what it does when a server (a pooler) refuses the start-up options they go in.

use super::connector::PgConnector;
use super::idle_limit::IdleLimit;
use super::startup_options;

impl PgConnector {
    /// Adds this connector's own settings to `pg`'s start-up options, unless they were refused
    /// before; whether it added any.
    pub(super) fn add_options(&self, pg: &mut tokio_postgres::Config) -> bool {
        if self.options_refused.get() {
            return false;
        }
        let mut added = false;
        if let Some(limit) = self.lock_timeout {
            let millis = limit.as_millis().max(1).to_string();
            startup_options::append(pg, "lock_timeout", &millis);
            added = true;
        }
        if let Some(idle) = &self.idle_limit {
            added |= idle.add_to(pg);
        }
        added
    }

    /// Whether a start-up was refused (`e`) for the `idle_session_timeout` it asked for, a setting
    /// the server does not know (PostgreSQL before 14: `unrecognized configuration parameter`): its
    /// connections then go without it, keeping the rest (a command's lock bound).
    pub(super) fn idle_limit_unknown(&self, e: &tokio_postgres::Error) -> bool {
        let Some(idle) = &self.idle_limit else {
            return false;
        };
        let unknown = e.as_db_error().is_some_and(|db| {
            *db.code() == tokio_postgres::error::SqlState::UNDEFINED_OBJECT
                && db.message().contains("idle_session_timeout")
        });
        if unknown {
            idle.learn(false);
            tracing::debug!(error = %crate::error_chain(e),
                "the server does not know idle_session_timeout (before PostgreSQL 14); connecting without it");
        }
        unknown
    }

    /// A start-up carrying this connector's own settings was refused (`e`): its connections go
    /// without them from now on.
    pub(super) fn options_refused(&self, e: &tokio_postgres::Error) {
        self.options_refused.set();
        if let Some(idle) = &self.idle_limit {
            idle.forget();
        }
        if let Some(limit) = self.lock_timeout {
            // Once per connector: a command connects once.
            tracing::warn!(error = %crate::error_chain(e),
                "the server (a pooler, such as PgBouncer?) refused start-up options: connecting without them, so statements here wait for locks without the {} ms bound; set lock_timeout for the role instead (ALTER ROLE … SET lock_timeout = …)",
                limit.as_millis());
        } else {
            tracing::debug!(error = %crate::error_chain(e),
                "the server refused idle_session_timeout at start-up; connecting without it");
        }
    }

    /// The same connector asking for `idle_session_timeout` at start-up once one of its
    /// connections has shown that the server takes it (see `idle_limit.rs`): for the relay's own
    /// connections, whose clones share what is learned.
    /// Not when the connection string's `options` set `idle_session_timeout`: theirs stands.
    pub(crate) fn limiting_idle_sessions(mut self) -> PgConnector {
        if !self.sets_idle_limit_itself() {
            self.idle_limit = Some(IdleLimit::new());
        }
        self
    }

    /// Whether the connection string's `options` set `idle_session_timeout`.
    pub(crate) fn sets_idle_limit_itself(&self) -> bool {
        self.pg
            .get_options()
            .is_some_and(super::idle_limit::sets_idle_session_timeout)
    }

    /// The same connector asking, in the start-up of each connection, for the server to end the
    /// session once it has waited [`IDLE_SESSION_TIMEOUT`](crate::connect::IDLE_SESSION_TIMEOUT)
    /// for a statement outside a transaction, unless the connection string's `options` set
    /// `idle_session_timeout`. A start-up refused for it (PostgreSQL before 14, a pooler that
    /// takes no start-up options, as PgBouncer) is made again without it, and the connector asks
    /// no more. For a relay's one-off connections, its start-up checks say: should one stall
    /// right after login (a middlebox holding its bytes), its session does not stay for good.
    /// (The relay's pool and its own connections ask once a first connection has shown that the
    /// server takes it, and never through a pooler.)
    pub fn with_idle_session_limit(mut self) -> PgConnector {
        if !self.sets_idle_limit_itself() {
            self.idle_limit = Some(IdleLimit::asked_at_once());
        }
        self
    }

    /// Records whether a connection of this connector had `idle_session_timeout` set on its
    /// session (for one [`limiting_idle_sessions`](Self::limiting_idle_sessions)).
    pub(crate) fn learn_idle_limit(&self, applied: bool) {
        if let Some(limit) = &self.idle_limit {
            limit.learn(applied);
        }
    }

    /// The same connector with the server's `lock_timeout` set to `limit` for its sessions (an
    /// `options` start-up setting, added as each connection is opened), unless the connection
    /// string's `options` set one: a statement waiting longer for a lock fails (SQLSTATE 55P03)
    /// instead of waiting as long as another session holds it. For commands an operator waits
    /// for. A server that refuses start-up options (PgBouncer) is connected to without it, with a
    /// warning.
    pub fn with_default_lock_timeout(mut self, limit: std::time::Duration) -> PgConnector {
        let given = self.pg.get_options().unwrap_or_default();
        if !startup_options::sets(given, "lock_timeout") {
            self.lock_timeout = Some(limit);
        }
        self
    }

    /// The same connector with `application_name` set, unless the connection string sets one.
    pub fn with_default_application_name(mut self, name: &str) -> PgConnector {
        // A name given in `options` (`-c application_name=…`) would lose to the start-up packet's
        // (review).
        let in_options = self
            .pg
            .get_options()
            .is_some_and(|o| o.contains("application_name"));
        if self.pg.get_application_name().is_none() && !in_options {
            self.pg.application_name(name);
        }
        self
    }

    /// After a start-up that carried this connector's `lock_timeout` (on `client`, its
    /// connection driven): whether the server applied it. A pooler told to ignore start-up
    /// options (PgBouncer's `ignore_startup_parameters = options`) drops them without a word
    /// (black-box run: the commands' lock bound was gone, silently). Not applied: a warning, and
    /// the connector adds no more options. A value the role sets itself counts as applied.
    /// No answer within the connect timeout is an [`ErrorKind::Timeout`](crate::ErrorKind) error:
    /// the connection stalled right after login (black-box run: a command then waited that long
    /// in silence before its own first statement was given up).
    pub(super) async fn check_lock_timeout_applied(
        &self,
        client: &tokio_postgres::Client,
    ) -> Result<(), crate::Error> {
        let Some(limit) = self.lock_timeout else {
            return Ok(());
        };
        if self.options_refused.get() {
            return Ok(());
        }
        // Not prepared: a pooler in transaction mode may not keep prepared statements.
        let shown = client.simple_query("SHOW lock_timeout");
        let value = match tokio::time::timeout(self.attempt_timeout(), shown).await {
            Ok(Ok(messages)) => messages.into_iter().find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                _ => None,
            }),
            // The command's own statements will meet whatever this met.
            Ok(Err(_)) => return Ok(()),
            Err(_) => {
                return Err(super::stalled_after_login(
                    &self.target(),
                    self.attempt_timeout(),
                ));
            }
        };
        if value.as_deref() == Some("0") {
            self.options_refused.set();
            tracing::warn!(
                "the server did not apply the start-up options (a pooler ignoring them, such as PgBouncer with ignore_startup_parameters = options?): statements here wait for locks without the {} ms bound; set lock_timeout for the role instead (ALTER ROLE … SET lock_timeout = …)",
                limit.as_millis()
            );
        }
        Ok(())
    }
}
