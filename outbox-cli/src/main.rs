//! `outbox`: operate a transactional outbox on PostgreSQL. Run `outbox --help`.

mod cleanup;
mod cli;
mod db;
mod dead_letters;
mod duration;
mod help;
mod log_writer;
mod logging;
mod metrics_server;
mod migrate;
mod output;
mod partitions;
mod relay;
mod schema_behind;
mod stats;
mod stray_variables;
mod usage;

use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::usage::usage;

/// An error to print and exit with: 1, or 2 for a [`usage::Usage`] error.
type Failure = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let cli = match Cli::parse_args() {
        Ok(cli) => cli,
        Err(e) => return usage::parse_error(e),
    };
    logging::init(cli.log_format);
    let format = cli.log_format;
    let command = cli.command_path.clone();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => usage::report(&*e, hint(&*e, &command), format, &command),
    }
}

/// What to do about an error an operator can fix: a table or function of the outbox schema that
/// does not exist (a database never migrated, or migrated by an older `outbox`), or a privilege
/// the role lacks (`command` says which: migrations need the owner, the rest grants).
fn hint(e: &(dyn std::error::Error + 'static), command: &str) -> Option<&'static str> {
    use tokio_postgres::error::SqlState;
    // Migrating: `outbox migrate`, or `relay --migrate` (whose refusal got the grants hint).
    let mut chain = Some(e);
    let mut migrating = command == "migrate";
    while let Some(s) = chain {
        migrating |= s
            .downcast_ref::<outbox_core::Error>()
            .is_some_and(|e| e.kind() == outbox_core::ErrorKind::Migration);
        chain = s.source();
    }
    let mut source = Some(e);
    while let Some(s) = source {
        let db = s
            .downcast_ref::<tokio_postgres::Error>()
            .and_then(|pg| pg.as_db_error());
        if db.is_some_and(|d| *d.code() == SqlState::INSUFFICIENT_PRIVILEGE) {
            return Some(if migrating {
                "migrating creates and alters the outbox's tables: run `outbox migrate` as their \
                 owner (the role that migrated first) or a superuser"
            } else {
                "this role lacks a privilege on the outbox's tables: grant what the README's \
                 \"Least privilege\" section lists, or run it as the tables' owner"
            });
        }
        if db.is_some_and(|d| *d.code() == SqlState::READ_ONLY_SQL_TRANSACTION) {
            return Some(
                "the database session is read-only (a standby or read replica, or \
                 default_transaction_read_only on for this role or database): point the URL at \
                 the primary, as a role that may write",
            );
        }
        // A statement cut short by a time limit the role, the database or the URL's `options`
        // set (black-box run: `statement_timeout` at 1 ms read as a bare SQLSTATE 57014).
        if db.is_some_and(|d| *d.code() == SqlState::QUERY_CANCELED) {
            return Some(
                "a statement was cancelled: a statement_timeout set for this \
                 role or database, or in the URL's options, is too short for the outbox's \
                 statements; raise it or leave it unset for the role that runs `outbox`",
            );
        }
        if db.is_some_and(|d| *d.code() == SqlState::LOCK_NOT_AVAILABLE) {
            return Some(
                "another session holds a lock on the outbox's tables (most often a transaction \
                 left open, `idle in transaction`; or LOCK TABLE, ALTER TABLE, VACUUM FULL, a \
                 migration): pg_stat_activity and pg_locks show which; run the command again once \
                 it has ended (or give it longer: `options=-c lock_timeout=…` in the URL)",
            );
        }
        if schema_behind::missing_outbox_object(s) {
            return Some(
                "the outbox schema is missing from this database, or older than this `outbox`: \
                 run `outbox migrate` (as the schema owner)",
            );
        }
        source = s.source();
    }
    None
}

async fn run(cli: Cli) -> Result<(), Failure> {
    db::init(db::DbOptions {
        rds_iam: cli.rds_iam,
        url_name: cli.database_url_source,
    });
    let url = cli.database_url.as_deref();
    let migrating = matches!(cli.command, Command::Migrate(_));
    let result = match cli.command {
        Command::Migrate(args) => migrate::run(url, args).await,
        Command::Partitions(cmd) => partitions::run(url, cmd).await,
        Command::Relay(args) => relay::run(url, args).await,
        Command::Stats { json } => stats::run(url, json).await,
        Command::DeadLetters(cmd) => dead_letters::run(url, cmd).await,
        Command::Cleanup {
            older_than,
            inbox_older_than,
        } => cleanup::run(url, older_than, inbox_older_than).await,
    };
    match result {
        // Older than this binary: said so, with the versions.
        Err(e) if !migrating && schema_behind::missing_outbox_object(&*e) => {
            // Bounded: a connection that stalls after login must not hang a command that failed.
            let behind = tokio::time::timeout(
                schema_behind::ASKS_WITHIN,
                schema_behind::schema_behind(url),
            );
            Err(behind.await.ok().flatten().unwrap_or(e))
        }
        result => result,
    }
}
