//! Start-up checks: is this database ready for a relay, and is this role allowed to run one?
//!
//! The queries are catalog lookups that must work on a database without the outbox schema, so they
//! are plain SQL here rather than generated (cornucopia prepares against a migrated schema).

use crate::error::{Error, ErrorKind};
use crate::migrate::{SCHEMA_HISTORY_TABLE, schema_version};

/// The columns the relay updates (a column-level `UPDATE` grant on them is enough).
const UPDATED_COLUMNS: [&str; 5] = [
    "attempts",
    "retry_after",
    "last_error",
    "processed_at",
    "dead_lettered_at",
];

/// What [`check_relay_database`] found, for the start-up log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseReport {
    /// The role connected as.
    pub user: String,
    /// The database connected to.
    pub database: String,
    /// Whether this connection is encrypted (from `pg_stat_ssl`).
    pub tls: bool,
    /// The server's `server_version`.
    pub server_version: String,
    /// The latest applied outbox schema version.
    pub schema_version: i64,
}

/// Checks, on one connection, that a relay can work: the outbox schema is there and at least at the
/// [version](schema_version()) this library expects, and the role has the grants the relay needs
/// (`DELETE` too when `retention` is on). Each failure is one [`ErrorKind::Config`] error saying
/// what to run or grant.
pub async fn check_relay_database(
    client: &tokio_postgres::Client,
    retention: bool,
) -> Result<DatabaseReport, Error> {
    let row = client
        .query_one(
            "SELECT current_user::text, current_database()::text,
                    coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false),
                    current_setting('server_version'),
                    to_regclass('outbox_events') IS NOT NULL,
                    to_regclass($1::text) IS NOT NULL,
                    current_setting('transaction_read_only') = 'on',
                    pg_is_in_recovery()",
            &[&SCHEMA_HISTORY_TABLE],
        )
        .await?;
    let user: String = row.try_get(0)?;
    let database: String = row.try_get(1)?;
    let (read_only, replica): (bool, bool) = (row.try_get(6)?, row.try_get(7)?);
    if read_only {
        // Every claim would fail (SQLSTATE 25006) while the relay reported itself ready
        // (black-box run).
        // On a primary, pointing the relay elsewhere does not help (black-box run: the advice
        // said so for a database set read-only).
        let why = if replica {
            "the server is a replica (in recovery); point the relay at the primary (the \
             cluster's writer endpoint)"
                .to_owned()
        } else {
            format!(
                "default_transaction_read_only is on for this session (set for the role, the \
                 database or the server, or in the URL's options); turn it off for the relay: \
                 `ALTER ROLE {user} SET default_transaction_read_only = off`, or unset it where \
                 it was set"
            )
        };
        return Err(config(format!(
            "database {database} is read-only for role {user}: {why}"
        )));
    }
    let (has_events, has_history): (bool, bool) = (row.try_get(4)?, row.try_get(5)?);
    if !has_events || !has_history {
        return Err(config(format!(
            "the outbox schema is missing in database {database} (no outbox_events or \
             {SCHEMA_HISTORY_TABLE} visible to role {user}): run `outbox migrate` as the schema \
             owner (or grant {user} USAGE on the schema)"
        )));
    }
    let grant = |what: &str| {
        config(format!(
            "role {user} lacks {what}: run `GRANT {what} TO {user};` (see the README, Least privilege)"
        ))
    };
    if !privilege(
        client,
        "has_table_privilege($1::text, 'SELECT'::text)",
        SCHEMA_HISTORY_TABLE,
    )
    .await?
    {
        return Err(grant(&format!("SELECT ON {SCHEMA_HISTORY_TABLE}")));
    }
    let expected = schema_version();
    let history = client
        .query_one(
            &format!(
                "SELECT max(version)::int8,
                        ARRAY(SELECT v::int8 FROM generate_series(1, $1::int8) v
                               WHERE NOT EXISTS (SELECT FROM {SCHEMA_HISTORY_TABLE} h
                                                  WHERE h.version = v)
                               ORDER BY v)
                   FROM {SCHEMA_HISTORY_TABLE}"
            ),
            &[&expected],
        )
        .await?;
    let applied: i64 = history.try_get::<_, Option<i64>>(0)?.unwrap_or(0);
    let missing: Vec<i64> = history.try_get(1)?;
    if applied < expected {
        return Err(config(format!(
            "the outbox schema in database {database} is at version {applied}, this binary needs \
             version {expected}: run `outbox migrate` as the schema owner"
        )));
    }
    if !missing.is_empty() {
        // Checked as a whole: the latest version alone let a relay start on a schema with a hole.
        let missing: Vec<String> = missing.iter().map(i64::to_string).collect();
        return Err(config(format!(
            "the outbox schema in database {database} records version {applied} but not \
             version(s) {} in {SCHEMA_HISTORY_TABLE}: the history was edited by hand; restore the \
             rows of versions that were applied (`outbox migrate` will not apply one out of order)",
            missing.join(", ")
        )));
    }
    if let Some(what) = crate::migrate::unreadable_history(client).await? {
        // The relay needs none of those columns; the next `outbox migrate` refuses them.
        tracing::warn!("{what} (`outbox migrate` refuses them; this relay runs)");
    }
    if applied > expected {
        tracing::warn!(
            schema_version = applied,
            binary_schema_version = expected,
            "the outbox schema in database {database} is at version {applied}, newer than this \
             binary's {expected}: a newer release migrated it; this relay runs (as during a \
             rolling upgrade), but upgrade it"
        );
    }
    if !privilege(
        client,
        "has_table_privilege($1::text, 'SELECT'::text)",
        "outbox_events",
    )
    .await?
    {
        return Err(grant("SELECT ON outbox_events"));
    }
    for column in UPDATED_COLUMNS {
        let sql = format!("has_column_privilege($1::text, '{column}'::text, 'UPDATE'::text)");
        if !privilege(client, &sql, "outbox_events").await? {
            return Err(grant(&format!(
                "UPDATE ({}) ON outbox_events",
                UPDATED_COLUMNS.join(", ")
            )));
        }
    }
    if retention
        && !privilege(
            client,
            "has_table_privilege($1::text, 'DELETE'::text)",
            "outbox_events",
        )
        .await?
    {
        // The reason outside the statement: it must paste into psql as it is.
        return Err(config(format!(
            "role {user} lacks DELETE ON outbox_events, needed by the retention (--retention): run \
             `GRANT DELETE ON outbox_events TO {user};` (see the README, Least privilege)"
        )));
    }
    Ok(DatabaseReport {
        user,
        database,
        tls: row.try_get(2)?,
        server_version: row.try_get(3)?,
        schema_version: applied,
    })
}

