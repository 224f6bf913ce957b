//! The fan-out example: the relay publishes the order events to one SNS topic, which fans them out
//! to two SQS queues, each read by its own consumer: the read model ([`crate::consumer`]) and the
//! shipping service ([`crate::shipping`]). Each consumer has its own inbox, so each applies every
//! event once, whatever the other does.
//!
//! [`run`] is the whole flow on a database and a [`Topology`] that exist already (the `fanout`
//! binary makes them first; the integration test uses throwaway ones).

mod report;
mod topology;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use deadpool_postgres::Pool;
use outbox_core::{CancellationToken, Relay};
use outbox_sqs::consumer::{Delivery, Handler, Outcome};
use outbox_sqs::{Consumer, SqsPublisher};
use tokio::task::{JoinHandle, JoinSet};

pub use report::{ConsumerReport, FanOutReport};
pub use topology::Topology;

use crate::consumer::{CONSUMER_NAME, OrderSummaries};
use crate::demo::writers::order_plan;
use crate::events::OrderEvent;
use crate::shipping::{SHIPPING_CONSUMER, Shipments};
use crate::{Error, service};

/// The fan-out run's settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FanOutConfig {
    /// The database (the outbox's and the example's migrations are applied to it).
    pub database: tokio_postgres::Config,
    /// The AWS configuration for SQS and SNS (the relay and both consumers).
    pub aws: SdkConfig,
    /// The topic and its two queues.
    pub topology: Topology,
    /// Orders to place (default 300).
    pub orders: u32,
    /// Concurrent writers (default 4).
    pub writers: usize,
    /// Handlers each consumer runs at once (default 4).
    pub handlers: usize,
    /// How long to wait for the last events once every order was written (default 60 s).
    pub timeout: Duration,
}

impl FanOutConfig {
    /// The defaults, for `database`, `aws` and `topology`.
    pub fn new(database: tokio_postgres::Config, aws: SdkConfig, topology: Topology) -> Self {
        FanOutConfig {
            database,
            aws,
            topology,
            orders: 300,
            writers: 4,
            handlers: 4,
            timeout: Duration::from_secs(60),
        }
    }
}

/// Runs the fan-out: applies the schemas, starts the relay (`order.*` → the topic) and both
/// consumers, places `config.orders` orders on `config.writers` writers, waits until both
/// consumers have applied every committed event (or `config.timeout` after the last write), stops
/// everything and checks both consumers' effects.
pub async fn run(config: FanOutConfig) -> Result<FanOutReport, Error> {
    let started = Instant::now();
    let mut client = crate::demo::connect(&config.database).await?;
    outbox_core::migrate(&mut client).await?;
    crate::migrate(&mut client).await?;
    let pool = crate::demo::pool(&config.database, config.writers + 2 * config.handlers + 6)?;

    let publisher = SqsPublisher::builder()
        .sdk_config(config.aws.clone())
        .route("order.*", &config.topology.topic_arn)
        .build()
        .await?;
    outbox_core::Publisher::check(&publisher).await?;
    // Checks events against the topic's limits (SNS: 256 KiB) in the writers' transactions.
    let emitter = outbox_core::Emitter::for_publisher(&publisher);
    let relay = Relay::builder(pool.clone(), publisher)
        .listen(config.database.clone())
        .build()?;
    let stop = CancellationToken::new();
    let relay_task = tokio::spawn({
        let stop = stop.clone();
        async move { relay.run(stop).await }
    });

    let summaries = Arc::new(OrderSummaries::default());
    let queues = [
        (CONSUMER_NAME, &config.topology.summaries_queue),
        (SHIPPING_CONSUMER, &config.topology.shipping_queue),
    ];
    let read_model = Running::start(&config, &pool, queues[0], summaries.clone(), &stop).await;
    let shipping = match &read_model {
        Ok(_) => Running::start(&config, &pool, queues[1], Shipments, &stop).await,
        Err(_) => Err("not started".into()),
    };
    let (read_model, shipping) = match (read_model, shipping) {
        (Ok(r), Ok(s)) => (r, s),
        (Err(e), _) | (_, Err(e)) => {
            stop.cancel();
            return Err(e);
        }
    };

    let written = write_orders(&config, &pool, emitter).await;
    let waited = match &written {
        Ok(_) => wait_for_both(&config, &pool, &relay_task).await,
        Err(_) => Ok(false),
    };
    stop.cancel();
    let relay_result = relay_task.await;
    let read_model = read_model.finish(&pool).await;
    let shipping = shipping.finish(&pool).await;
    let (orders_placed, events_written) = written?;
    let timed_out = !waited?;
    relay_result??;

    let stats = outbox_core::stats(&client).await?;
    let (shipments, shipped_orders) = crate::shipping::count_shipments(&pool).await?;
    Ok(FanOutReport {
        orders_placed,
        events_written,
        events_published: stats.published_last_hour,
        summaries: read_model?,
        shipping: shipping?,
        stale_summaries: crate::consumer::count_stale_summaries(&pool).await?,
        out_of_order: summaries.out_of_order().len(),
        shipments,
        shipped_orders,
        timed_out,
        time: started.elapsed(),
    })
}

