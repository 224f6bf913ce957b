//! The publisher's settings: plain data with defaults, loadable from the environment.

use std::time::Duration;

use crate::transport::SqsTransport;

/// Environment variable: the queue for event types that no route matches.
pub const ENV_DEFAULT_QUEUE_URL: &str = "OUTBOX_SQS_DEFAULT_QUEUE_URL";
/// Environment variable: routes as `pattern=queue` pairs separated by commas, e.g.
/// `order.*=https://sqs…/orders,payment.captured=https://sqs…/payments`.
pub const ENV_ROUTES: &str = "OUTBOX_SQS_ROUTES";
/// Environment variable: the most `SendMessageBatch` calls in flight at once.
pub const ENV_MAX_IN_FLIGHT: &str = "OUTBOX_SQS_MAX_IN_FLIGHT";
/// Environment variable: the most S3 uploads of offloaded payloads in flight at once.
pub const ENV_MAX_UPLOADS: &str = "OUTBOX_SQS_MAX_UPLOADS";
/// Environment variable: the time limit of one call, in milliseconds.
pub const ENV_CALL_TIMEOUT_MS: &str = "OUTBOX_SQS_CALL_TIMEOUT_MS";

/// Environment variable: how long a queue may stay broken (missing, access or key denied,
/// throttled) before its events are dead-lettered, in seconds.
pub const ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS: &str =
    "OUTBOX_SQS_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS";
/// Environment variable: how often a broken queue's circuit breaker lets one call through to see
/// whether the queue is back, in milliseconds.
pub const ENV_BREAKER_PROBE_INTERVAL_MS: &str = "OUTBOX_SQS_BREAKER_PROBE_INTERVAL_MS";
/// Environment variable: the S3 bucket large payloads are offloaded to (turns offloading on).
pub const ENV_OFFLOAD_BUCKET: &str = "OUTBOX_SQS_OFFLOAD_BUCKET";
/// Environment variable: offload messages larger than this many bytes (default: the
/// destination's limit).
pub const ENV_OFFLOAD_THRESHOLD_BYTES: &str = "OUTBOX_SQS_OFFLOAD_THRESHOLD_BYTES";

/// Environment variable: how long a publish waits for an offloaded payload's upload before its
/// event is put back while the upload goes on, in milliseconds.
pub const ENV_OFFLOAD_WAIT_MS: &str = "OUTBOX_SQS_OFFLOAD_WAIT_MS";

/// Environment variable: how long a publish waits for its batch calls before the calls still
/// running go on without it, in milliseconds (see [`SqsConfig::call_wait`]).
pub const ENV_CALL_WAIT_MS: &str = "OUTBOX_SQS_CALL_WAIT_MS";

/// Environment variable: `true` to send several events of one aggregate in one FIFO call (see
/// [`SqsConfig::batch_aggregates`]).
pub const ENV_BATCH_AGGREGATES: &str = "OUTBOX_SQS_BATCH_AGGREGATES";

/// Environment variable: how `SendMessageBatch` is sent, `direct` (the default) or `sdk` (see
/// [`SqsTransport`]).
pub const ENV_TRANSPORT: &str = "OUTBOX_SQS_TRANSPORT";

/// Every `OUTBOX_SQS_*` variable [`SqsConfig::from_env`] reads.
pub const ENV_VARIABLES: &[&str] = &[
    ENV_DEFAULT_QUEUE_URL,
    ENV_ROUTES,
    ENV_MAX_IN_FLIGHT,
    ENV_MAX_UPLOADS,
    ENV_CALL_TIMEOUT_MS,
    ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS,
    ENV_BREAKER_PROBE_INTERVAL_MS,
    ENV_OFFLOAD_BUCKET,
    ENV_OFFLOAD_THRESHOLD_BYTES,
    ENV_OFFLOAD_WAIT_MS,
    ENV_CALL_WAIT_MS,
    ENV_BATCH_AGGREGATES,
    ENV_TRANSPORT,
];

