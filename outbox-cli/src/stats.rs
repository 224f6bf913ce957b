//! `outbox stats`.

use crate::{Failure, db};

/// Prints the outbox's state as a table or JSON.
pub async fn run(url: Option<&str>, json: bool) -> Result<(), Failure> {
    let client = db::connect(url).await?;
    let s = outbox_core::stats(&client).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
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
    Ok(())
}
