//! [`SqsPublisherBuilder`]: settings in, a validated [`SqsPublisher`] out.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_sqs::Client;
use tokio::sync::Semaphore;

use crate::breaker::Breaker;
use crate::clients::clients;
use crate::config::{Route, SqsConfig};
use crate::destination::{DestinationKind, Target, is_fifo, parse_target};
use crate::destination_down::DestinationDown;
use crate::detached_call::destination_slots;
use crate::error::{Error, ErrorKind, Result, config_error};
use crate::message::SQS_LIMITS;
use crate::metrics::SqsMetrics;
use crate::offload::{OFFLOAD_LIMITS, Offloader};
use crate::publisher::{Inner, Queue, SqsPublisher};
use crate::routing::Router;
use crate::sdk_error::{sdk_error, timeout_error};
use crate::sns::SNS_LIMITS;
use crate::transport::SqsTransport;
use crate::upload_slots::UploadSlots;
use crate::validate::validate;

/// Builds an [`SqsPublisher`]: settings in, [`build`](Self::build) validates them, loads the AWS
/// configuration and resolves queue names.
#[derive(Debug, Default)]
#[must_use = "a builder does nothing until `build` is awaited"]
pub struct SqsPublisherBuilder {
    config: SqsConfig,
    sdk_config: Option<SdkConfig>,
    client: Option<Client>,
}

impl SqsPublisherBuilder {
    /// Replaces every setting with `config` (e.g. [`SqsConfig::from_env`]).
    pub fn config(mut self, config: SqsConfig) -> Self {
        self.config = config;
        self
    }

    /// The queue (URL, or a name resolved at build) or topic (ARN) for event types no route
    /// matches.
    pub fn default_queue(mut self, queue: impl Into<String>) -> Self {
        self.config.default_queue = Some(queue.into());
        self
    }

    /// Adds a route: events whose type matches `pattern` (an exact type, or a prefix ending in
    /// `*`) go to `queue`: a queue URL, a queue name (resolved at build) or an SNS topic ARN. See
    /// [`Route`].
    pub fn route(mut self, pattern: impl Into<String>, queue: impl Into<String>) -> Self {
        self.config.routes.push(Route::new(pattern, queue));
        self
    }

