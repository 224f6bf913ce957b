//! [`SqsPublisherBuilder`]: settings in, a validated [`SqsPublisher`] out.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::config::{Region, StalledStreamProtectionConfig};
use tokio::sync::Semaphore;

use crate::breaker::Breaker;
use crate::config::{
    MAX_BREAKER_PROBE_INTERVAL, MAX_BROKEN_QUEUE_DEAD_LETTER_AFTER, Route, SqsConfig,
};
use crate::error::{Error, ErrorKind, Result};
use crate::metrics::SqsMetrics;
use crate::publisher::{Inner, Queue, SqsPublisher};
use crate::routing::Router;
use crate::sdk_error::{sdk_error, timeout_error};

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

    /// The queue (URL, or a name resolved at build) for event types no route matches.
    pub fn default_queue(mut self, queue: impl Into<String>) -> Self {
        self.config.default_queue = Some(queue.into());
        self
    }

    /// Adds a route: events whose type matches `pattern` (an exact type, or a prefix ending in
    /// `*`) go to `queue` (a URL, or a name resolved at build). See [`Route`].
    pub fn route(mut self, pattern: impl Into<String>, queue: impl Into<String>) -> Self {
        self.config.routes.push(Route::new(pattern, queue));
        self
    }

    /// The most `SendMessageBatch` calls in flight at once (default 8).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.config.max_in_flight = n;
        self
    }

    /// The time limit of one call, SDK retries included (default 10 s).
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

    /// With only FIFO queues, whole relay batches with several events of one aggregate in one
    /// `SendMessageBatch` per message group (default off). See [`SqsConfig::group_batches`] for
    /// the trade-off.
    pub fn group_batches(mut self, on: bool) -> Self {
        self.config.group_batches = on;
        self
    }

    /// Overrides the SQS endpoint (otherwise `AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL`, or AWS's).
    pub fn endpoint_url(mut self, url: impl Into<String>) -> Self {
        self.config.endpoint_url = Some(url.into());
        self
    }

    /// Overrides the AWS region (otherwise `AWS_REGION`, the profile, …).
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.config.region = Some(region.into());
        self
    }

    /// Overrides the SDK's attempts per call (otherwise `AWS_MAX_ATTEMPTS`, default 3); `1`
    /// leaves all retrying to the relay.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.config.max_attempts = Some(attempts);
        self
    }

    /// Uses this AWS configuration instead of loading the default chain (the endpoint, region
    /// and attempts settings above still override it).
    pub fn sdk_config(mut self, sdk_config: SdkConfig) -> Self {
        self.sdk_config = Some(sdk_config);
        self
    }

    /// Uses this client's configuration (the endpoint, region and attempts settings above still
    /// override it). Takes precedence over [`sdk_config`](Self::sdk_config).
    pub fn client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Validates the settings, loads the AWS configuration (unless one was given) and resolves
    /// queue names to URLs with `GetQueueUrl`. Does not otherwise contact SQS: call
    /// [`Publisher::check`](outbox_core::Publisher::check) for that.
    ///
    /// Fails with [`ErrorKind::Config`] on an invalid setting (no queue at all, `max_in_flight`
    /// 0, a zero call timeout, `max_attempts` 0, an endpoint that is not an `http(s)://` URL, an
    /// invalid route pattern, no region), and with the error of `GetQueueUrl` when a queue name
    /// cannot be resolved.
    pub async fn build(self) -> Result<SqsPublisher> {
        let config = self.config;
        validate(&config)?;

        let conf = match (self.client, self.sdk_config) {
            (Some(client), _) => client.config().to_builder(),
            (None, Some(sdk)) => aws_sdk_sqs::config::Builder::from(&sdk),
            (None, None) => {
                let mut loader = aws_config::defaults(BehaviorVersion::latest());
                if let Some(region) = &config.region {
                    loader = loader.region(Region::new(region.clone()));
                }
                if let Some(url) = &config.endpoint_url {
                    loader = loader.endpoint_url(url);
                }
                aws_sdk_sqs::config::Builder::from(&loader.load().await)
            }
        };
        let mut conf = conf;
        if let Some(region) = &config.region {
            conf = conf.region(Region::new(region.clone()));
        }
        if let Some(url) = &config.endpoint_url {
            conf = conf.endpoint_url(url);
        }
        // The call timeout bounds every call; the SDK's stalled-stream protection (a throughput
        // monitor with its own timers on every request and response body) only adds CPU per call.
        let conf = conf.stalled_stream_protection(StalledStreamProtectionConfig::disabled());
        let mut conf = conf.build();
        if let Some(attempts) = config.max_attempts {
            let retry = conf
                .retry_config()
                .cloned()
                .unwrap_or_else(RetryConfig::standard)
                .with_max_attempts(attempts);
            conf = conf.to_builder().retry_config(retry).build();
        }
        if conf.region().is_none() {
            return Err(Error::config(
                "no AWS region: set AWS_REGION (or a region in the AWS profile) or the builder's `region`",
            ));
        }
        let client = Client::from_conf(conf);

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
            let url = if queue.contains("://") {
                queue.to_owned()
            } else {
                resolve_queue_url(&client, queue, config.call_timeout).await?
            };
            let resolved = match queues.iter().find(|q| q.url == url) {
                Some(q) => q.clone(),
                None => {
                    let q = Arc::new(Queue {
                        fifo: url.trim_end_matches('/').ends_with(".fifo"),
                        breaker: Breaker::new(
                            url.clone(),
                            config.breaker_probe_interval,
                            config.broken_queue_dead_letter_after,
                            metrics.unavailable(&url),
                        ),
                        url,
                    });
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
        .map_err(Error::config)?;

        Ok(SqsPublisher {
            inner: Arc::new(Inner {
                client,
                router,
                queues,
                permits: Semaphore::new(config.max_in_flight),
                max_in_flight: config.max_in_flight,
                group_batches: config.group_batches,
                call_timeout: config.call_timeout,
                metrics,
            }),
        })
    }
}

fn validate(config: &SqsConfig) -> Result<()> {
    if config.max_in_flight == 0 {
        return Err(Error::config("max_in_flight must be at least 1"));
    }
    if config.call_timeout.is_zero() {
        return Err(Error::config("call_timeout must be greater than zero"));
    }
    if config.broken_queue_dead_letter_after.is_zero()
        || config.broken_queue_dead_letter_after > MAX_BROKEN_QUEUE_DEAD_LETTER_AFTER
    {
        return Err(Error::config(format!(
            "broken_queue_dead_letter_after must be between 1 s and {} s",
            MAX_BROKEN_QUEUE_DEAD_LETTER_AFTER.as_secs()
        )));
    }
    if config.breaker_probe_interval.is_zero()
        || config.breaker_probe_interval > MAX_BREAKER_PROBE_INTERVAL
    {
        return Err(Error::config(format!(
            "breaker_probe_interval must be greater than zero and at most {} s",
            MAX_BREAKER_PROBE_INTERVAL.as_secs()
        )));
    }
    if config.max_attempts == Some(0) {
        return Err(Error::config("max_attempts must be at least 1"));
    }
    if let Some(url) = &config.endpoint_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Error::config(format!(
                "endpoint_url `{url}` is not an http:// or https:// URL"
            )));
        }
    }
    if config.default_queue.is_none() && config.routes.is_empty() {
        return Err(Error::config(
            "no SQS queue configured: set a default queue or at least one route",
        ));
    }
    if config
        .default_queue
        .as_deref()
        .is_some_and(|q| q.trim().is_empty())
    {
        return Err(Error::config("the default queue is empty"));
    }
    if let Some(route) = config.routes.iter().find(|r| r.queue.trim().is_empty()) {
        return Err(Error::config(format!(
            "route `{}` has an empty queue",
            route.pattern
        )));
    }
    // Patterns are checked before any network call.
    Router::new(
        config
            .routes
            .iter()
            .map(|r| (r.pattern.trim().to_owned(), ())),
        None,
    )
    .map_err(Error::config)?;
    Ok(())
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
