//! The settings a connector adds to the start-up `options` of its connections (a default
//! `lock_timeout`, `idle_session_timeout`), and what it does when they are refused.
//!
//! PgBouncer refuses any start-up `options` ("unsupported startup parameter: options", unless
//! its `ignore_startup_parameters` lists it), and a server before 14 refuses
//! `idle_session_timeout`. The CLI's commands added a `lock_timeout` and failed through PgBouncer
//! (black-box run). A start-up refused for what was added is made again without it, and the
//! connector adds nothing more.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Appends `-c name=value` to `pg`'s start-up `options`, after the connection string's own.
pub(crate) fn append(pg: &mut tokio_postgres::Config, name: &str, value: &str) {
    let set = format!("-c {name}={value}");
    let options = match pg.get_options() {
        Some(given) if !given.is_empty() => format!("{given} {set}"),
        _ => set,
    };
    pg.options(&options);
}

/// Whether start-up `options` set `name` (a setting's name with underscores), in any of the
/// spellings PostgreSQL takes (`-c name=…`, `--name=…`, dashes for underscores, any case).
pub(crate) fn sets(options: &str, name: &str) -> bool {
    options
        .to_ascii_lowercase()
        .replace('-', "_")
        .contains(name)
}

/// Whether the refusal `e` of a start-up may be for the options it carried: not when it is plainly
/// about something else (authentication, the database's name, connection slots, a server shutting
/// down or starting: classes 28, 3D, 53 and 57), and not without the server's answer (the network,
/// TLS, a time-out). Poolers and older servers do not all say so with the same code.
pub(crate) fn refused_for_options(e: &tokio_postgres::Error) -> bool {
    let Some(db) = e.as_db_error() else {
        return false;
    };
    let class = db.code().code().get(..2).unwrap_or_default();
    !["28", "3D", "53", "57"].contains(&class)
}

/// Whether a connector's added options were refused once (shared by its clones): its later
/// connections go without them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Refused(Arc<AtomicBool>);

impl Refused {
    /// Whether they were.
    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// They were.
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_appended_after_the_connection_strings_own() {
        let mut pg = tokio_postgres::Config::new();
        append(&mut pg, "lock_timeout", "5000");
        assert_eq!(pg.get_options(), Some("-c lock_timeout=5000"));
        append(&mut pg, "idle_session_timeout", "60000");
        assert_eq!(
            pg.get_options(),
            Some("-c lock_timeout=5000 -c idle_session_timeout=60000")
        );
    }

    #[test]
    fn every_spelling_of_a_setting_is_recognised() {
        for given in [
            "-c lock_timeout=1",
            "-c LOCK_TIMEOUT=1",
            "--lock-timeout=1",
            "-c search_path=app -c lock-timeout=1",
        ] {
            assert!(sets(given, "lock_timeout"), "{given}");
        }
        assert!(!sets("-c statement_timeout=1", "lock_timeout"));
    }

    /// A start-up refused for an option (as a server before 14 refuses an unknown setting) is
    /// told from one refused for another reason (a role that does not exist).
    #[tokio::test]
    async fn a_refusal_for_the_options_is_told_from_other_refusals() {
        let refusal = |options: &'static str, user: &'static str| async move {
            let mut pg = tokio_postgres::Config::new();
            pg.host("127.0.0.1")
                .port(5432)
                .user(user)
                .dbname("postgres");
            pg.options(options);
            match pg.connect(tokio_postgres::NoTls).await {
                Ok(_) => panic!("{user} with {options:?} connected"),
                Err(e) if e.as_db_error().is_none() => panic!(
                    "PostgreSQL at 127.0.0.1:5432 did not answer ({e}); start it: \
                     bash scripts/services.sh"
                ),
                Err(e) => e,
            }
        };
        let other = refusal("", "no_such_role_for_startup_options").await;
        assert!(!refused_for_options(&other), "{other}");
        let unknown = refusal("-c no_such_setting=1", "postgres").await;
        assert!(refused_for_options(&unknown), "{unknown}");
    }
}
