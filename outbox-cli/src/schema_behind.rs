//! A command that failed on a table or function of the outbox schema that does not exist: said
//! in the schema's own terms when the database's schema is older than this binary's.

use std::time::Duration;

use tokio_postgres::error::SqlState;

use crate::{Failure, db};

/// How long [`schema_behind`] may take, connecting included; past it the command's own error is
/// reported.
pub const ASKS_WITHIN: Duration = Duration::from_secs(5);

/// Whether `e`'s chain holds the server saying that a table or function of the outbox's own
/// (`outbox_*`, `processed_events`) does not exist: a database never migrated, or migrated by an
/// older `outbox`.
pub fn missing_outbox_object(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(s) = source {
        let db = s
            .downcast_ref::<tokio_postgres::Error>()
            .and_then(|pg| pg.as_db_error());
        if db.is_some_and(|d| {
            (*d.code() == SqlState::UNDEFINED_TABLE || *d.code() == SqlState::UNDEFINED_FUNCTION)
                && (d.message().contains("outbox_") || d.message().contains("processed_events"))
        }) {
            return true;
        }
        source = s.source();
    }
    false
}

/// The error to report instead of `e` when the database's outbox schema is older than this
/// binary's, as the relay says it: `the outbox schema in database D is at version 2, this binary
/// needs version 11: …` (a command said only that function `outbox_published_since(…)` did not
/// exist: black-box run). `None` when it is not, or cannot be told (no history table, or none
/// this role may read; the hint for `e` says to migrate then).
pub async fn schema_behind(url: Option<&str>) -> Option<Failure> {
    let client = db::connect(url).await.ok()?;
    let row = client
        .query_one(
            "SELECT current_database()::text,
                    CASE WHEN to_regclass($1::text) IS NOT NULL
                         THEN has_table_privilege($1::text, 'SELECT') ELSE false END",
            &[&outbox_core::SCHEMA_HISTORY_TABLE],
        )
        .await
        .ok()?;
    let (database, readable): (String, bool) = (row.try_get(0).ok()?, row.try_get(1).ok()?);
    if !readable {
        return None;
    }
    let applied: i64 = client
        .query_one(
            &format!(
                "SELECT coalesce(max(version), 0)::int8 FROM {}",
                outbox_core::SCHEMA_HISTORY_TABLE
            ),
            &[],
        )
        .await
        .ok()?
        .try_get(0)
        .ok()?;
    let expected = outbox_core::schema_version();
    (applied < expected).then(|| {
        format!(
            "the outbox schema in database {database} is at version {applied}, this binary needs \
             version {expected}: run `outbox migrate` as the schema owner"
        )
        .into()
    })
}
