//! [`SqsPublisher`]: the relay's [`Publisher`] on `aws-sdk-sqs`.

use std::collections::{HashMap, HashSet};
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aws_config::{BehaviorVersion, SdkConfig};
use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::Region;
use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchOutput;
use aws_sdk_sqs::types::QueueAttributeName;
use outbox_core::{ClaimedEvent, PublishOutcome, Publisher};
use tokio::sync::Semaphore;

use crate::batch::{Chain, plan};
use crate::classify::{Class, classify, classify_sdk_error, is_auth_failure, is_queue_missing};
use crate::config::{Route, SqsConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::message::{Prepared, prepare};
use crate::routing::Router;

/// Publishes outbox events to Amazon SQS with `SendMessageBatch`. See the [crate docs](crate) for
/// the message shape, routing, batching and error handling.
///
/// Cheap to clone (the clones share the client and the in-flight limit).
#[derive(Clone)]
pub struct SqsPublisher {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    router: Router<Arc<Queue>>,
    /// Every distinct queue, in configuration order (the default last).
    queues: Vec<Arc<Queue>>,
    permits: Semaphore,
    max_in_flight: usize,
    call_timeout: Duration,
}

#[derive(Debug)]
struct Queue {
    url: String,
    fifo: bool,
}

impl fmt::Debug for SqsPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqsPublisher")
            .field("queues", &self.queue_urls())
            .field("max_in_flight", &self.inner.max_in_flight)
            .field("call_timeout", &self.inner.call_timeout)
            .finish_non_exhaustive()
    }
}

/// Builds an [`SqsPublisher`]: settings in, [`build`](Self::build) validates them, loads the AWS
/// configuration and resolves queue names.
#[derive(Debug, Default)]
#[must_use = "a builder does nothing until `build` is awaited"]
pub struct SqsPublisherBuilder {
    config: SqsConfig,
    sdk_config: Option<SdkConfig>,
    client: Option<Client>,
}

impl SqsPublisher {
    /// A builder with the [default settings](SqsConfig::default).
    pub fn builder() -> SqsPublisherBuilder {
        SqsPublisherBuilder::default()
    }

    /// The URLs of every configured queue (routes first, the default queue last).
    pub fn queue_urls(&self) -> Vec<&str> {
        self.inner.queues.iter().map(|q| q.url.as_str()).collect()
    }

