//! `outbox cleanup`.

use std::time::Duration;

use crate::{Failure, db};

/// Deletes old processed rows in bounded batches.
pub async fn run(url: Option<&str>, older_than: Duration) -> Result<(), Failure> {
    let client = db::connect(url).await?;
    let deleted = outbox_core::cleanup(&client, older_than).await?;
    println!("deleted {deleted} processed events older than {older_than:?}");
    Ok(())
}
