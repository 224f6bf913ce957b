//! What the demo needs before it runs: a fresh database, a FIFO queue, connections.

use std::str::FromStr;

use aws_sdk_sqs::types::QueueAttributeName;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::Error;

/// Drops and creates database `name` on the server of `admin_url` (a connection string naming a
/// database the user may connect to, e.g. `postgres://postgres@127.0.0.1:5432/postgres`), and
/// returns the settings to connect to the new database. `name` may hold lower-case ASCII letters,
/// digits and `_`.
pub async fn recreate_database(
    admin_url: &str,
    name: &str,
) -> Result<tokio_postgres::Config, Error> {
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        return Err(format!("`{name}` is not a plain lower-case database name").into());
    }
    let admin_config = tokio_postgres::Config::from_str(admin_url)?;
    let admin = connect(&admin_config).await?;
    // Database names cannot be bind parameters; `name` was checked above.
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await?;
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await?;
    let mut config = admin_config;
    config.dbname(name);
    Ok(config)
}

/// Creates a FIFO queue named `name` (which must end in `.fifo`) and returns its URL. The relay
/// sets each message's deduplication id (the event id), so content-based deduplication is off.
pub async fn create_fifo_queue(sqs: &aws_sdk_sqs::Client, name: &str) -> Result<String, Error> {
    let out = sqs
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .send()
        .await?;
    Ok(out
        .queue_url()
        .ok_or("CreateQueue returned no queue URL")?
        .to_owned())
}

/// A pool of `size` connections to `database`, with TCP keepalives, a TCP user timeout and pool
/// time-outs sized to the relay's publish timeout.
pub(crate) fn pool(database: &tokio_postgres::Config, size: usize) -> Result<Pool, Error> {
    let publish_timeout = outbox_core::RelayConfig::default().publish_timeout;
    let mut database = database.clone();
    outbox_core::connect::harden(&mut database, publish_timeout);
    let manager = Manager::from_config(
        database,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let builder = Pool::builder(manager).max_size(size);
    Ok(outbox_core::connect::pool_timeouts(builder, publish_timeout).build()?)
}

/// Connects with `config`, driving the connection on a task.
pub(crate) async fn connect(
    config: &tokio_postgres::Config,
) -> Result<tokio_postgres::Client, Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}
