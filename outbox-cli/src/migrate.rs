//! `outbox migrate`.

use crate::cli::MigrateArgs;
use crate::output::out;
use crate::{Failure, db};

/// Applies the schema (and with `--partitioned` the partitioned layout) and says what it did.
pub async fn run(url: Option<&str>, args: MigrateArgs) -> Result<(), Failure> {
    let mut client = db::connect(url).await?;
    let report = match args.partitioned {
        None => outbox_core::migrate(&mut client).await?,
        Some(g) => {
            outbox_core::partition::migrate_partitioned(&mut client, g.into(), args.ahead).await?
        }
    };
    if report.applied.is_empty() {
        out!("schema is up to date");
    } else {
        for m in &report.applied {
            out!("applied {m}");
        }
    }
    Ok(())
}
