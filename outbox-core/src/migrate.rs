//! The outbox schema, applied by the library itself.

use outbox_queries::queries::migrate;

use outbox_queries::queries::partition as partition_sql;

use crate::error::{Error, ErrorKind};
use crate::partition::Granularity;

/// The advisory lock key that serialises concurrent migrations ("outbox" in ASCII).
const SCHEMA_LOCK_KEY: i64 = 0x6f75_7462_6f78;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// The table in which applied schema versions are recorded (kept apart from an application's own
/// refinery history table).
pub const SCHEMA_HISTORY_TABLE: &str = "outbox_schema_history";

/// The schema version this library expects: the latest migration it embeds. A database whose
/// [`SCHEMA_HISTORY_TABLE`] records less needs [`migrate()`].
pub fn schema_version() -> i64 {
    embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| i64::from(m.version()))
        .max()
        .unwrap_or(0)
}

/// What [`migrate()`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// The migrations applied by this call, as `V{version}__{name}`; empty when the schema was
    /// already up to date. ([`migrate_partitioned`] adds a line saying what the conversion did.)
    pub applied: Vec<String>,
}

/// Applies the outbox schema (`outbox_events`, its indexes, the `outbox_dead_letters` view, the
/// NOTIFY trigger and the consumer inbox table) to the database `client` is connected to.
///
/// Idempotent: versions already applied (recorded in [`SCHEMA_HISTORY_TABLE`]) are skipped, so a
/// second call changes nothing. Each migration runs in its own transaction. The session holds an
/// advisory lock meanwhile (and, on a database in a one-byte encoding other than UTF8, the client
/// encoding `SQL_ASCII`), released when it returns: a call cut short (its future dropped) leaves
/// them on the connection, so close it rather than give it back to a pool.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let (mut client, connection) =
///     tokio_postgres::connect("host=127.0.0.1 user=postgres", tokio_postgres::NoTls).await?;
/// tokio::spawn(connection);
/// let report = outbox_core::migrate(&mut client).await?;
/// println!("applied {:?}", report.applied);
/// # Ok(()) }
/// ```
pub async fn migrate(client: &mut tokio_postgres::Client) -> Result<MigrationReport, Error> {
    // Several relays may start at once: one migrates, the others wait and then find nothing to do.
    with_schema_lock(client, async |client| run_migrations(client).await).await
}

/// Runs `work` holding the schema's advisory lock ([`SCHEMA_LOCK_KEY`], session level), which
/// serialises every migration, and with the client encoding the schema's SQL needs
/// ([`bytes_as_they_come`]). The lock is released and the encoding reset whether `work` succeeds
/// or fails; `work`'s error wins over the clean-up's.
async fn with_schema_lock<T>(
    client: &mut tokio_postgres::Client,
    work: impl AsyncFnOnce(&mut tokio_postgres::Client) -> Result<T, Error>,
) -> Result<T, Error> {
    let bytes = bytes_as_they_come(client).await?;
    migrate::lock_schema()
        .bind(client, &SCHEMA_LOCK_KEY)
        .one()
        .await?;
    let result = async {
        if bytes {
            migrate::set_client_encoding_bytes().bind(client).await?;
        }
        work(client).await
    }
    .await;
    let reset = match bytes {
        true => migrate::reset_client_encoding()
            .bind(client)
            .await
            .map(|_| ()),
        false => Ok(()),
    };
    let unlocked = migrate::unlock_schema()
        .bind(client, &SCHEMA_LOCK_KEY)
        .one()
        .await;
    let done = result?;
    reset?;
    unlocked?;
    Ok(done)
}

/// Whether the schema's SQL must be sent with the client encoding at `SQL_ASCII`: the migrations
/// hold characters beyond ASCII (in comments), which a database in a one-byte encoding other than
/// UTF8 (LATIN1, WIN1252, …) refuses to convert from UTF8 ("has no equivalent in encoding"), and
/// takes as they come under `SQL_ASCII`. A multi-byte encoding other than UTF8 (EUC_JP, …) takes
/// neither: refused, naming it.
async fn bytes_as_they_come(client: &tokio_postgres::Client) -> Result<bool, Error> {
    let found = migrate::server_encoding().bind(client).one().await?;
    match found.encoding.as_str() {
        "UTF8" | "SQL_ASCII" => Ok(false),
        _ if found.single_byte => Ok(true),
        other => Err(Error::new(
            ErrorKind::Migration,
            format!(
                "the outbox schema needs a database in UTF8 or a one-byte encoding; this one is \
                 in {other}"
            ),
        )),
    }
}