    /// The SQS client the publisher uses.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }
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
    /// [`Publisher::check`] for that.
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
                call_timeout: config.call_timeout,
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

// ---- errors ---------------------------------------------------------------------------------------

fn timeout_error(what: &str, timeout: Duration) -> Error {
    Error::new(
        ErrorKind::Timeout,
        format!("{what}: no answer within {} ms", timeout.as_millis()),
    )
}

/// The messages of `err` and its sources, joined by ": " (repeats dropped).
fn error_chain(err: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if parts.last().is_none_or(|last| !last.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

fn has_credentials_error(err: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if e.downcast_ref::<CredentialsError>().is_some() {
            return true;
        }
        next = e.source();
    }
    false
}

/// An SDK failure of `what` (e.g. "SendMessageBatch to queue `…`") as this crate's error.
fn sdk_error<E>(what: &str, err: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let (kind, detail) = match &err {
        SdkError::ServiceError(ctx) => {
            let code = ctx.err().code().unwrap_or("unknown error");
            let message = ctx.err().message().unwrap_or("");
            let status = ctx.raw().status().as_u16();
            let kind = if is_queue_missing(code) {
                ErrorKind::QueueNotFound
            } else if is_auth_failure(code) {
                ErrorKind::Credentials
            } else {
                ErrorKind::Service
            };
            let detail = if is_queue_missing(code) {
                format!("the queue does not exist ({code}, HTTP {status})")
            } else {
                format!("{code} (HTTP {status}): {message}")
            };
            (kind, detail)
        }
        SdkError::TimeoutError(_) => (ErrorKind::Timeout, error_chain(&err)),
        SdkError::DispatchFailure(_) if has_credentials_error(&err) => (
            ErrorKind::Credentials,
            format!("no usable AWS credentials: {}", error_chain(&err)),
        ),
        SdkError::DispatchFailure(_) => (
            ErrorKind::Unavailable,
            format!("cannot reach SQS: {}", error_chain(&err)),
        ),
        _ => (ErrorKind::Service, error_chain(&err)),
    };
    Error::new(kind, format!("{what}: {detail}")).with_source(err)
}

// ---- publishing -----------------------------------------------------------------------------------

/// A `SendMessageBatch` call that failed as a whole.
struct CallFailure {
    class: Class,
    error: Error,
}

/// What the calls of one chain did.
#[derive(Default)]
struct Report {
    outcomes: Vec<(usize, PublishOutcome)>,
    calls: usize,
    transient_failures: usize,
    first_failure: Option<Error>,
}

impl Report {
    fn count(&mut self, result: &std::result::Result<SendMessageBatchOutput, CallFailure>) {
        self.calls += 1;
        if let Err(f) = result {
            if f.class == Class::Retry {
                self.transient_failures += 1;
            }
        }
    }

    fn merge(&mut self, other: Report) {
        self.outcomes.extend(other.outcomes);
        self.calls += other.calls;
        self.transient_failures += other.transient_failures;
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
    }
}

impl SqsPublisher {
    async fn publish_events(
        &self,
        events: &[ClaimedEvent],
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Vec<PublishOutcome>> {
        let mut outcomes: Vec<Option<PublishOutcome>> = vec![None; events.len()];

        // Route and build the messages, per queue, in `seq` order.
        let mut order: Vec<usize> = (0..events.len()).collect();
        order.sort_by_key(|&i| events[i].seq);
        let mut per_queue: Vec<(Arc<Queue>, Vec<Prepared>)> = Vec::new();
        for i in order {
            let event = &events[i];
            let Some(queue) = self.inner.router.route(&event.event_type) else {
                outcomes[i] = Some(PublishOutcome::Permanent(format!(
                    "no SQS route for event type `{}`",
                    event.event_type
                )));
                continue;
            };
            match prepare(i, event, queue.fifo) {
                Err(reason) => outcomes[i] = Some(PublishOutcome::Permanent(reason)),
                Ok(prepared) => match per_queue.iter_mut().find(|(q, _)| Arc::ptr_eq(q, queue)) {
                    Some((_, list)) => list.push(prepared),
                    None => per_queue.push((queue.clone(), vec![prepared])),
                },
            }
        }

        let chains = per_queue.into_iter().flat_map(|(queue, items)| {
            plan(items, queue.fifo)
                .into_iter()
                .map(move |chain| (queue.clone(), chain))
        });
        let reports = futures::future::join_all(
            chains.map(|(queue, chain)| self.run_chain(queue, chain, deadline)),
        )
        .await;
        let mut total = Report::default();
        for report in reports {
            total.merge(report);
        }

        if total.calls > 0 && total.transient_failures == total.calls {
            let first = total.first_failure.unwrap_or_else(|| {
                Error::new(ErrorKind::Service, "every SendMessageBatch call failed")
            });
            let n = total.calls;
            tracing::warn!(calls = n, error = %first, "every SQS call of this publish failed");
            return Err(first.context(format!(
                "all {n} SendMessageBatch call(s) of this publish failed; the first"
            )));
        }
        for (i, outcome) in total.outcomes {
            outcomes[i] = Some(outcome);
        }
        Ok(outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    PublishOutcome::Retry("the SQS publisher lost track of this event".into())
                })
            })
            .collect())
    }

    /// Sends a chain's batches one after the other; on a FIFO queue, a message whose group had a
    /// failure earlier in the chain is not sent (so that it cannot overtake the failed one).
    ///
    /// A batch that could not be answered before `deadline` (a call timeout from now would pass
    /// it) is not sent: its events are put back without an attempt, and what was sent is kept.
    async fn run_chain(
        &self,
        queue: Arc<Queue>,
        chain: Chain<Prepared>,
        deadline: Option<tokio::time::Instant>,
    ) -> Report {
        let mut report = Report::default();
        let mut failed_groups: HashSet<String> = HashSet::new();
        for batch in chain {
            // The in-flight limit, taken before the deadline check so that a batch waiting for a
            // slot is judged by when it would really be sent (and held for its re-sends).
            let _permit = self.inner.permits.acquire().await.ok();
            let late = deadline.is_some_and(|d| {
                tokio::time::Instant::now()
                    .checked_add(self.inner.call_timeout)
                    .is_none_or(|answered_by| answered_by > d)
            });
            if late {
                for p in batch {
                    report.outcomes.push((
                        p.index,
                        PublishOutcome::Unavailable(
                            "not sent: the relay's publish deadline would pass first".into(),
                        ),
                    ));
                }
                continue;
            }
            let mut send = Vec::with_capacity(batch.len());
            for p in batch {
                match &p.group {
                    Some(group) if failed_groups.contains(group) => {
                        report.outcomes.push((p.index, held_back(group)));
                    }
                    _ => send.push(p),
                }
            }
            if send.is_empty() {
                continue;
            }
            self.send_batch(&queue, send, &mut report, &mut failed_groups)
                .await;
        }
        report
    }

    /// Sends one batch and records an outcome per entry. A batch refused as a whole for its
    /// content is re-sent one entry per call, so that only the culprit is dead-lettered.
    async fn send_batch(
        &self,
        queue: &Queue,
        entries: Vec<Prepared>,
        report: &mut Report,
        failed_groups: &mut HashSet<String>,
    ) {
        let result = self.call(queue, &entries).await;
        report.count(&result);
        match result {
            Err(failure) if failure.class == Class::Permanent && entries.len() > 1 => {
                tracing::warn!(
                    queue = %queue.url, entries = entries.len(), error = %failure.error,
                    "SQS refused a whole batch; sending its entries one by one"
                );
                for p in entries {
                    if let Some(group) = p.group.as_ref().filter(|g| failed_groups.contains(*g)) {
                        report.outcomes.push((p.index, held_back(group)));
                        continue;
                    }
                    let single = std::slice::from_ref(&p);
                    let result = self.call(queue, single).await;
                    report.count(&result);
                    settle(queue, result, vec![p], report, failed_groups);
                }
            }
            result => settle(queue, result, entries, report, failed_groups),
        }
    }

    /// One `SendMessageBatch` call, within the call timeout (the caller holds an in-flight
    /// permit).
    async fn call(
        &self,
        queue: &Queue,
        entries: &[Prepared],
    ) -> std::result::Result<SendMessageBatchOutput, CallFailure> {
        let request = self
            .inner
            .client
            .send_message_batch()
            .queue_url(&queue.url)
            .set_entries(Some(entries.iter().map(|p| p.entry.clone()).collect()));
        let what = format!("SendMessageBatch to queue `{}`", queue.url);
        match tokio::time::timeout(self.inner.call_timeout, request.send()).await {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(e)) => Err(CallFailure {
                class: classify_sdk_error(&e),
                error: sdk_error(&what, e),
            }),
            Err(_) => Err(CallFailure {
                class: Class::Retry,
                error: timeout_error(&what, self.inner.call_timeout),
            }),
        }
    }
}