/// One consumer running on its queue, with its counts.
struct Running {
    name: &'static str,
    task: JoinHandle<Result<(), outbox_sqs::Error>>,
    counts: Arc<Counts>,
}

/// What a consumer's observer saw.
#[derive(Debug, Default)]
struct Counts {
    received: AtomicU64,
    duplicates: AtomicU64,
    failed: AtomicU64,
}

impl Counts {
    fn record(&self, delivery: &Delivery) {
        self.received.fetch_add(1, Ordering::Relaxed);
        match delivery.outcome {
            Outcome::Duplicate => self.duplicates.fetch_add(1, Ordering::Relaxed),
            Outcome::Failed | Outcome::BadInput(_) => self.failed.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
    }
}

impl Running {
    async fn start<H: Handler<OrderEvent> + 'static>(
        config: &FanOutConfig,
        pool: &Pool,
        (name, queue): (&'static str, &String),
        handler: H,
        stop: &CancellationToken,
    ) -> Result<Running, Error> {
        let counts = Arc::new(Counts::default());
        let consumer = Consumer::builder(pool.clone(), queue)
            .client(aws_sdk_sqs::Client::new(&config.aws))
            .name(name)
            .concurrency(config.handlers.max(1))
            .wait(Duration::from_secs(1))
            .observe({
                let counts = counts.clone();
                move |delivery| counts.record(delivery)
            })
            .build()
            .await?;
        let stop = stop.clone();
        let task = tokio::spawn(async move { consumer.run(stop, handler).await });
        Ok(Running { name, task, counts })
    }

    /// Waits for the consumer to finish (it was told to stop) and reports what it did.
    async fn finish(self, pool: &Pool) -> Result<ConsumerReport, Error> {
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(format!("consumer {}: {}", self.name, crate::error_chain(&e)).into());
            }
            Err(e) => return Err(format!("consumer {} panicked: {e}", self.name).into()),
        }
        Ok(ConsumerReport {
            name: self.name,
            received: self.counts.received.load(Ordering::Relaxed),
            duplicates: self.counts.duplicates.load(Ordering::Relaxed),
            failed: self.counts.failed.load(Ordering::Relaxed),
            unapplied: crate::shipping::count_unapplied(pool, self.name).await?,
        })
    }
}

/// Places the orders on `config.writers` writers; returns the orders placed and the events their
/// transactions committed.
async fn write_orders(
    config: &FanOutConfig,
    pool: &Pool,
    emitter: outbox_core::Emitter,
) -> Result<(u64, u64), Error> {
    let next = Arc::new(AtomicU64::new(0));
    let mut writers = JoinSet::new();
    for _ in 0..config.writers.max(1) {
        let (pool, next, orders, emitter) = (pool.clone(), next.clone(), config.orders, emitter);
        writers.spawn(async move {
            let (mut placed, mut events) = (0u64, 0u64);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(i) = u32::try_from(i).ok().filter(|i| *i < orders) else {
                    break;
                };
                let (order, added, remove_first, ship) = order_plan(i);
                service::place_order(&pool, &emitter, &order).await?;
                placed += 1;
                events += 1;
                for line in &added {
                    service::add_line(&pool, &emitter, order.id, line).await?;
                    events += 1;
                }
                if remove_first {
                    service::remove_line(&pool, &emitter, order.id, 1).await?;
                    events += 1;
                }
                if ship {
                    service::ship_order(&pool, &emitter, order.id, "DHL").await?;
                    events += 1;
                }
            }
            Ok::<_, Error>((placed, events))
        });
    }
    let (mut placed, mut events) = (0, 0);
    while let Some(result) = writers.join_next().await {
        let (p, e) = result.map_err(Error::from).and_then(|r| r)?;
        placed += p;
        events += e;
    }
    Ok((placed, events))
}

/// Waits until both consumers have every committed event in their inboxes; `false` when
/// `config.timeout` passed first, an error when the relay stopped.
async fn wait_for_both<T>(
    config: &FanOutConfig,
    pool: &Pool,
    relay: &JoinHandle<T>,
) -> Result<bool, Error> {
    let deadline = Instant::now() + config.timeout;
    loop {
        if relay.is_finished() {
            return Err("the relay stopped before every event was delivered".into());
        }
        let mut left = 0;
        for name in [CONSUMER_NAME, SHIPPING_CONSUMER] {
            left += crate::shipping::count_unapplied(pool, name).await?;
        }
        if left == 0 {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