/// Checks, for inbox retention ([`run_inbox_retention`](crate::run_inbox_retention)) on this
/// database, that `processed_events` is there and that the role may `SELECT` and `DELETE` it; an
/// [`ErrorKind::Config`] error saying what to grant otherwise (instead of a warning every minute
/// once running).
pub async fn check_inbox_retention_database(client: &tokio_postgres::Client) -> Result<(), Error> {
    check_inbox(
        client,
        "inbox retention",
        "or leave --inbox-retention to the consumer's own database",
        &["SELECT", "DELETE"],
    )
    .await
}

/// Checks, for a consumer's inbox ([`process_once`](crate::process_once),
/// [`was_processed`](crate::was_processed)) in this database, that `processed_events` is there and
/// that the role may `SELECT` and `INSERT` it; an [`ErrorKind::Config`] error saying what to run or
/// grant otherwise. (A consumer started on a database never migrated failed every delivery, and its
/// queue's redrive policy moved the messages to the dead-letter queue one by one.)
pub async fn check_inbox_database(client: &tokio_postgres::Client) -> Result<(), Error> {
    check_inbox(
        client,
        "the consumer's inbox",
        "on the consumer's database",
        &["SELECT", "INSERT"],
    )
    .await
}

/// `processed_events` visible to the role, with the `rights` `who` needs; `where_` ends the
/// migrate advice.
async fn check_inbox(
    client: &tokio_postgres::Client,
    who: &str,
    where_: &str,
    rights: &[&str],
) -> Result<(), Error> {
    let row = client
        .query_one(
            "SELECT current_user::text, to_regclass('processed_events') IS NOT NULL",
            &[],
        )
        .await?;
    let (user, exists): (String, bool) = (row.try_get(0)?, row.try_get(1)?);
    if !exists {
        return Err(config(format!(
            "{who}: no processed_events table visible to role {user} in this database \
             (run `outbox migrate` {where_})"
        )));
    }
    for what in rights {
        let check = format!("has_table_privilege($1::text, '{what}'::text)");
        if !privilege(client, &check, "processed_events").await? {
            let all = rights.join(", ");
            return Err(config(format!(
                "role {user} lacks {all} ON processed_events (needed by {who}): \
                 run `GRANT {all} ON processed_events TO {user};`"
            )));
        }
    }
    Ok(())
}

