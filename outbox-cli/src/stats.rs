//! `outbox stats`.

use crate::output::out;
use crate::{Failure, db};

/// Prints the outbox's state as a table or JSON.
pub async fn run(url: Option<&str>, json: bool) -> Result<(), Failure> {
    let conn = db::connect_bounded(url).await?;
    let client = conn.client();
    let (s, partitions) = conn
        .answer(async {
            let s = outbox_core::stats(client).await?;
            let partitions = outbox_core::partition::partition_stats(client).await?;
            Ok::<_, outbox_core::Error>((s, partitions))
        })
        .await?;
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
    let age_read = s.oldest_pending_age_secs.map(readable).unwrap_or_default();
    out!("pending                  {:>10}", s.pending);
    out!("  due now                {:>10}", s.due_now);
    out!("  behind an earlier one  {:>10}", s.held_back);
    // Not "waiting for retry": during a destination's outage, its events put back without an
    // attempt counted read like failures (black-box run).
    out!(
        "  due later              {:>10}  (retry, or put back)",
        s.waiting_retry
    );
    out!("dead letters             {:>10}", s.dead_letters);
    out!("oldest pending age       {age:>10}{age_read}");
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

/// An age of two minutes or more in larger units, after the seconds (`  (1.0 d)`): 86403.4s alone
/// had to be worked out (black-box run). Empty below.
fn readable(secs: f64) -> String {
    const UNITS: [(f64, &str); 3] = [(86_400.0, "d"), (3_600.0, "h"), (60.0, "min")];
    if secs < 120.0 {
        return String::new();
    }
    UNITS
        .iter()
        .find(|(unit, _)| secs >= 2.0 * unit || *unit == 60.0)
        .map(|(unit, name)| format!("  ({:.1} {name})", secs / unit))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::readable;

    #[test]
    fn ages_read_in_the_largest_unit_they_fill_twice() {
        assert_eq!(readable(59.0), "");
        assert_eq!(readable(119.9), "");
        assert_eq!(readable(150.0), "  (2.5 min)");
        assert_eq!(readable(7_199.0), "  (120.0 min)");
        assert_eq!(readable(7_200.0), "  (2.0 h)");
        assert_eq!(readable(86_403.4), "  (24.0 h)");
        assert_eq!(readable(3.0 * 86_400.0), "  (3.0 d)");
    }
}
