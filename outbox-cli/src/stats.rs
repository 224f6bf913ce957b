//! `outbox stats`.

use crate::{Failure, db};

/// Prints the outbox's state as a table or JSON.
pub async fn run(url: Option<&str>, json: bool) -> Result<(), Failure> {
    let client = db::connect(url).await?;
    let s = outbox_core::stats(&client).await?;
    let partitions = outbox_core::partition::partition_stats(&client).await?;
    if json {
        let mut value = serde_json::to_value(&s)?;
        if let (Some(p), Some(object)) = (&partitions, value.as_object_mut()) {
            object.insert("partitions".into(), serde_json::to_value(p)?);
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    let age = s
        .oldest_pending_age_secs
        .map_or_else(|| "-".to_string(), |a| format!("{a:.1}s"));
    println!("pending                  {:>10}", s.pending);
    println!("  due now                {:>10}", s.due_now);
    println!("  waiting for retry      {:>10}", s.waiting_retry);
    println!("dead letters             {:>10}", s.dead_letters);
    println!("oldest pending age       {age:>10}");
    println!("blocked aggregates       {:>10}", s.blocked_aggregates);
    println!("published (last hour)    {:>10}", s.published_last_hour);
    if let Some(p) = partitions {
        println!(
            "partitions ({:<6})      {:>10}",
            p.granularity, p.partitions
        );
        println!(
            "  kept past retention    {:>10}  ({} pending events or dead letters hold them)",
            p.kept_partitions, p.kept_events
        );
        println!(
            "  events in the tail     {:>10}  (written past the partitions made ahead)",
            p.tail_events
        );
        if p.legacy_table {
            println!(
                "  outbox_events_legacy   {:>10}  (dropped once past the retention)",
                "present"
            );
        }
    }
    Ok(())
}