/// Applies the outbox schema ([`migrate()`]) and converts `outbox_events` to the
/// [partitioned layout](crate::partition) with `granularity`, keeping `ahead` partitions ready
/// beyond the current one (default: [`Granularity::default_ahead`]). Idempotent; serialised with
/// other migrations by the same advisory lock. The report's last entry says what the conversion did.
///
/// The conversion runs in one transaction holding `ACCESS EXCLUSIVE` on the plain table: writers
/// and relays wait while its unpublished rows (pending events and dead letters) are moved. It waits
/// at most 5 s for that lock (writers queue behind it meanwhile): a transaction holding the table
/// longer makes it fail with nothing changed ([`ErrorKind::Migration`]), to be run again. Its
/// published rows are not copied: they stay in `outbox_events_legacy`, which
/// [`maintain`](crate::partition::maintain) drops once they are all older than the retention. A
/// table already partitioned with another granularity is an error ([`ErrorKind::Migration`]).
pub async fn migrate_partitioned(
    client: &mut tokio_postgres::Client,
    granularity: Granularity,
    ahead: Option<u32>,
) -> Result<MigrationReport, Error> {
    let explicit = ahead.is_some();
    let ahead = ahead.unwrap_or_else(|| granularity.default_ahead());
    let ahead = i32::try_from(ahead)
        .ok()
        .filter(|_| crate::partition::AHEAD.contains(&ahead))
        .ok_or_else(|| {
            let (min, max) = crate::partition::AHEAD.into_inner();
            Error::config(format!("ahead must be within {min}..={max}, got {ahead}"))
        })?;
    with_schema_lock(client, async |client| {
        let mut report = run_migrations(client).await?;
        let tx = client.transaction().await?;
        let done = partition_sql::partitions_convert()
            .bind(&tx, &granularity.as_str(), &ahead)
            .one()
            .await
            .map_err(|e| {
                use tokio_postgres::error::SqlState;
                let message = match (e.code(), e.as_db_error()) {
                    (Some(&SqlState::LOCK_NOT_AVAILABLE), _) => {
                        "could not partition outbox_events: another transaction held the table for \
                         5 s (a long-running transaction or a session idle in one: see \
                         pg_stat_activity); nothing was changed, run it again"
                            .to_owned()
                    }
                    // The conversion's own refusal (another granularity, say), in its words: with
                    // the server's `ERROR:` before them, it read as a failure of the server's.
                    (Some(&SqlState::RAISE_EXCEPTION), Some(db)) => {
                        format!("could not partition outbox_events: {}", db.message())
                    }
                    _ => "could not partition outbox_events".to_owned(),
                };
                Error::new(ErrorKind::Migration, message).with_source(e)
            })?;
        partition_sql::ensure_checks().bind(&tx).one().await?;
        // On a table partitioned before, an `ahead` asked for explicitly is the new setting
        // (it was ignored); the next maintenance makes the partitions.
        let mut done = done;
        let former = match explicit {
            true => partition_sql::set_ahead().bind(&tx, &ahead).opt().await?,
            false => None,
        };
        if let Some(former) = former {
            done.push_str(&format!(
                "; partitions ahead: {former} → {ahead} (the next maintenance makes them)"
            ));
        }
        tx.commit().await?;
        report.applied.push(done);
        Ok(report)
    })
    .await
}

/// Applies the outbox schema up to and including `version` only: a database as an older release
/// left it, for upgrade tests. Not public API.
#[doc(hidden)]
pub async fn migrate_up_to(
    client: &mut tokio_postgres::Client,
    version: i32,
) -> Result<MigrationReport, Error> {
    run_migrations_to(client, refinery::Target::Version(version)).await
}

async fn run_migrations(client: &mut tokio_postgres::Client) -> Result<MigrationReport, Error> {
    run_migrations_to(client, refinery::Target::Latest).await
}

async fn run_migrations_to(
    client: &mut tokio_postgres::Client,
    target: refinery::Target,
) -> Result<MigrationReport, Error> {
    readable_history(client).await?;
    let mut runner = embedded::migrations::runner().set_target(target);
    runner.set_migration_table_name(SCHEMA_HISTORY_TABLE);
    let report = runner
        .set_abort_divergent(true)
        .run_async(client)
        .await
        .map_err(failed)?;
    Ok(MigrationReport {
        applied: report
            .applied_migrations()
            .iter()
            .map(|m| format!("V{}__{}", m.version(), m.name()))
            .collect(),
    })
}

/// The versions of history rows refinery cannot read (it panics on them: a NULL, an `applied_on`
/// that is not RFC 3339, a checksum that is not a 64-bit unsigned number). Plain SQL here: the
/// history table is refinery's, made by no migration, so cornucopia cannot prepare against it.
const UNREADABLE_HISTORY_ROWS: &str = r"SELECT version::int8
  FROM outbox_schema_history
 WHERE name IS NULL OR applied_on IS NULL OR checksum IS NULL
    OR applied_on !~ '^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$'
    OR CASE WHEN checksum ~ '^\d{1,20}$'
            THEN checksum::numeric > 18446744073709551615 ELSE true END
 ORDER BY version";

/// Refuses a history refinery could not read (it panics on such a row: black-box run, a row
/// written by hand with `now()::text` as its `applied_on`), naming the versions.
async fn readable_history(client: &tokio_postgres::Client) -> Result<(), Error> {
    match unreadable_history(client).await? {
        None => Ok(()),
        Some(what) => Err(Error::new(ErrorKind::Migration, what)),
    }
}

