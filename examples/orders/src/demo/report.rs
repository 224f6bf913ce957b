//! What a demo run found, and how it is printed.

use std::fmt;
use std::time::Duration;

use outbox_core::OutboxStats;
use uuid::Uuid;

#[cfg(doc)]
use super::DemoConfig;

/// What happened, and whether it was right.
#[derive(Debug, Clone)]
pub struct Report {
    /// Orders placed (committed).
    pub orders_placed: u64,
    /// Events written by committed transactions.
    pub events_written: u64,
    /// Events the relay marked published (from the outbox's stats).
    pub events_published: i64,
    /// Distinct events of this run received from the queue.
    pub events_received: u64,
    /// Messages received in all (first deliveries, redeliveries, foreign messages).
    pub messages_received: u64,
    /// Messages the inbox recognised as already processed, and skipped.
    pub duplicates: u64,
    /// Messages the consumer left in the queue on purpose (see [`DemoConfig::redeliver_every`]).
    pub redeliveries_injected: u64,
    /// Events written and never received.
    pub lost: u64,
    /// Events received before an earlier event of the same order (or after a gap).
    pub order_violations: u64,
    /// Messages that were not events of this run (left over in a queue used before), or that the
    /// consumer could not read.
    pub foreign_messages: u64,
    /// The order placed in a transaction that rolled back.
    pub rolled_back_order: Uuid,
    /// Whether its transaction was refused, as intended.
    pub rolled_back_refused: bool,
    /// Whether the rolled-back order's row exists (it must not).
    pub rolled_back_row_exists: bool,
    /// Whether any message about the rolled-back order arrived (none may).
    pub rolled_back_event_received: bool,
    /// Orders whose summary in the read model does not match the order.
    pub stale_summaries: i64,
    /// Commit-to-receive latency, median.
    pub latency_p50: Duration,
    /// Commit-to-receive latency, 99th percentile.
    pub latency_p99: Duration,
    /// Commit-to-receive latency, worst.
    pub latency_max: Duration,
    /// From the first order to the last commit.
    pub write_time: Duration,
    /// The whole run, schema included.
    pub total_time: Duration,
    /// Whether the run gave up waiting for events (see [`DemoConfig::timeout`]).
    pub timed_out: bool,
    /// Errors the consumers recovered from (e.g. a failed receive), and the last one.
    pub consumer_errors: (u64, Option<String>),
    /// The outbox's state at the end (what `outbox stats` prints).
    pub stats: OutboxStats,
}

impl Report {
    /// What went wrong; empty when the run proved what it should.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.lost > 0 {
            problems.push(format!(
                "{} events were written but never received",
                self.lost
            ));
        }
        if self.order_violations > 0 {
            problems.push(format!(
                "{} events arrived out of order",
                self.order_violations
            ));
        }
        if !self.rolled_back_refused {
            problems.push("the order meant to roll back was committed".into());
        }
        if self.rolled_back_row_exists {
            problems.push("the rolled-back order's row exists".into());
        }
        if self.rolled_back_event_received {
            problems.push("an event of the rolled-back order arrived".into());
        }
        if self.stale_summaries > 0 {
            problems.push(format!(
                "{} orders' summaries do not match the orders",
                self.stale_summaries
            ));
        }
        if self.duplicates < self.redeliveries_injected {
            problems.push(format!(
                "{} messages were left in the queue but only {} came back as duplicates",
                self.redeliveries_injected, self.duplicates
            ));
        }
        if self.stats.pending > 0 || self.stats.dead_letters > 0 {
            problems.push(format!(
                "the outbox still has {} pending events and {} dead letters",
                self.stats.pending, self.stats.dead_letters
            ));
        }
        problems
    }

    /// Whether nothing went wrong.
    pub fn ok(&self) -> bool {
        self.problems().is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
        let secs = self.write_time.as_secs_f64().max(f64::EPSILON);
        writeln!(f, "orders placed          {:>8}", self.orders_placed)?;
        writeln!(
            f,
            "events written         {:>8}   ({:.0} events/s, {:.1} s)",
            self.events_written,
            self.events_written as f64 / secs,
            self.write_time.as_secs_f64()
        )?;
        writeln!(f, "events published       {:>8}", self.events_published)?;
        writeln!(
            f,
            "events received        {:>8}   ({} messages in all)",
            self.events_received, self.messages_received
        )?;
        writeln!(
            f,
            "duplicates             {:>8}   (redelivered on purpose: {}; each skipped by the inbox)",
            self.duplicates, self.redeliveries_injected
        )?;
        writeln!(f, "lost                   {:>8}", self.lost)?;
        writeln!(f, "order violations       {:>8}", self.order_violations)?;
        if self.foreign_messages > 0 {
            writeln!(f, "foreign messages       {:>8}", self.foreign_messages)?;
        }
        writeln!(
            f,
            "stale summaries        {:>8}   (read model vs. orders)",
            self.stale_summaries
        )?;
        let rolled_back = if self.rolled_back_refused
            && !self.rolled_back_row_exists
            && !self.rolled_back_event_received
        {
            "rolled back: no row, no event"
        } else {
            "WRONG"
        };
        writeln!(
            f,
            "rolled-back order      {rolled_back} ({})",
            self.rolled_back_order
        )?;
        writeln!(
            f,
            "latency commit→receive p50 {}   p99 {}   max {}",
            ms(self.latency_p50),
            ms(self.latency_p99),
            ms(self.latency_max)
        )?;
        write!(
            f,
            "time                   {:.1} s{}",
            self.total_time.as_secs_f64(),
            if self.timed_out {
                "   (gave up waiting)"
            } else {
                ""
            }
        )?;
        if self.consumer_errors.0 > 0 {
            write!(
                f,
                "\nconsumer errors        {:>8}   (last: {})",
                self.consumer_errors.0,
                self.consumer_errors.1.as_deref().unwrap_or("-")
            )?;
        }
        Ok(())
    }
}

/// Formats `stats` the way `outbox stats` does.
pub fn format_stats(s: &OutboxStats) -> String {
    let age = s
        .oldest_pending_age_secs
        .map_or_else(|| "-".to_string(), |a| format!("{a:.1}s"));
    format!(
        "pending                  {:>10}\n  due now                {:>10}\n  behind an earlier one  {:>10}\n\
         \x20 waiting for retry      {:>10}\n\
         dead letters             {:>10}\noldest pending age       {age:>10}\n\
         blocked aggregates       {:>10}\npublished (last hour)    {:>10}",
        s.pending,
        s.due_now,
        s.held_back,
        s.waiting_retry,
        s.dead_letters,
        s.blocked_aggregates,
        s.published_last_hour
    )
}
