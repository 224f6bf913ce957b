//! Shared pieces: the SQS fixture and publisher, backlogs, relay drains, pgbench, statistics.

mod backlog;
mod cores;
mod drain;
mod pgbench;
mod server_cpu;
mod sqs;
mod stats;

pub use backlog::*;
pub use cores::*;
pub use drain::*;
pub use pgbench::*;
pub use server_cpu::*;
pub use sqs::*;
pub use stats::*;

/// The benchmarks' error type: anything, with its message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The benchmarks' result type.
pub type Result<T> = std::result::Result<T, BoxError>;

/// The queue every benchmark publishes to (a standard queue).
pub const QUEUE: &str = "bench-events";
/// The fixture's FIFO queue (benchmark 6, aggregates batched per call).
pub const FIFO_QUEUE: &str = "bench-events.fifo";

/// The relay settings of the throughput benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelaySettings {
    /// Events claimed per transaction.
    pub batch_size: usize,
    /// Batches in flight (relay workers).
    pub concurrency: usize,
    /// `SendMessageBatch` calls in flight at once (the SQS publisher's limit).
    pub max_in_flight: usize,
    /// The relay's retention; `Some(ZERO)` deletes each event as it is acknowledged.
    pub retention: Option<std::time::Duration>,
}

impl std::fmt::Display for RelaySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "batch_size {}, concurrency {}, SQS max_in_flight {}",
            self.batch_size, self.concurrency, self.max_in_flight
        )
    }
}