/// Default of [`SqsConfig::max_in_flight`].
pub const DEFAULT_MAX_IN_FLIGHT: usize = 8;
/// Upper bound of [`SqsConfig::max_in_flight`] and [`SqsConfig::max_uploads`].
pub const MAX_IN_FLIGHT: usize = 10_000;
/// Default of [`SqsConfig::max_uploads`].
pub const DEFAULT_MAX_UPLOADS: usize = 32;
/// Upper bound of [`SqsConfig::call_timeout`]: one hour.
pub const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(3600);
/// Lower bound of [`SqsConfig::call_timeout`]: 100 ms (1 ms was accepted, and every call given up
/// before SQS could answer was sent again: 13 messages for 5 events, black-box run).
pub const MIN_CALL_TIMEOUT: Duration = Duration::from_millis(100);
/// Default of [`SqsConfig::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`SqsConfig::broken_queue_dead_letter_after`]: one hour.
pub const DEFAULT_BROKEN_QUEUE_DEAD_LETTER_AFTER: Duration = Duration::from_secs(3600);
/// Upper bound of [`SqsConfig::broken_queue_dead_letter_after`]: 30 days.
pub const MAX_BROKEN_QUEUE_DEAD_LETTER_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);
/// Default of [`SqsConfig::breaker_probe_interval`]: the relay's
/// [`UNAVAILABLE_RETRY_DELAY`](outbox_core::UNAVAILABLE_RETRY_DELAY), so the events put back come
/// round about when the next probe is due.
pub const DEFAULT_BREAKER_PROBE_INTERVAL: Duration = outbox_core::UNAVAILABLE_RETRY_DELAY;
/// Default of [`SqsConfig::offload_wait`]: one second.
pub const DEFAULT_OFFLOAD_WAIT: Duration = Duration::from_secs(1);
/// Default of [`SqsConfig::call_wait`]: one second.
pub const DEFAULT_CALL_WAIT: Duration = Duration::from_secs(1);
/// Upper bound of [`SqsConfig::breaker_probe_interval`]: one hour.
pub const MAX_BREAKER_PROBE_INTERVAL: Duration = Duration::from_secs(3600);
/// Lower bound of [`SqsConfig::breaker_probe_interval`]: 100 ms (1 ms was accepted, and a broken
/// queue was asked about 1 000 times a second, black-box run).
pub const MIN_BREAKER_PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// Lower bound of [`SqsConfig::broken_queue_dead_letter_after`]: 100 ms (its error said 1 s, and
/// 1 ms was accepted: black-box run).
pub const MIN_BROKEN_QUEUE_DEAD_LETTER_AFTER: Duration = Duration::from_millis(100);

/// Sends the events whose type matches `pattern` to `queue` — an SQS queue or an SNS topic.
///
/// A pattern is an exact event type (`payment.captured`) or a prefix ending in `*` (`order.*`
/// matches `order.created` and `order.line.added`; `*` alone matches every type). The most
/// specific route wins: an exact pattern over any prefix, a longer prefix over a shorter one; the
/// [default queue](SqsConfig::default_queue) comes last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The event type, or a prefix followed by `*`.
    pub pattern: String,
    /// The queue URL, a queue name that [`build`](crate::SqsPublisherBuilder::build) resolves to
    /// its URL with `GetQueueUrl`, or an SNS topic ARN (`arn:aws:sns:REGION:ACCOUNT:TOPIC`).
    /// Anything else is refused by `build`.
    pub queue: String,
}

impl Route {
    /// A route from `pattern` to `queue`.
    pub fn new(pattern: impl Into<String>, queue: impl Into<String>) -> Self {
        Route {
            pattern: pattern.into(),
            queue: queue.into(),
        }
    }
}

