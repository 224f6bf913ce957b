//! What the fan-out run found.

use std::fmt;
use std::time::Duration;

/// One consumer's side of the fan-out.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConsumerReport {
    /// The consumer's (and its inbox's) name.
    pub name: &'static str,
    /// Messages it received, redeliveries included.
    pub received: u64,
    /// Messages its inbox recognised as already applied.
    pub duplicates: u64,
    /// Messages whose handler failed (retried after a back-off) or that could not be read.
    pub failed: u64,
    /// Committed events missing from its inbox at the end: 0 when it applied every one.
    pub unapplied: i64,
}

/// The fan-out run's findings ([`FanOutReport::problems`] is empty when all is well).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FanOutReport {
    /// Orders placed (committed).
    pub orders_placed: u64,
    /// Events written by committed transactions.
    pub events_written: u64,
    /// Events the relay marked published (the outbox's stats).
    pub events_published: i64,
    /// The read model's consumer.
    pub summaries: ConsumerReport,
    /// The shipping service's consumer.
    pub shipping: ConsumerReport,
    /// Orders whose summary differs from the order.
    pub stale_summaries: i64,
    /// Events the read model saw out of order.
    pub out_of_order: usize,
    /// Shipments the shipping service recorded.
    pub shipments: i64,
    /// Orders shipped on the write side.
    pub shipped_orders: i64,
    /// Whether the run gave up waiting for the last events.
    pub timed_out: bool,
    /// The whole run.
    pub time: Duration,
}

impl FanOutReport {
    /// What went wrong, one line each; empty when every event reached both consumers and each
    /// applied it once, in order.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.events_published != self.events_written as i64 {
            problems.push(format!(
                "{} events written but {} published",
                self.events_written, self.events_published
            ));
        }
        for c in [&self.summaries, &self.shipping] {
            if c.unapplied != 0 {
                problems.push(format!("{}: {} events never applied", c.name, c.unapplied));
            }
            if c.received < self.events_written {
                problems.push(format!(
                    "{}: {} messages received for {} events",
                    c.name, c.received, self.events_written
                ));
            }
        }
        if self.stale_summaries != 0 || self.out_of_order != 0 {
            problems.push(format!(
                "read model: {} stale summaries, {} events out of order",
                self.stale_summaries, self.out_of_order
            ));
        }
        if self.shipments != self.shipped_orders {
            problems.push(format!(
                "shipping: {} shipments for {} shipped orders",
                self.shipments, self.shipped_orders
            ));
        }
        if self.timed_out {
            problems.push("gave up waiting for the last events".into());
        }
        problems
    }
}

impl fmt::Display for FanOutReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (&self.summaries, &self.shipping);
        writeln!(f, "orders placed          {:>8}", self.orders_placed)?;
        writeln!(f, "events written         {:>8}", self.events_written)?;
        writeln!(
            f,
            "events published       {:>8}   (once each, to the topic)",
            self.events_published
        )?;
        writeln!(f, "                       {:>16} {:>10}", a.name, b.name)?;
        let row = |f: &mut fmt::Formatter<'_>, label: &str, x: i64, y: i64| {
            writeln!(f, "{label:<23}{x:>16} {y:>10}")
        };
        row(f, "messages received", a.received as i64, b.received as i64)?;
        row(
            f,
            "duplicates skipped",
            a.duplicates as i64,
            b.duplicates as i64,
        )?;
        row(f, "failed, retried", a.failed as i64, b.failed as i64)?;
        row(f, "events not applied", a.unapplied, b.unapplied)?;
        writeln!(
            f,
            "read model             {} stale summaries, {} events out of order",
            self.stale_summaries, self.out_of_order
        )?;
        writeln!(
            f,
            "shipping               {} shipments for {} shipped orders",
            self.shipments, self.shipped_orders
        )?;
        write!(f, "time                   {:.1} s", self.time.as_secs_f64())
    }
}
