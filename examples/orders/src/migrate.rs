//! The service's own schema, applied by the service itself.

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// The table in which the service's applied schema versions are recorded, apart from the outbox's
/// ([`outbox_core::SCHEMA_HISTORY_TABLE`]).
pub const SCHEMA_HISTORY_TABLE: &str = "orders_schema_history";

/// Applies the example's migrations (`migrations/*.sql`: orders, order lines, order summaries) to the
/// database `client` is connected to, after the outbox's own schema; returns the versions applied
/// (empty when up to date).
pub async fn migrate(client: &mut tokio_postgres::Client) -> Result<Vec<String>, crate::Error> {
    let mut runner = embedded::migrations::runner();
    runner.set_migration_table_name(SCHEMA_HISTORY_TABLE);
    let report = runner.set_abort_divergent(true).run_async(client).await?;
    Ok(report
        .applied_migrations()
        .iter()
        .map(|m| format!("V{}__{}", m.version(), m.name()))
        .collect())
}