/// The settings of an [`SqsPublisher`](crate::SqsPublisher). Start from
/// [`SqsConfig::default`] or [`SqsConfig::from_env`] and set fields (new settings may come).
///
/// AWS settings — credentials, region, endpoint, retries — come from the standard AWS
/// configuration (`aws-config`'s default chains: `AWS_REGION`, `AWS_ACCESS_KEY_ID`/`AWS_PROFILE`/web
/// identity/ECS/EC2 credentials, `AWS_ENDPOINT_URL_SQS` or `AWS_ENDPOINT_URL`, `AWS_MAX_ATTEMPTS`);
/// the optional fields here override them. Credentials are never part of this configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqsConfig {
    /// The queue (URL, or name resolved at build) or topic (ARN) for event types no route matches.
    /// `None` (the default): such events are dead-lettered as "no SQS route".
    pub default_queue: Option<String>,
    /// Routes by event type. Default: none.
    pub routes: Vec<Route>,
    /// The most `SendMessageBatch` (and `PublishBatch`) calls in flight at once, across every
    /// `publish` of this publisher (S3 uploads have slots of their own: [`max_uploads`](Self::max_uploads)).
    /// With several destinations, one destination's calls hold at most half of them (at least
    /// one), so that a destination answering slowly leaves the others the rest. Default
    /// [`DEFAULT_MAX_IN_FLIGHT`] (8).
    pub max_in_flight: usize,
    /// With an offload bucket: the most S3 uploads in flight at once, across every `publish` of
    /// this publisher (and at most 256 MiB of payloads between them); at most [`MAX_IN_FLIGHT`].
    /// An upload holds its slot, and a copy of its payload, until it ends, its publish gone or
    /// not; a slow S3 needs many (8 answering in 3.5 s carried 2.3 uploads a second). Default
    /// [`DEFAULT_MAX_UPLOADS`] (32).
    pub max_uploads: usize,
    /// The time limit of one call, retries included; a call that exceeds it counts as failed
    /// and its events are retried. An S3 upload of the offload gets a second more per MiB
    /// begun that it carries. Default [`DEFAULT_CALL_TIMEOUT`] (10 s).
    pub call_timeout: Duration,
    /// How long a publish waits for its `SendMessageBatch` / `PublishBatch` calls. A call still
    /// running then goes on without it (within its call timeout and the publish deadline): its
    /// events are put back, uncounted, until it has ended (the rest of its time-out), marked
    /// published as it gets them accepted, or their next claim takes its answer — the failure
    /// counted then. So a destination answering slowly (a topic taking
    /// 2–12 s) holds only its own events, not the batch's others bound for healthy destinations
    /// nor, through per-aggregate order, their aggregates. A chain of calls whose publish went on
    /// ends with the call it is in; while a destination's calls going on hold its whole share of
    /// [`max_in_flight`](Self::max_in_flight), its new events are put back until fewer run. At
    /// least the call timeout: publishes wait for their calls, as before. Zero lets every call go on without its publish (each event then comes
    /// back once before it is marked). At most [`MAX_CALL_TIMEOUT`]. Default
    /// [`DEFAULT_CALL_WAIT`] (1 s).
    pub call_wait: Duration,
    /// Overrides the SQS endpoint (otherwise `AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL`, or AWS's).
    pub endpoint_url: Option<String>,
    /// Overrides the region (otherwise `AWS_REGION`, the profile, …).
    pub region: Option<String>,
    /// Overrides the attempts per call, of either transport (otherwise `AWS_MAX_ATTEMPTS`, default
    /// 3). `Some(1)` disables retries within a call and leaves retrying to the relay.
    pub max_attempts: Option<u32>,
    /// How long a queue (or topic, or the offload bucket refusing uploads) may stay broken as a
    /// whole — missing, access or encryption key denied,
    /// throttled ([`Class::Unavailable`](crate::Class::Unavailable)) without one successful call —
    /// before its events are dead-lettered with the SQS error. Until then they are put back
    /// without counting an attempt. Counted from the first failure seen by this publisher (a
    /// restarted relay starts counting again) that is not throttling: a queue that is only
    /// throttled is never dead-lettered. Default
    /// [`DEFAULT_BROKEN_QUEUE_DEAD_LETTER_AFTER`] (1 h); at most
    /// [`MAX_BROKEN_QUEUE_DEAD_LETTER_AFTER`] (30 days).
    pub broken_queue_dead_letter_after: Duration,
    /// While a queue's circuit breaker is open, its events fail fast without calling SQS, except
    /// for one probe call per this interval; a queue, topic or S3 that is down is probed once per
    /// this interval too. Default [`DEFAULT_BREAKER_PROBE_INTERVAL`] (5 s); at
    /// most [`MAX_BREAKER_PROBE_INTERVAL`] (1 h).
    pub breaker_probe_interval: Duration,
    /// The S3 bucket large payloads are written to (see [`offload`](crate#s3-offload-of-large-payloads)).
    /// `None` (the default): no offloading; a message over its destination's limit is
    /// dead-lettered.
    pub offload_bucket: Option<String>,
    /// With an offload bucket: offload messages (payload and attributes) larger than this many
    /// bytes, or than a destination's own limit where that is lower (1 MiB for queues, 256 KiB for
    /// topics, or their `MaximumMessageSize`); at most 1 MiB. `None` (the default): each
    /// destination's own limit.
    pub offload_threshold: Option<usize>,
    /// With an offload bucket: how long a publish waits for an upload. An upload still running
    /// then goes on without it: its event is put back for a second, uncounted, and sent at its
    /// next claim once the upload is done (see [the crate docs](crate#s3-offload-of-large-payloads)),
    /// so that a slow S3 does not hold the batch's other events, nor, through per-aggregate order,
    /// their aggregates. The publish deadline bounds it too. Zero lets every upload go on
    /// without its publish; a long wait has publishes wait for their uploads, unless uploads of
    /// at most 1 MiB outlast it (then publishes stop waiting for 10 s, or until such an upload
    /// ends within it). At most [`MAX_CALL_TIMEOUT`]. Default
    /// [`DEFAULT_OFFLOAD_WAIT`] (1 s).
    pub offload_wait: Duration,
    /// With per-aggregate order on and a single FIFO destination (queue or topic): send several
    /// events of one aggregate in one `SendMessageBatch` / `PublishBatch` call, in order (the
    /// relay then hands a whole claimed batch to one publish instead of one wave per position in
    /// the aggregates, which costs one round trip per event of a hot aggregate). SQS and SNS keep
    /// a message group's order within a call; the publisher validates every entry first, and once
    /// an entry of a group fails, the group's later entries are not sent. What no client can
    /// rule out is SQS failing an entry for an internal error while accepting a later one of its
    /// group in the same call: the relay logs that as an error (per-aggregate order broken).
    /// Default `false`: waves, where a later event is only sent once the earlier one was accepted.
    /// Ignored (waves) with several destinations or a standard queue.
    pub batch_aggregates: bool,
    /// How `SendMessageBatch` is sent: [`SqsTransport::Direct`] (the default) or
    /// [`SqsTransport::Sdk`].
    pub transport: SqsTransport,
}