/// How long [`check_listen_connection`] waits for its notification.
const LISTEN_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Checks that a separate LISTEN connection (`listen`, e.g. `--listen-url` past a pooler) hears
/// what is notified through `notify_via` (a connection of the relay's pool): a notification sent on
/// a fresh channel must arrive within 2 s. NOTIFY is per database, so a LISTEN URL naming another
/// database or server would otherwise leave the relay polling without a word. An
/// [`ErrorKind::Config`] error when it does not arrive.
pub async fn check_listen_connection(
    notify_via: &tokio_postgres::Client,
    listen: &crate::connect::PgConnector,
) -> Result<(), Error> {
    use futures::StreamExt;
    let (client, mut connection) = listen.connect().await?;
    let channel = format!("outbox_listen_check_{}", uuid::Uuid::new_v4().simple());
    // Drive the connection here (a plain spawn would drop notifications) and pass them on.
    let (heard_tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let tokio_postgres::AsyncMessage::Notification(n) = message {
                let _ = heard_tx.send(n.channel().to_owned());
            }
        }
    });
    let listening = std::sync::atomic::AtomicBool::new(false);
    let check = async {
        // The channel is ours (letters, digits, underscores): no quoting needed.
        client.batch_execute(&format!("LISTEN {channel}")).await?;
        listening.store(true, std::sync::atomic::Ordering::Relaxed);
        notify_via
            .execute("SELECT pg_notify($1::text, 'check')", &[&channel])
            .await?;
        while let Some(c) = heard.recv().await {
            if c == channel {
                return Ok(true);
            }
        }
        Ok::<bool, Error>(false)
    };
    let result = tokio::time::timeout(LISTEN_CHECK_TIMEOUT, check).await;
    driver.abort();
    match result {
        Ok(Ok(true)) => Ok(()),
        Ok(Err(e)) => Err(e),
        // Not even its LISTEN answered: a stall, not a wrong address (black-box run: it said the
        // URL pointed elsewhere).
        Err(_) if !listening.load(std::sync::atomic::Ordering::Relaxed) => Err(Error::new(
            ErrorKind::Database,
            format!(
                "the LISTEN connection ({}) did not answer its LISTEN within \
                 {LISTEN_CHECK_TIMEOUT:?} of login: the connection stalled (a proxy or middlebox \
                 holding it?) or the server is overloaded",
                listen.target()
            ),
        )),
        Ok(Ok(false)) | Err(_) => Err(config(format!(
            "the LISTEN connection ({}) does not hear notifications sent through the relay's \
             database connection within {LISTEN_CHECK_TIMEOUT:?}: it points at another database \
             or server, so wake-ups would never arrive (fix --listen-url, or use --no-listen)",
            listen.target()
        ))),
    }
}

async fn privilege(
    client: &tokio_postgres::Client,
    check: &str,
    table: &str,
) -> Result<bool, Error> {
    let sql = format!("SELECT {check}");
    Ok(client.query_one(&sql, &[&table]).await?.try_get(0)?)
}

fn config(message: String) -> Error {
    Error::new(ErrorKind::Config, message)
}