    /// The most `SendMessageBatch` calls in flight at once (default 8). See
    /// [`SqsConfig::max_in_flight`].
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.config.max_in_flight = n;
        self
    }

    /// With [`offload_bucket`](Self::offload_bucket): the most S3 uploads at once (default 32).
    /// See [`SqsConfig::max_uploads`].
    pub fn max_uploads(mut self, n: usize) -> Self {
        self.config.max_uploads = n;
        self
    }

    /// The time limit of one call, retries included (default 10 s).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.config.call_timeout = timeout;
        self
    }

    /// How long a queue may stay broken as a whole (missing, access or key denied, throttled)
    /// before its events are dead-lettered with the SQS error (default 1 h). See
    /// [`SqsConfig::broken_queue_dead_letter_after`].
    pub fn broken_queue_dead_letter_after(mut self, after: Duration) -> Self {
        self.config.broken_queue_dead_letter_after = after;
        self
    }

    /// How often an open circuit breaker lets one call through to a broken queue (default 5 s).
    /// See [`SqsConfig::breaker_probe_interval`].
    pub fn breaker_probe_interval(mut self, interval: Duration) -> Self {
        self.config.breaker_probe_interval = interval;
        self
    }

    /// Offloads large payloads to this S3 bucket (see
    /// [the crate docs](crate#s3-offload-of-large-payloads)). Off by default.
    pub fn offload_bucket(mut self, bucket: impl Into<String>) -> Self {
        self.config.offload_bucket = Some(bucket.into());
        self
    }

    /// With [`offload_bucket`](Self::offload_bucket): offload messages larger than `bytes`
    /// (default: each destination's own limit). See [`SqsConfig::offload_threshold`].
    pub fn offload_threshold(mut self, bytes: usize) -> Self {
        self.config.offload_threshold = Some(bytes);
        self
    }

    /// How long a publish waits for its batch calls before the calls still running go on
    /// without it (default 1 s). See [`SqsConfig::call_wait`].
    pub fn call_wait(mut self, wait: Duration) -> Self {
        self.config.call_wait = wait;
        self
    }

    /// With [`offload_bucket`](Self::offload_bucket): how long a publish waits for an upload
    /// before its event is put back while the upload goes on. See [`SqsConfig::offload_wait`].
    pub fn offload_wait(mut self, wait: Duration) -> Self {
        self.config.offload_wait = wait;
        self
    }

    /// Sends several events of one aggregate in one FIFO call when the relay keeps per-aggregate
    /// order and there is a single FIFO destination. See [`SqsConfig::batch_aggregates`].
    pub fn batch_aggregates(mut self, on: bool) -> Self {
        self.config.batch_aggregates = on;
        self
    }

    /// Overrides the endpoint of SQS, SNS and S3 (otherwise `AWS_ENDPOINT_URL_SQS` /
    /// `AWS_ENDPOINT_URL_SNS` / `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, or AWS's).
    pub fn endpoint_url(mut self, url: impl Into<String>) -> Self {
        self.config.endpoint_url = Some(url.into());
        self
    }

    /// Overrides the AWS region (otherwise `AWS_REGION`, the profile, …).
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.config.region = Some(region.into());
        self
    }

    /// Overrides the attempts per call, of either transport (otherwise `AWS_MAX_ATTEMPTS`,
    /// default 3); `1` leaves all retrying to the relay.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.config.max_attempts = Some(attempts);
        self
    }

    /// How `SendMessageBatch` is sent (default [`SqsTransport::Direct`]). See [`SqsTransport`].
    pub fn transport(mut self, transport: SqsTransport) -> Self {
        self.config.transport = transport;
        self
    }

    /// Uses this AWS configuration instead of loading the default chain (the endpoint, region
    /// and attempts settings above still override it).
    pub fn sdk_config(mut self, sdk_config: SdkConfig) -> Self {
        self.sdk_config = Some(sdk_config);
        self
    }

    /// Uses this client's configuration (the endpoint, region and attempts settings above still
    /// override it). Takes precedence over [`sdk_config`](Self::sdk_config). `SendMessageBatch`
    /// then goes through this client ([`SqsTransport::Sdk`]), so that everything configured on
    /// it — interceptors, HTTP client, credentials — applies.
    pub fn client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Validates the settings, loads the AWS configuration (unless one was given) and resolves
    /// queue names to URLs with `GetQueueUrl`. Does not otherwise contact AWS: call
    /// [`Publisher::check`](outbox_core::Publisher::check) for that (it also checks the topics
    /// and the offload bucket).
    ///
    /// Fails with [`ErrorKind::Config`] on an invalid setting (no queue at all, `max_in_flight`
    /// 0, a zero call timeout, `max_attempts` 0, an endpoint that is not an `http(s)://` URL, an
    /// invalid route pattern, a target that is neither a queue URL, a queue name nor an SNS topic
    /// ARN, an invalid offload bucket name, an offload threshold of 0 or above 1 MiB (the most
    /// any queue or topic takes; one above a destination's own limit gives way to it), a
    /// threshold without a bucket, no region), and with the error of `GetQueueUrl` when a
    /// queue name cannot be resolved.
    pub async fn build(self) -> Result<SqsPublisher> {
        let config = self.config;
        validate(&config)?;

        let clients = clients(&config, self.client, self.sdk_config).await?;
        let client = clients.sqs;
        let direct = clients.direct;

        // Resolve names, once each, in configuration order.
        let metrics = SqsMetrics::new();
        let mut queues: Vec<Arc<Queue>> = Vec::new();
        let mut by_name: HashMap<String, Arc<Queue>> = HashMap::new();
        let configured = config
            .routes
            .iter()
            .map(|r| r.queue.trim())
            .chain(config.default_queue.as_deref().map(str::trim));
        for queue in configured {
            if by_name.contains_key(queue) {
                continue;
            }
            // Checked by `validate`.
            let target = parse_target(queue).map_err(config_error)?;
            let (url, kind) = match target {
                Target::QueueUrl(url) => (url, DestinationKind::Queue),
                Target::QueueName(name) => (
                    resolve_queue_url(&client, &name, config.call_timeout).await?,
                    DestinationKind::Queue,
                ),
                Target::Topic(arn) => (arn, DestinationKind::Topic),
            };
            let resolved = match queues.iter().find(|q| q.url == url) {
                Some(q) => q.clone(),
                None => {
                    let gauge = match kind {
                        DestinationKind::Topic => metrics.topic_unavailable(&url),
                        _ => metrics.unavailable(&url),
                    };
                    let breaker = Breaker::new(
                        url.clone(),
                        config.breaker_probe_interval,
                        config.broken_queue_dead_letter_after,
                        gauge,
                    );
                    let down_gauge = match kind {
                        DestinationKind::Topic => metrics.topic_down(&url),
                        _ => metrics.queue_down(&url),
                    };
                    let down = DestinationDown::for_destination(
                        client.clone(),
                        clients.sns.clone(),
                        &url,
                        kind,
                        (config.breaker_probe_interval, config.call_timeout),
                        down_gauge,
                    );
                    let q = Arc::new(Queue::new(url.clone(), kind, is_fifo(&url), breaker, down));
                    queues.push(q.clone());
                    q
                }
            };
            by_name.insert(queue.to_owned(), resolved);
        }
        let router = Router::new(
            config
                .routes
                .iter()
                .map(|r| (r.pattern.trim().to_owned(), by_name[r.queue.trim()].clone())),
            config
                .default_queue
                .as_deref()
                .map(|q| by_name[q.trim()].clone()),
        )
        .map_err(config_error)?;

        let slots = destination_slots(config.max_in_flight, queues.len());
        for queue in &queues {
            queue.slots.add_permits(slots);
        }
        let has_topic = queues.iter().any(|q| q.kind == DestinationKind::Topic);
        let limits = match (&config.offload_bucket, has_topic) {
            (Some(_), _) => OFFLOAD_LIMITS,
            (None, true) => SNS_LIMITS,
            (None, false) => SQS_LIMITS,
        };
        let offload = match (clients.s3, &config.offload_bucket) {
            (Some(s3), Some(bucket)) => Some(Arc::new(Offloader {
                down: std::sync::Arc::new(crate::s3_down::S3Down::for_bucket(
                    s3.clone(),
                    bucket.trim(),
                    (config.breaker_probe_interval, config.call_timeout),
                    metrics.s3_down(bucket.trim()),
                )),
                client: s3,
                bucket: bucket.trim().to_owned(),
                threshold: config.offload_threshold,
                slow: Default::default(),
                // A bucket that refuses uploads is a broken destination, like a queue.
                breaker: Breaker::new(
                    format!("s3://{}", bucket.trim()),
                    config.breaker_probe_interval,
                    config.broken_queue_dead_letter_after,
                    metrics.bucket_unavailable(bucket.trim()),
                ),
                slots: UploadSlots::new(config.max_uploads),
                offload_wait: config.offload_wait,
                detached: Default::default(),
                pace: Default::default(),
            })),
            _ => None,
        };

        // One FIFO destination: each aggregate's events go to one place, where a call keeps their
        // order; with two, an aggregate's events could race each other to different destinations.
        let keeps_aggregate_order =
            config.batch_aggregates && queues.len() == 1 && queues.iter().all(|q| q.fifo);
        if config.batch_aggregates && !keeps_aggregate_order {
            // Which condition failed: `destinations=1` alone read as if it held (black-box run).
            let why = if queues.len() == 1 {
                "the destination is not FIFO (a standard queue or topic keeps no order)".to_owned()
            } else {
                format!(
                    "{} destinations (an aggregate's events could race to different ones)",
                    queues.len()
                )
            };
            tracing::warn!(
                destinations = queues.len(),
                "batch_aggregates is off: it needs one FIFO destination (queue or topic), and \
                 {why}; each position in the aggregates is sent in its own wave"
            );
        }
        let inner = Arc::new(Inner {
            keeps_aggregate_order,
            client,
            direct,
            sns: clients.sns,
            offload,
            limits,
            router,
            queues,
            permits: Semaphore::new(config.max_in_flight),
            max_in_flight: config.max_in_flight,
            call_timeout: config.call_timeout,
            call_wait: config.call_wait,
            detached_calls: Default::default(),
            last_answer: Default::default(),
            metrics,
        });
        crate::idle_breakers::spawn(&inner, config.breaker_probe_interval);
        Ok(SqsPublisher { inner })
    }
}

async fn resolve_queue_url(client: &Client, name: &str, timeout: Duration) -> Result<String> {
    let call = client.get_queue_url().queue_name(name).send();
    let what = format!("GetQueueUrl for queue name `{name}`");
    match tokio::time::timeout(timeout, call).await {
        Err(_) => Err(timeout_error(&what, timeout)),
        Ok(Err(e)) => Err(sdk_error(&what, e)),
        Ok(Ok(out)) => out
            .queue_url()
            .map(str::to_owned)
            .ok_or_else(|| Error::new(ErrorKind::Service, format!("{what}: no URL in the answer"))),
    }
}