impl Default for SqsConfig {
    fn default() -> Self {
        SqsConfig {
            default_queue: None,
            routes: Vec::new(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_uploads: DEFAULT_MAX_UPLOADS,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            call_wait: DEFAULT_CALL_WAIT,
            endpoint_url: None,
            region: None,
            max_attempts: None,
            broken_queue_dead_letter_after: DEFAULT_BROKEN_QUEUE_DEAD_LETTER_AFTER,
            breaker_probe_interval: DEFAULT_BREAKER_PROBE_INTERVAL,
            offload_bucket: None,
            offload_threshold: None,
            offload_wait: DEFAULT_OFFLOAD_WAIT,
            batch_aggregates: false,
            transport: SqsTransport::Direct,
        }
    }
}

impl SqsConfig {
    /// What a publisher with these settings needs to publish `events` events (its
    /// [`Publisher::min_publish_timeout`](outbox_core::Publisher::min_publish_timeout)): one call
    /// timeout per round of batch calls (10 entries each, `max_in_flight` at a time), and one more
    /// for the S3 uploads before them when offload is on. A relay's publish timeout must be above
    /// what one event needs; known before any network call.
    pub fn min_publish_timeout(&self, events: usize) -> Duration {
        time_needed(
            self.call_timeout,
            self.max_in_flight,
            self.offload_bucket.is_some(),
            events,
        )
    }

    /// Checks the settings as [`SqsPublisherBuilder::build`](crate::SqsPublisherBuilder::build)
    /// does before any network call: limits and time-outs, route patterns, that each target is a
    /// queue URL, a queue name or a topic ARN, the offload bucket and threshold. For a program
    /// that wants to refuse bad settings before it does anything else (the `outbox` CLI checks
    /// them before it touches the database); no region or credentials are needed.
    pub fn validate(&self) -> crate::error::Result<()> {
        crate::validate::validate(self)
    }

    /// Checks what a publisher built from these settings alone reads from the environment and
    /// the AWS profile, as [`SqsPublisherBuilder::build`](crate::SqsPublisherBuilder::build) does
    /// before any call to AWS: the SDK's retry and endpoint settings, and that a region is found
    /// (these settings', `AWS_REGION`, the profile's or, on EC2, the instance's). For a program
    /// that refuses bad settings before it does anything else (the `outbox` CLI, before it
    /// touches the database: a missing region failed only after it). A client or SDK
    /// configuration given to the builder is not seen here.
    pub async fn check_environment(&self) -> crate::error::Result<()> {
        let (region, endpoint) = (self.region.as_deref(), self.endpoint_url.as_deref());
        let sdk = crate::clients::load_default(region, endpoint).await?;
        if sdk.region().is_none() {
            return Err(crate::clients::no_region());
        }
        Ok(())
    }
}

/// What publishing `events` events needs: see [`SqsConfig::min_publish_timeout`].
pub(crate) fn time_needed(
    call_timeout: Duration,
    max_in_flight: usize,
    offload: bool,
    events: usize,
) -> Duration {
    let calls = events.div_ceil(10).max(1);
    let rounds = calls.div_ceil(max_in_flight.max(1)) + usize::from(offload);
    call_timeout.saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX))
}
