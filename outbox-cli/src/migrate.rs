//! `outbox migrate`.

use crate::cli::MigrateArgs;
use crate::output::out;
use crate::{Failure, db};

/// Applies the schema (and with `--partitioned` the partitioned layout) and says what it did.
pub async fn run(url: Option<&str>, args: MigrateArgs) -> Result<(), Failure> {
    let mut client = db::connect(url).await?;
    let (mut applied, conversion) = match args.partitioned {
        None => (outbox_core::migrate(&mut client).await?.applied, None),
        Some(g) => {
            let mut report =
                outbox_core::partition::migrate_partitioned(&mut client, g.into(), args.ahead)
                    .await?;
            // Its last line says what the conversion did ("already partitioned daily"): not a
            // migration applied.
            let conversion = report.applied.pop();
            (report.applied, conversion)
        }
    };
    if applied.is_empty() {
        out!("schema is up to date");
    }
    for m in applied.drain(..) {
        out!("applied {m}");
    }
    if let Some(conversion) = conversion {
        out!("outbox_events: {conversion}");
    }
    Ok(())
}
