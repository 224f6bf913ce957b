//! The SQS fixture on its own thread, a counting publisher wrapper, CPU accounting.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use outbox_core::{ClaimedEvent, PublishOutcome, Publisher};
use outbox_sqs::{SqsPublisher, SqsTransport};
use outbox_sqs_fixture::SqsFixture;

use super::*;

/// The SQS test fixture with one queue, recording switched off (it still counts).
///
/// The fixture runs on a thread (and runtime) of its own, so that the CPU it uses can be told apart
/// from the relay's: in production SQS runs elsewhere, here it shares the machine.
pub struct Sqs {
    /// The fixture server.
    pub fixture: SqsFixture,
    /// The URL of [`QUEUE`].
    pub queue_url: String,
    /// The URL of [`FIFO_QUEUE`].
    pub fifo_queue_url: String,
    sdk: aws_config::SdkConfig,
    thread: FixtureThread,
}

/// The fixture's thread: stops when dropped.
struct FixtureThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    join: Option<std::thread::JoinHandle<()>>,
    /// `/proc/self/task/<tid>/stat` of the thread, on Linux.
    stat: Option<PathBuf>,
}

impl Drop for FixtureThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(join) = self.join.take() {
            let _ = join.join();
        }
    }
}

/// User + system CPU time in a `/proc/…/stat` file (`utime` + `stime`).
fn stat_cpu(path: &std::path::Path) -> Option<Duration> {
    ticks(&stat_fields(path)?, 11, 12)
}

/// A publisher that counts how many of its `publish` calls run at the same moment: with the relay,
/// how many batches publish concurrently (a batch publishes its waves one after the other).
pub struct Counting<P> {
    inner: P,
    in_flight: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl<P> Counting<P> {
    /// Wraps `inner`.
    pub fn new(inner: P) -> Self {
        Counting {
            inner,
            in_flight: Arc::default(),
            most: Arc::default(),
        }
    }

    /// A handle on the high-water mark, readable after the publisher moved into a relay.
    pub fn most(&self) -> Arc<AtomicUsize> {
        self.most.clone()
    }
}

/// Decrements the in-flight count, also when the publish future is dropped (a timeout).
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<P: Publisher> Publisher for Counting<P> {
    type Error = P::Error;

    async fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> std::result::Result<Vec<PublishOutcome>, Self::Error> {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        let _guard = InFlight(self.in_flight.clone());
        self.most.fetch_max(now, Ordering::Relaxed);
        self.inner.publish(events).await
    }

    async fn check(&self) -> std::result::Result<(), Self::Error> {
        self.inner.check().await
    }

    fn keeps_aggregate_order(&self) -> bool {
        self.inner.keeps_aggregate_order()
    }

    async fn room(&self) -> Option<usize> {
        self.inner.room().await
    }

    fn settled(&self) -> Vec<uuid::Uuid> {
        self.inner.settled()
    }

    fn recovered(&self) -> impl Future<Output = ()> + Send {
        self.inner.recovered()
    }
}

/// CPU time (user + system) this process has used so far, when the OS tells (Linux).
pub fn process_cpu() -> Option<Duration> {
    stat_cpu(std::path::Path::new("/proc/self/stat"))
}

impl Sqs {
    /// Starts a fixture server on its own thread and creates the queue.
    pub async fn start() -> Sqs {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let join = std::thread::Builder::new()
            .name("sqs-fixture".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the SQS fixture");
                rt.block_on(async move {
                    let fixture = SqsFixture::start().await;
                    let stat = std::fs::read_link("/proc/thread-self")
                        .ok()
                        .map(|p| PathBuf::from("/proc").join(p).join("stat"));
                    let _ = ready_tx.send((fixture, stat));
                    // Serve until the bench drops its handle.
                    let _ = stop_rx.await;
                });
            })
            .expect("a thread for the SQS fixture");
        let (fixture, stat) = ready_rx.await.expect("the SQS fixture starts");
        fixture.set_recording(false);
        let queue_url = fixture.create_queue(QUEUE);
        let fifo_queue_url = fixture.create_queue(FIFO_QUEUE);
        let sdk = outbox_tests::sqs::sdk_config_for(&fixture.endpoint_url()).await;
        Sqs {
            fixture,
            queue_url,
            fifo_queue_url,
            sdk,
            thread: FixtureThread {
                stop: Some(stop_tx),
                join: Some(join),
                stat,
            },
        }
    }

    /// CPU time the fixture's thread has used so far, when the OS tells (Linux).
    pub fn fixture_cpu(&self) -> Option<Duration> {
        stat_cpu(self.thread.stat.as_deref()?)
    }

    /// The product's SQS publisher, aimed at the fixture's queue (no SDK retries).
    pub async fn publisher(&self, max_in_flight: usize) -> Result<SqsPublisher> {
        self.publisher_via(max_in_flight, SqsTransport::Direct)
            .await
    }

    /// [`publisher`](Self::publisher) sending through `transport`.
    pub async fn publisher_via(
        &self,
        max_in_flight: usize,
        transport: SqsTransport,
    ) -> Result<SqsPublisher> {
        Ok(SqsPublisher::builder()
            .sdk_config(self.sdk.clone())
            .transport(transport)
            .default_queue(self.queue_url.clone())
            .max_attempts(1)
            .max_in_flight(max_in_flight)
            .build()
            .await?)
    }

    /// The product's SQS publisher, aimed at the fixture's FIFO queue, sending an aggregate's events
    /// in one call (`batch_aggregates`).
    pub async fn fifo_batching_publisher(&self, max_in_flight: usize) -> Result<SqsPublisher> {
        Ok(SqsPublisher::builder()
            .sdk_config(self.sdk.clone())
            .default_queue(self.fifo_queue_url.clone())
            .batch_aggregates(true)
            .max_attempts(1)
            .max_in_flight(max_in_flight)
            .build()
            .await?)
    }

    /// A plain `aws-sdk-sqs` client for the fixture (for the naive relay), no SDK retries.
    pub fn client(&self) -> aws_sdk_sqs::Client {
        let conf = aws_sdk_sqs::config::Builder::from(&self.sdk)
            .retry_config(aws_sdk_sqs::config::retry::RetryConfig::standard().with_max_attempts(1))
            .build();
        aws_sdk_sqs::Client::from_conf(conf)
    }
}