/// What is wrong with the history rows refinery cannot read, naming their versions; `None` when
/// there are none (or no history yet). The relay's start-up check warns with it.
pub(crate) async fn unreadable_history(
    client: &tokio_postgres::Client,
) -> Result<Option<String>, Error> {
    if !migrate::history_exists().bind(client).one().await? {
        return Ok(None);
    }
    let unreadable: Vec<i64> = client
        .query(UNREADABLE_HISTORY_ROWS, &[])
        .await?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()?;
    if unreadable.is_empty() {
        return Ok(None);
    }
    let versions: Vec<String> = unreadable.iter().map(i64::to_string).collect();
    Ok(Some(format!(
        "the rows of version(s) {} in {SCHEMA_HISTORY_TABLE} cannot be read (a name, applied_on \
         or checksum missing, an applied_on not in RFC 3339 such as 2026-01-31T12:00:00Z, or a \
         checksum not a 64-bit unsigned number): the history was edited by hand; restore those \
         rows",
        versions.join(", ")
    )))
}

/// A failed migration run in the product's words: a database a newer release migrated, a history
/// with a hole or another build's version, or the migration that failed and what was applied
/// before it (refinery's own text named none of this plainly: "migration V12__x is missing from
/// the filesystem" for a database ahead of the binary, and nothing of what a partial run applied).
fn failed(e: refinery::Error) -> Error {
    let latest = schema_version();
    let what = match e.kind() {
        refinery::error::Kind::MissingVersion(m) if i64::from(m.version()) > latest => format!(
            "the outbox schema in this database is at version {} ({m}), newer than this \
             binary's latest, {latest}: a newer release migrated it; use that release (a schema \
             is never taken back)",
            m.version()
        ),
        refinery::error::Kind::MissingVersion(m) => format!(
            "version {} of the outbox schema ({m}) is not recorded in {SCHEMA_HISTORY_TABLE}, \
             though later versions are: the history was edited by hand; restore its row if that \
             version was applied (this binary will not apply it out of order)",
            m.version()
        ),
        refinery::error::Kind::DivergentVersion(applied, ours) => format!(
            "version {} of the outbox schema ({applied}) is recorded in {SCHEMA_HISTORY_TABLE} \
             with checksum {}, this binary's {ours} has {}: another build of outbox migrated \
             this database, or the row was edited. If the schema is the same, record this \
             binary's: UPDATE {SCHEMA_HISTORY_TABLE} SET checksum = '{}' WHERE version = {}",
            applied.version(),
            applied.checksum(),
            ours.checksum(),
            ours.checksum(),
            applied.version()
        ),
        refinery::error::Kind::Connection(doing, cause) => {
            // refinery's words, "`error asserting migrations table`, `db error`", told neither
            // what failed nor why (black-box run): the step in ours, and the server's reason.
            let history = || format!("its history table {SCHEMA_HISTORY_TABLE}");
            let step = match doing.as_str() {
                "error asserting migrations table" => format!("creating or reading {}", history()),
                "error getting last applied migration"
                | "error getting applied migrations"
                | "error getting current schema version" => format!("reading {}", history()),
                other => other.strip_prefix("error ").unwrap_or(other).to_owned(),
            };
            let why = match cause.downcast_ref::<tokio_postgres::Error>() {
                Some(pg) if pg.as_db_error().is_some() => crate::error::pg_message(pg),
                _ => crate::error_chain(&**cause),
            };
            let what = format!(
                "could not apply the outbox schema: {step} failed: {why}{}",
                kept(&e)
            );
            // The database's error stays in the chain (`sqlstate()`, the CLI's hints).
            return Error::new(ErrorKind::Migration, what)
                .with_source(StepFailed { step, error: e });
        }
        _ => {
            let what = format!("could not apply the outbox schema{}", kept(&e));
            return Error::new(ErrorKind::Migration, what).with_source(e);
        }
    };
    Error::new(ErrorKind::Migration, what)
}

/// What a failed run applied before it failed, and kept, as a parenthesis to its message; empty
/// when nothing was.
fn kept(e: &refinery::Error) -> String {
    let applied: Vec<String> = e
        .report()
        .map(|r| {
            r.applied_migrations()
                .iter()
                .map(|m| m.to_string())
                .collect()
        })
        .unwrap_or_default();
    if applied.is_empty() {
        return String::new();
    }
    format!(
        " (applied first, and kept: {}; run `outbox migrate` again once the cause is fixed)",
        applied.join(", ")
    )
}

/// A failed step of refinery's as the source of a migration [`Error`]: told as the step (its
/// message says it already), its source the database's error; refinery's own words left out.
#[derive(Debug)]
struct StepFailed {
    step: String,
    error: refinery::Error,
}

impl std::fmt::Display for StepFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed", self.step)
    }
}

impl std::error::Error for StepFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self.error.kind() {
            refinery::error::Kind::Connection(_, cause) => Some(cause.as_ref()),
            _ => None,
        }
    }
}
