//! `outbox stats`.

use crate::output::out;
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
        out!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    let age = s
        .oldest_pending_age_secs
        .map_or_else(|| "-".to_string(), |a| format!("{a:.1}s"));
    out!("pending                  {:>10}", s.pending);
    out!("  due now                {:>10}", s.due_now);
    out!("  behind an earlier one  {:>10}", s.held_back);
    out!("  waiting for retry      {:>10}", s.waiting_retry);
    out!("dead letters             {:>10}", s.dead_letters);
    out!("oldest pending age       {age:>10}");
    out!("blocked aggregates       {:>10}", s.blocked_aggregates);
    out!("published (last hour)    {:>10}", s.published_last_hour);
    if let Some(p) = partitions {
        let label = format!("partitions, {}", p.granularity);
        out!("{label:<25}{:>10}  (the tail apart)", p.partitions);
        out!(
            "  kept past retention    {:>10}  ({} {} to keep in them: pending, dead-lettered, or published within the retention)",
            p.kept_partitions,
            p.kept_events,
            crate::output::rows(p.kept_events)
        );
        out!(
            "  events in the tail     {:>10}  (written past the partitions made ahead)",
            p.tail_events
        );
        if !p.tail_attached {
            out!(
                "  tail partition         {:>10}  (rows past the partitions made ahead fail until \
                 `outbox partitions maintain` runs)",
                "DETACHED"
            );
        }
        if p.legacy_table {
            out!(
                "  outbox_events_legacy   {:>10}  (dropped once past the retention)",
                "present"
            );
        }
    }
    Ok(())
}
