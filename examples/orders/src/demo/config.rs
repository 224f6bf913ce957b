//! The demo's settings.

use std::time::Duration;

/// The demo's settings. [`DemoConfig::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// The database to use: it must exist; [`run`](super::run) applies the outbox's and the example's
    /// migrations to it.
    pub database: tokio_postgres::Config,
    /// The SQS client (the relay's publisher and the consumer both use it).
    pub sqs: aws_sdk_sqs::Client,
    /// The queue the relay publishes the order events to: a FIFO queue, so that each order's
    /// events arrive in order.
    pub queue_url: String,
    /// Orders to place (default 3000).
    pub orders: u32,
    /// Concurrent writers placing orders (default 4).
    pub writers: usize,
    /// Handlers the consumer runs at once (default 8).
    pub consumers: usize,
    /// Fault injection: the consumer leaves every `n`th applied message in the queue after
    /// committing, as if it had crashed before deleting it, so it is delivered twice (default 50;
    /// 0 turns it off).
    pub redeliver_every: u64,
    /// How long to wait for the last events once every order was written (default 60 s).
    pub timeout: Duration,
    /// Print a progress line on stderr while running (default off).
    pub progress: bool,
}

impl DemoConfig {
    /// The defaults, for `database` and `queue_url` through `sqs`.
    pub fn new(
        database: tokio_postgres::Config,
        sqs: aws_sdk_sqs::Client,
        queue_url: impl Into<String>,
    ) -> Self {
        DemoConfig {
            database,
            sqs,
            queue_url: queue_url.into(),
            orders: 3000,
            writers: 4,
            consumers: 8,
            redeliver_every: 50,
            timeout: Duration::from_secs(60),
            progress: false,
        }
    }
}
