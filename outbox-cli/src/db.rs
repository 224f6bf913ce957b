//! Connections from `DATABASE_URL`.

use std::str::FromStr;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::Failure;

/// The parsed connection settings. Their `Debug` redacts the password; nothing here logs them.
pub fn config(url: Option<&str>) -> Result<tokio_postgres::Config, Failure> {
    let url = url.ok_or("no database given: set DATABASE_URL or pass --database-url")?;
    tokio_postgres::Config::from_str(url)
        .map_err(|e| format!("DATABASE_URL is not a valid connection string: {e}").into())
}

/// A pool of `size` connections.
pub fn pool(config: &tokio_postgres::Config, size: usize) -> Result<Pool, Failure> {
    let manager = Manager::from_config(
        config.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Ok(Pool::builder(manager).max_size(size).build()?)
}

/// One connection, driven on a task.
pub async fn connect(url: Option<&str>) -> Result<tokio_postgres::Client, Failure> {
    let config = config(url)?;
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| format!("cannot connect to PostgreSQL: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "database connection closed");
        }
    });
    Ok(client)
}
