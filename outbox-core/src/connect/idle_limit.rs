//! The server's `idle_session_timeout` on the relay's own sessions: the statement that sets it
//! after start-up, and what a connector has learned about asking for it in the start-up itself.
//!
//! The statement leaves a gap: a connection that stalls between its start-up and the statement's
//! answer (a middlebox holding its bytes, both sockets open) leaves a session without the limit,
//! which nothing ends (black-box run). Once one connection of a connector has shown that the
//! server takes the setting (PostgreSQL 14 or later) and that the session answering is the
//! connection's own (no pooler, which would refuse or pass on an unknown start-up option), the
//! connector's later connections ask for it in their start-up (`options`), and so have it from
//! their first byte: the reconnections after an outage, when stalls come, above all.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use super::harden::IDLE_SESSION_TIMEOUT;

/// Not known yet: the next connection goes without the start-up option.
const UNKNOWN: u8 = 0;
/// Known to be taken: connections ask for it at start-up.
const AT_STARTUP: u8 = 1;
/// Known not to apply (an older server, a pooler): nothing is asked for.
const NEVER: u8 = 2;

/// What one connector has learned about `idle_session_timeout` (shared by its clones).
#[derive(Clone, Debug, Default)]
pub(crate) struct IdleLimit(Arc<AtomicU8>);

impl IdleLimit {
    /// A connector's fresh state: nothing known.
    pub(crate) fn new() -> IdleLimit {
        IdleLimit::default()
    }

    /// Adds the setting to `pg`'s start-up `options` once it is known to be taken, unless the
    /// connection string's `options` set it already; whether it was added.
    pub(crate) fn add_to(&self, pg: &mut tokio_postgres::Config) -> bool {
        if self.0.load(Ordering::Relaxed) != AT_STARTUP {
            return false;
        }
        if sets_idle_session_timeout(pg.get_options().unwrap_or_default()) {
            return false;
        }
        let millis = IDLE_SESSION_TIMEOUT.as_millis().to_string();
        super::startup_options::append(pg, "idle_session_timeout", &millis);
        true
    }

    /// A state that asks at once, before any connection has shown that the server takes it
    /// (a refusal is tried again without).
    pub(crate) fn asked_at_once() -> IdleLimit {
        let limit = IdleLimit::new();
        limit.learn(true);
        limit
    }

    /// Records whether a connection's statement set the limit on its own session.
    pub(crate) fn learn(&self, applied: bool) {
        let state = if applied { AT_STARTUP } else { NEVER };
        self.0.store(state, Ordering::Relaxed);
    }

    /// A start-up that asked for it was refused: nothing is known any more (the server behind
    /// the address may have changed).
    pub(crate) fn forget(&self) {
        self.0.store(UNKNOWN, Ordering::Relaxed);
    }
}

/// Whether start-up `options` set `idle_session_timeout`, in any of the spellings PostgreSQL
/// takes (`-c idle_session_timeout=…`, `--idle-session-timeout=…`, any case: black-box run).
pub(crate) fn sets_idle_session_timeout(options: &str) -> bool {
    super::startup_options::sets(options, "idle_session_timeout")
}

/// Sets [`IDLE_SESSION_TIMEOUT`] on `client`'s server session if it is the session of process
/// `pid` (the one its start-up named: not a pooler's) and the server is PostgreSQL 14 or later;
/// whether it did. The one statement both the pool's hook and the relay's own connections use.
pub(crate) async fn limit_idle_session(
    client: &tokio_postgres::Client,
    pid: i32,
) -> Result<bool, tokio_postgres::Error> {
    let millis = IDLE_SESSION_TIMEOUT.as_millis().to_string();
    let statement = outbox_queries::queries::admin::limit_idle_session();
    let applied = statement.bind(client, &millis, &pid).opt().await?;
    Ok(applied.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options_after(limit: &IdleLimit, given: Option<&str>) -> (bool, Option<String>) {
        let mut pg = tokio_postgres::Config::new();
        if let Some(o) = given {
            pg.options(o);
        }
        let added = limit.add_to(&mut pg);
        (added, pg.get_options().map(str::to_owned))
    }

    #[test]
    fn the_option_is_asked_for_only_once_known_to_be_taken() {
        let limit = IdleLimit::new();
        assert_eq!(options_after(&limit, None), (false, None));
        limit.learn(false);
        assert_eq!(options_after(&limit, None), (false, None));
        limit.learn(true);
        assert_eq!(
            options_after(&limit, None),
            (true, Some("-c idle_session_timeout=60000".into()))
        );
        // Clones share what was learned.
        assert!(options_after(&limit.clone(), None).0);
    }

    #[test]
    fn the_connection_strings_options_are_kept_and_its_own_limit_wins() {
        let limit = IdleLimit::new();
        limit.learn(true);
        assert_eq!(
            options_after(&limit, Some("-c search_path=app")),
            (
                true,
                Some("-c search_path=app -c idle_session_timeout=60000".into())
            )
        );
        for own in [
            "-c idle_session_timeout=0",
            "-c IDLE_SESSION_TIMEOUT=20000",
            "--idle-session-timeout=20000",
            "-c search_path=app -c idle-session-timeout=20000",
        ] {
            assert_eq!(options_after(&limit, Some(own)), (false, Some(own.into())));
        }
        assert!(options_after(&IdleLimit::asked_at_once(), None).0);
        limit.forget();
        assert!(!options_after(&limit, None).0, "forgotten");
    }
}
