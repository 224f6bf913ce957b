//! `outbox migrate`.

use crate::{Failure, db};

/// Applies the schema and says what it did.
pub async fn run(url: Option<&str>) -> Result<(), Failure> {
    let mut client = db::connect(url).await?;
    let report = outbox_core::migrate(&mut client).await?;
    if report.applied.is_empty() {
        println!("schema is up to date");
    } else {
        for m in &report.applied {
            println!("applied {m}");
        }
    }
    Ok(())
}
