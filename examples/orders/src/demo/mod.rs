//! The demo: orders written by concurrent writers, relayed to an SQS FIFO queue by the in-process
//! relay while they are written, read back by the consumer, checked, and summed up in a
//! [`Report`].
//!
//! [`run`] is the whole flow on a database and a queue that exist already (the `demo` binary makes
//! a fresh database and queue first; the integration test uses throwaway ones).

mod config;
mod progress;
mod report;
mod setup;
mod tally;
pub(crate) mod writers;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use outbox_core::{CancellationToken, Relay};
use outbox_sqs::SqsPublisher;
use tokio::task::JoinHandle;
use uuid::Uuid;

pub use config::DemoConfig;
pub use report::{Report, format_stats};
pub(crate) use setup::{connect, pool};
pub use setup::{create_fifo_queue, recreate_database};

use crate::Error;
use crate::consumer::{CONSUMER_NAME, OrderSummaries};
use crate::service;
use outbox_sqs::Consumer;
use progress::Progress;
use tally::Tally;

/// Runs the demo on `config.database` and `config.queue_url` and reports what happened.
///
/// 1. Applies the outbox's schema ([`outbox_core::migrate`]) and the example's ([`crate::migrate()`]).
/// 2. Starts the relay (with LISTEN wake-ups) publishing `order.*` events to the queue, and the
///    consumers.
/// 3. Places `config.orders` orders on `config.writers` concurrent writers — each order is several
///    transactions, each emitting one event — plus one order whose transaction rolls back.
/// 4. Waits until every committed event was received (or `config.timeout` after the last write),
///    lets the consumers drain for a moment, stops everything, and checks the read model.
///
/// `Err` when the demo could not run at all (schema, relay start-up, an unexpected write failure);
/// what it found is in the [`Report`] ([`Report::ok`]).
pub async fn run(config: DemoConfig) -> Result<Report, Error> {
    let started = Instant::now();
    let mut client = setup::connect(&config.database).await?;
    outbox_core::migrate(&mut client).await?;
    crate::migrate(&mut client).await?;
    let pool = setup::pool(&config.database, config.writers + config.consumers + 4 + 2)?;

    let relay = Stoppable::relay(&config, &pool).await?;
    let tally = Arc::new(Tally::default());
    let rolled_back_order = Uuid::new_v4();
    *tally.rolled_back_order.lock().unwrap() = rolled_back_order.to_string();
    let consumers = match Consumers::start(&config, &pool, &tally).await {
        Ok(c) => c,
        Err(e) => {
            relay.stop.cancel();
            return Err(e);
        }
    };
    let writes_started = Instant::now();
    let mut writers = writers::spawn(&config, &pool, &tally, rolled_back_order);

    let watched = watch(&config, &client, relay, &mut writers, &tally).await;
    let (relay, writes_done, timed_out) = match watched {
        Ok(w) => w,
        Err(e) => {
            consumers.stop.cancel();
            writers.tasks.abort_all();
            return Err(e);
        }
    };
    let write_time = writes_done - writes_started;
    // A last moment for anything still on its way (nothing should be).
    tokio::time::sleep(Duration::from_millis(500)).await;
    consumers.stop(&tally).await?;
    relay.stop.cancel();
    relay.task.await??;

    // Check the end state.
    let stats = outbox_core::stats(&client).await?;
    let stale_summaries = crate::consumer::count_stale_summaries(&pool).await?;
    let rolled_back_row_exists = service::find_order(&pool, rolled_back_order)
        .await?
        .is_some();
    let mut report = tally.report(stats, rolled_back_order);
    report.stale_summaries = stale_summaries;
    report.rolled_back_refused = writers.rolled_back_refused.load(Ordering::Relaxed);
    report.rolled_back_row_exists = rolled_back_row_exists;
    report.write_time = write_time;
    report.total_time = started.elapsed();
    report.timed_out = timed_out;
    Ok(report)
}

/// The in-process relay: woken by NOTIFY, publishing every `order.*` event to the FIFO queue.
struct Stoppable {
    stop: CancellationToken,
    task: JoinHandle<Result<(), outbox_core::Error>>,
}