fn held_back(group: &str) -> PublishOutcome {
    PublishOutcome::Retry(format!(
        "not sent: an earlier event of message group `{group}` failed in the same publish"
    ))
}

/// Records the outcome of every entry of a call.
fn settle(
    queue: &Queue,
    result: std::result::Result<SendMessageBatchOutput, CallFailure>,
    entries: Vec<Prepared>,
    report: &mut Report,
    failed_groups: &mut HashSet<String>,
) {
    let mut record = |p: &Prepared, outcome: PublishOutcome| {
        if outcome != PublishOutcome::Published {
            if let Some(group) = &p.group {
                failed_groups.insert(group.clone());
            }
        }
        report.outcomes.push((p.index, outcome));
    };
    match result {
        Ok(output) => {
            let accepted: HashSet<&str> = output.successful().iter().map(|s| s.id()).collect();
            let failed: HashMap<&str, _> = output.failed().iter().map(|f| (f.id(), f)).collect();
            for p in &entries {
                let id = p.entry.id();
                let outcome = if accepted.contains(id) {
                    PublishOutcome::Published
                } else if let Some(f) = failed.get(id) {
                    let (code, message) = (f.code(), f.message().unwrap_or(""));
                    tracing::warn!(
                        queue = %queue.url, event_id = %p.event_id, code, sender_fault = f.sender_fault(),
                        message, "SQS failed a message"
                    );
                    match classify(code, f.sender_fault()) {
                        Class::Permanent => PublishOutcome::Permanent(format!(
                            "SQS rejected the message: {code}: {message}"
                        )),
                        Class::Retry => PublishOutcome::Retry(format!(
                            "SQS did not accept the message: {code}: {message}"
                        )),
                    }
                } else {
                    PublishOutcome::Retry("SQS did not report on this message".into())
                };
                record(p, outcome);
            }
        }
        Err(failure) => {
            tracing::warn!(
                queue = %queue.url, entries = entries.len(), error = %failure.error,
                "SendMessageBatch failed"
            );
            let reason = failure.error.to_string();
            for p in &entries {
                let outcome = match failure.class {
                    Class::Retry => PublishOutcome::Retry(reason.clone()),
                    Class::Permanent => PublishOutcome::Permanent(reason.clone()),
                };
                record(p, outcome);
            }
            if failure.class == Class::Retry && report.first_failure.is_none() {
                report.first_failure = Some(failure.error);
            }
        }
    }
}

// ---- checking -------------------------------------------------------------------------------------

impl SqsPublisher {
    async fn check_queues(&self) -> Result<()> {
        let checks = self.inner.queues.iter().map(|q| self.check_queue(q));
        for result in futures::future::join_all(checks).await {
            result?;
        }
        Ok(())
    }

    async fn check_queue(&self, queue: &Queue) -> Result<()> {
        let call = self
            .inner
            .client
            .get_queue_attributes()
            .queue_url(&queue.url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send();
        let what = format!("GetQueueAttributes on queue `{}`", queue.url);
        match tokio::time::timeout(self.inner.call_timeout, call).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(sdk_error(&what, e)),
            Err(_) => Err(timeout_error(&what, self.inner.call_timeout)),
        }
    }
}

impl Publisher for SqsPublisher {
    type Error = Error;

    fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Error>> + Send {
        self.publish_events(events, None)
    }

    fn publish_within(
        &self,
        events: &[ClaimedEvent],
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Error>> + Send {
        self.publish_events(events, Some(deadline))
    }

    /// One call timeout per round of `SendMessageBatch` calls (10 entries each, `max_in_flight`
    /// at a time).
    fn min_publish_timeout(&self, events: usize) -> Duration {
        let calls = events.div_ceil(10).max(1);
        let rounds = calls.div_ceil(self.inner.max_in_flight.max(1));
        self.inner
            .call_timeout
            .saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX))
    }

    fn check(&self) -> impl Future<Output = Result<(), Error>> + Send {
        self.check_queues()
    }
}