impl Stoppable {
    async fn relay(config: &DemoConfig, pool: &Pool) -> Result<Stoppable, Error> {
        let publisher = SqsPublisher::builder()
            .client(config.sqs.clone())
            .route("order.*", &config.queue_url)
            .build()
            .await?;
        let relay = Relay::builder(pool.clone(), publisher)
            .listen(config.database.clone())
            .build()?;
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let stop = stop.clone();
            async move { relay.run(stop).await }
        });
        Ok(Stoppable { stop, task })
    }
}

/// The consumer ([`outbox_sqs::Consumer`] with the read model's handler), running until stopped;
/// every message it is done with is recorded in the tally.
struct Consumers {
    stop: CancellationToken,
    task: JoinHandle<Result<(), outbox_sqs::Error>>,
    consumer: Consumer,
    summaries: Arc<OrderSummaries>,
}

impl Consumers {
    async fn start(
        config: &DemoConfig,
        pool: &Pool,
        tally: &Arc<Tally>,
    ) -> Result<Consumers, Error> {
        let consumer = Consumer::builder(pool.clone(), &config.queue_url)
            .client(config.sqs.clone())
            .name(CONSUMER_NAME)
            .concurrency(config.consumers.max(1))
            .wait(Duration::from_secs(1))
            .skip_delete_every(config.redeliver_every)
            .observe({
                let tally = tally.clone();
                move |delivery| tally.record(delivery)
            })
            .build()
            .await?;
        let summaries = Arc::new(OrderSummaries::default());
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (consumer, stop, summaries) = (consumer.clone(), stop.clone(), summaries.clone());
            async move { consumer.run(stop, summaries).await }
        });
        Ok(Consumers {
            stop,
            task,
            consumer,
            summaries,
        })
    }

    /// Stops the consumer (it finishes its handlers and deletes) and hands its findings to the
    /// tally: events applied out of order, failures it recovered from.
    async fn stop(self, tally: &Tally) -> Result<(), Error> {
        self.stop.cancel();
        self.task.await??;
        tally.consumer_stopped(&self.consumer, self.summaries.out_of_order());
        Ok(())
    }
}

/// Watches the run: shows progress, stops at the first failure of the relay or a writer, and
/// returns once every committed event was received and every injected redelivery came back — or
/// `config.timeout` after the last write (then `timed_out`). Returns the relay, when the writes
/// finished, and whether it gave up waiting.
async fn watch(
    config: &DemoConfig,
    client: &tokio_postgres::Client,
    mut relay: Stoppable,
    writers: &mut writers::Writers,
    tally: &Tally,
) -> Result<(Stoppable, Instant, bool), Error> {
    let progress = Progress::new(config.progress, config.orders);
    let mut writes_done: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let timed_out = loop {
        tokio::select! {
            _ = tick.tick() => {}
            relay_result = &mut relay.task => {
                return Err(match relay_result {
                    Ok(Err(e)) => format!("the relay stopped: {}", crate::error_chain(&e)).into(),
                    Ok(Ok(())) => "the relay stopped".into(),
                    Err(e) => format!("the relay panicked: {e}").into(),
                });
            }
        }
        if let Err(e) = writers.failure() {
            relay.stop.cancel();
            return Err(e);
        }
        let (written, received) = tally.progress();
        if writes_done.is_none() && writers.tasks.is_empty() {
            writes_done = Some(Instant::now());
        }
        let published = match progress.due() {
            true => outbox_core::stats(client)
                .await
                .map(|s| s.published_last_hour)
                .ok(),
            false => None,
        };
        progress.show(
            tally.orders_placed.load(Ordering::Relaxed),
            written,
            published,
            received,
        );
        let Some(done_at) = writes_done else { continue };
        let redelivered =
            tally.duplicates.load(Ordering::Relaxed) >= tally.left_in_queue.load(Ordering::Relaxed);
        if received >= written && redelivered {
            break false;
        }
        if done_at.elapsed() > config.timeout {
            break true;
        }
    };
    progress.finish();
    Ok((relay, writes_done.unwrap_or_else(Instant::now), timed_out))
}
