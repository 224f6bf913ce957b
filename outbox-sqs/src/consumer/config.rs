//! The consumer's settings: plain data with defaults, loadable from the environment.

use std::time::Duration;

use crate::error::{Result, config_error};

/// Environment variable: how many handlers run at once ([`ConsumerConfig::concurrency`]).
pub const ENV_CONSUMER_CONCURRENCY: &str = "OUTBOX_SQS_CONSUMER_CONCURRENCY";
/// Environment variable: how many `ReceiveMessage` calls may wait at once ([`ConsumerConfig::receivers`]).
pub const ENV_CONSUMER_RECEIVERS: &str = "OUTBOX_SQS_CONSUMER_RECEIVERS";
/// Environment variable: the most messages one `ReceiveMessage` asks for (1–10).
pub const ENV_CONSUMER_MAX_MESSAGES: &str = "OUTBOX_SQS_CONSUMER_MAX_MESSAGES";
/// Environment variable: the long-poll wait of one `ReceiveMessage`, in whole seconds (0–20).
pub const ENV_CONSUMER_WAIT_SECS: &str = "OUTBOX_SQS_CONSUMER_WAIT_SECS";
/// Environment variable: the visibility time-out requested on receive, in whole seconds.
pub const ENV_CONSUMER_VISIBILITY_TIMEOUT_SECS: &str =
    "OUTBOX_SQS_CONSUMER_VISIBILITY_TIMEOUT_SECS";
/// Environment variable: the first retry delay after a handler failure, in milliseconds.
pub const ENV_CONSUMER_RETRY_INITIAL_MS: &str = "OUTBOX_SQS_CONSUMER_RETRY_INITIAL_MS";
/// Environment variable: the longest retry delay after handler failures, in seconds.
pub const ENV_CONSUMER_RETRY_MAX_SECS: &str = "OUTBOX_SQS_CONSUMER_RETRY_MAX_SECS";
/// Environment variable: how long a message that cannot be read stays hidden, in seconds.
pub const ENV_CONSUMER_BAD_INPUT_DELAY_SECS: &str = "OUTBOX_SQS_CONSUMER_BAD_INPUT_DELAY_SECS";
/// Environment variable: the longest one SQS or S3 call may take, in milliseconds
/// ([`ConsumerConfig::call_timeout`]).
pub const ENV_CONSUMER_CALL_TIMEOUT_MS: &str = "OUTBOX_SQS_CONSUMER_CALL_TIMEOUT_MS";
/// Environment variable: the longest one handler may run, in seconds
/// ([`ConsumerConfig::handler_timeout`]).
pub const ENV_CONSUMER_HANDLER_TIMEOUT_SECS: &str = "OUTBOX_SQS_CONSUMER_HANDLER_TIMEOUT_SECS";
/// Environment variable: the S3 buckets offloaded payloads may be read from, comma-separated
/// ([`ConsumerConfig::offload_buckets`]).
pub const ENV_CONSUMER_OFFLOAD_BUCKETS: &str = "OUTBOX_SQS_CONSUMER_OFFLOAD_BUCKETS";

/// Default of [`ConsumerConfig::concurrency`].
pub const DEFAULT_CONCURRENCY: usize = 10;
/// Default of [`ConsumerConfig::receivers`].
pub const DEFAULT_RECEIVERS: usize = 2;
/// Default of [`ConsumerConfig::max_messages`]: SQS's maximum.
pub const DEFAULT_MAX_MESSAGES: i32 = 10;
/// Default of [`ConsumerConfig::wait`]: SQS's longest long poll.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(20);
/// Default of [`ConsumerConfig::visibility_timeout`].
pub const DEFAULT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of [`ConsumerConfig::retry_initial`].
pub const DEFAULT_RETRY_INITIAL: Duration = Duration::from_secs(1);
/// Default of [`ConsumerConfig::retry_max`].
pub const DEFAULT_RETRY_MAX: Duration = Duration::from_secs(300);
/// Default of [`ConsumerConfig::bad_input_delay`].
pub const DEFAULT_BAD_INPUT_DELAY: Duration = Duration::from_secs(600);
/// Default of [`ConsumerConfig::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`ConsumerConfig::handler_timeout`].
pub const DEFAULT_HANDLER_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The most handlers (and receivers) a consumer runs at once.
pub const MAX_CONCURRENCY: usize = 10_000;
/// The longest visibility time-out SQS accepts: 12 hours.
pub const MAX_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(12 * 3600);

/// What the consumer does with a message it cannot read: no `event_id`, an event type the
/// handler's type does not accept, or a body that does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BadInputPolicy {
    /// Leave it in the queue, hidden for [`ConsumerConfig::bad_input_delay`]: the queue's redrive
    /// policy moves it to the dead-letter queue after `maxReceiveCount` receives, where it can be
    /// inspected and redriven once a consumer that reads it is deployed. Never a hot loop: each
    /// receive hides it for the whole delay. The default.
    #[default]
    Release,
    /// Delete it (after logging and counting it). For queues that carry events this consumer does
    /// not care about, or that have no dead-letter queue and should not keep unreadable messages.
    Delete,
}

/// The settings of a [`Consumer`](crate::Consumer). AWS settings come from the standard AWS
/// configuration, as for the publisher (see [`SqsConfig`](crate::SqsConfig)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// The consumer's name: its name in the inbox (`processed_events.consumer`), in metrics
    /// labels and in logs. Required (no default): two consumers with the same name share their
    /// inbox, so each event is handled by only one of them.
    pub name: String,
    /// Handlers running at once (on a FIFO queue: message groups handled at once). Default
    /// [`DEFAULT_CONCURRENCY`] (10); at most [`MAX_CONCURRENCY`].
    pub concurrency: usize,
    /// Receivers: `ReceiveMessage` calls that may be waiting at once, sharing the
    /// [`concurrency`](Self::concurrency) handlers (each asks for a whole batch once there is room
    /// for one: `concurrency + max_messages` messages may be received and not yet done, the
    /// waiting ones kept hidden). More than one keeps handlers fed while a long poll waits on a queue
    /// that looked empty when it started (on a FIFO queue: every group busy). Default
    /// [`DEFAULT_RECEIVERS`] (2); at most `concurrency` are used, and at most
    /// [`MAX_CONCURRENCY`] may be set.
    pub receivers: usize,
    /// The most messages one `ReceiveMessage` asks for, 1–10.
    /// Default [`DEFAULT_MAX_MESSAGES`] (10).
    pub max_messages: i32,
    /// The long-poll wait of one `ReceiveMessage`, whole seconds, at most 20. With 0 (short
    /// polling) a receiver that finds the queue empty pauses a second before asking again.
    /// Default [`DEFAULT_WAIT`] (20 s).
    pub wait: Duration,
    /// The visibility time-out asked for on receive (whole seconds, at least 1 s): how long a
    /// received message stays hidden from other receivers. While a handler runs, the consumer
    /// extends it every third of this time (heartbeat), so a slow handler keeps its message.
    /// Default [`DEFAULT_VISIBILITY_TIMEOUT`] (30 s).
    pub visibility_timeout: Duration,
    /// After a handler failure the message is hidden for `retry_initial × 2^(receives − 1)`, at
    /// most [`retry_max`](Self::retry_max). More than zero. SQS hides messages for whole
    /// seconds: each delay is rounded up to the next one (250 ms hides for 1 s). Default
    /// [`DEFAULT_RETRY_INITIAL`] (1 s).
    pub retry_initial: Duration,
    /// The longest retry delay. Default [`DEFAULT_RETRY_MAX`] (5 min); at most 12 h.
    pub retry_max: Duration,
    /// What to do with a message that cannot be read. Default [`BadInputPolicy::Release`].
    pub bad_input: BadInputPolicy,
    /// With [`BadInputPolicy::Release`], how long an unreadable message stays hidden. Default
    /// [`DEFAULT_BAD_INPUT_DELAY`] (10 min); more than zero with `Release`, at most 12 h (rounded
    /// up to whole seconds).
    pub bad_input_delay: Duration,
    /// The longest one call to SQS (or S3, for an offloaded payload) may take; a `ReceiveMessage`
    /// may take its [`wait`](Self::wait) more. A call that does not answer in time is given up
    /// as failed (a dropped connection that nobody closed, a proxy that never answers), so that
    /// no message, receiver or shutdown waits on it for ever. Default [`DEFAULT_CALL_TIMEOUT`]
    /// (10 s); more than zero, at most [`MAX_CALL_TIMEOUT`](crate::MAX_CALL_TIMEOUT) (1 h).
    pub call_timeout: Duration,
    /// The longest one handler may run. A handler still running then is given up: its
    /// transaction rolls back and the message is hidden for the retry delay, as after a handler
    /// error, so that its receive count grows and the queue's redrive policy can move it to the
    /// dead-letter queue. Without a limit, a handler that hung (a call without a time-out) kept
    /// its message hidden by the heartbeat, its FIFO group waiting and shutdown waiting, for
    /// ever. Default [`DEFAULT_HANDLER_TIMEOUT`] (15 min); more than zero, at most 12 h.
    pub handler_timeout: Duration,
    /// Overrides the SQS endpoint (otherwise `AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL`, or AWS's).
    pub endpoint_url: Option<String>,
    /// Overrides the region (otherwise `AWS_REGION`, the profile, …).
    pub region: Option<String>,
    /// The S3 buckets offloaded payloads may be read from; empty (the default): any bucket a
    /// pointer names, as the Extended Client libraries read. Set it to the publisher's offload
    /// bucket(s) so that a message naming another bucket is bad input, never read: whoever can
    /// send to the queue could otherwise have the consumer read any object its role can.
    pub offload_buckets: Vec<String>,
}

impl ConsumerConfig {
    /// The defaults, for a consumer called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        ConsumerConfig {
            name: name.into(),
            concurrency: DEFAULT_CONCURRENCY,
            receivers: DEFAULT_RECEIVERS,
            max_messages: DEFAULT_MAX_MESSAGES,
            wait: DEFAULT_WAIT,
            visibility_timeout: DEFAULT_VISIBILITY_TIMEOUT,
            retry_initial: DEFAULT_RETRY_INITIAL,
            retry_max: DEFAULT_RETRY_MAX,
            bad_input: BadInputPolicy::Release,
            bad_input_delay: DEFAULT_BAD_INPUT_DELAY,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            handler_timeout: DEFAULT_HANDLER_TIMEOUT,
            endpoint_url: None,
            region: None,
            offload_buckets: Vec::new(),
        }
    }

    /// [`new(name)`](Self::new), overridden by the variables that are set and not empty:
    /// [`ENV_CONSUMER_CONCURRENCY`], [`ENV_CONSUMER_RECEIVERS`], [`ENV_CONSUMER_MAX_MESSAGES`], [`ENV_CONSUMER_WAIT_SECS`],
    /// [`ENV_CONSUMER_VISIBILITY_TIMEOUT_SECS`], [`ENV_CONSUMER_RETRY_INITIAL_MS`],
    /// [`ENV_CONSUMER_RETRY_MAX_SECS`], [`ENV_CONSUMER_BAD_INPUT_DELAY_SECS`],
    /// [`ENV_CONSUMER_CALL_TIMEOUT_MS`], [`ENV_CONSUMER_HANDLER_TIMEOUT_SECS`],
    /// [`ENV_CONSUMER_OFFLOAD_BUCKETS`].
    ///
    /// Fails with [`ErrorKind::Config`](crate::ErrorKind::Config), naming the variable, when a
    /// value is not a whole number.
    ///
    /// A variable of the consumer's prefix (`OUTBOX_SQS_CONSUMER_`) that is none of these — a
    /// misspelling, most likely — is logged as a warning, naming it.
    pub fn from_env(name: impl Into<String>) -> Result<Self> {
        for unknown in unknown_variables(std::env::vars_os().map(|(k, _)| k)) {
            tracing::warn!(
                variable = %unknown,
                "an {ENV_PREFIX}… variable that is no setting of the consumer: ignored (misspelt?)"
            );
        }
        Self::from_vars(name, |n| std::env::var(n).ok())
    }

    pub(crate) fn from_vars(
        name: impl Into<String>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let number = |variable: &str| -> Result<Option<u64>> {
            match var(variable).filter(|v| !v.trim().is_empty()) {
                None => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| {
                    let digits = v.trim().bytes().all(|b| b.is_ascii_digit());
                    let what = if digits {
                        "is too large"
                    } else {
                        "is not a whole number"
                    };
                    config_error(format!("{variable}: `{v}` {what}"))
                }),
            }
        };
        let mut c = ConsumerConfig::new(name);
        if let Some(n) = number(ENV_CONSUMER_CONCURRENCY)? {
            c.concurrency = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = number(ENV_CONSUMER_RECEIVERS)? {
            c.receivers = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = number(ENV_CONSUMER_MAX_MESSAGES)? {
            c.max_messages = i32::try_from(n).unwrap_or(i32::MAX);
        }
        if let Some(n) = number(ENV_CONSUMER_WAIT_SECS)? {
            c.wait = Duration::from_secs(n);
        }
        if let Some(n) = number(ENV_CONSUMER_VISIBILITY_TIMEOUT_SECS)? {
            c.visibility_timeout = Duration::from_secs(n);
        }
        if let Some(n) = number(ENV_CONSUMER_RETRY_INITIAL_MS)? {
            c.retry_initial = Duration::from_millis(n);
        }
        if let Some(n) = number(ENV_CONSUMER_RETRY_MAX_SECS)? {
            c.retry_max = Duration::from_secs(n);
        }
        if let Some(n) = number(ENV_CONSUMER_BAD_INPUT_DELAY_SECS)? {
            c.bad_input_delay = Duration::from_secs(n);
        }
        if let Some(n) = number(ENV_CONSUMER_CALL_TIMEOUT_MS)? {
            c.call_timeout = Duration::from_millis(n);
        }
        if let Some(n) = number(ENV_CONSUMER_HANDLER_TIMEOUT_SECS)? {
            c.handler_timeout = Duration::from_secs(n);
        }
        if let Some(list) = var(ENV_CONSUMER_OFFLOAD_BUCKETS) {
            c.offload_buckets = list
                .split(',')
                .map(str::trim)
                .filter(|b| !b.is_empty())
                .map(str::to_owned)
                .collect();
        }
        Ok(c)
    }

    /// Checks every setting; `Err` names the first invalid one.
    pub(crate) fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(config_error(m));
        if self.name.trim().is_empty() {
            return fail("the consumer's name is empty".into());
        }
        // An empty name allows no bucket there is: every pointer would be refused as bad input.
        if self.offload_buckets.iter().any(|b| b.trim().is_empty()) {
            return fail(format!(
                "offload_buckets ({ENV_CONSUMER_OFFLOAD_BUCKETS}) holds an empty bucket name"
            ));
        }
        // Each setting named with its variable, and the value found (a black-box run got
        // "0 < retry_initial ≤ retry_max ≤ 12 h is required" for a retry_initial above the
        // default retry_max, with neither named).
        if !(1..=MAX_CONCURRENCY).contains(&self.concurrency) {
            return fail(format!(
                "concurrency ({ENV_CONSUMER_CONCURRENCY}) must be 1–{MAX_CONCURRENCY}, not {}",
                self.concurrency
            ));
        }
        if !(1..=MAX_CONCURRENCY).contains(&self.receivers) {
            return fail(format!(
                "receivers ({ENV_CONSUMER_RECEIVERS}) must be 1–{MAX_CONCURRENCY}, not {}",
                self.receivers
            ));
        }
        if self.handler_timeout.is_zero() || self.handler_timeout > MAX_VISIBILITY_TIMEOUT {
            return fail(format!(
                "handler_timeout ({ENV_CONSUMER_HANDLER_TIMEOUT_SECS}) must be more than zero \
                 and at most 12 h, not {:?}",
                self.handler_timeout
            ));
        }
        if !(1..=10).contains(&self.max_messages) {
            return fail(format!(
                "max_messages ({ENV_CONSUMER_MAX_MESSAGES}) must be 1–10, not {}",
                self.max_messages
            ));
        }
        // SQS takes whole seconds for these two: a fraction would be cut off (a 500 ms wait
        // becoming 0, short polling: a busy loop on an empty queue).
        if self.wait > Duration::from_secs(20) || self.wait.subsec_nanos() != 0 {
            return fail(format!(
                "wait ({ENV_CONSUMER_WAIT_SECS}) must be whole seconds, at most 20 s, not {:?}",
                self.wait
            ));
        }
        if self.visibility_timeout < Duration::from_secs(1)
            || self.visibility_timeout > MAX_VISIBILITY_TIMEOUT
            || self.visibility_timeout.subsec_nanos() != 0
        {
            return fail(format!(
                "visibility_timeout ({ENV_CONSUMER_VISIBILITY_TIMEOUT_SECS}) must be whole \
                 seconds, between 1 s and 12 h, not {:?}",
                self.visibility_timeout
            ));
        }
        // Zero would hand a failing message straight back: a hot retry loop.
        if self.retry_initial.is_zero() {
            return fail(format!(
                "retry_initial ({ENV_CONSUMER_RETRY_INITIAL_MS}) must be more than 0: a failed \
                 message would come straight back"
            ));
        }
        if self.retry_max > MAX_VISIBILITY_TIMEOUT {
            return fail(format!(
                "retry_max ({ENV_CONSUMER_RETRY_MAX_SECS}) must be at most 12 h, not {:?}",
                self.retry_max
            ));
        }
        if self.retry_initial > self.retry_max {
            return fail(format!(
                "retry_initial ({ENV_CONSUMER_RETRY_INITIAL_MS}) is {:?}, longer than retry_max \
                 ({ENV_CONSUMER_RETRY_MAX_SECS}) {:?}: raise retry_max too, or lower retry_initial",
                self.retry_initial, self.retry_max
            ));
        }
        let released = self.bad_input == BadInputPolicy::Release;
        if (released && self.bad_input_delay.is_zero())
            || self.bad_input_delay > MAX_VISIBILITY_TIMEOUT
        {
            return fail(format!(
                "bad_input_delay ({ENV_CONSUMER_BAD_INPUT_DELAY_SECS}) must be more than 0 (with \
                 Release) and at most 12 h, not {:?}",
                self.bad_input_delay
            ));
        }
        // Bounded like the publisher's (it was unbounded: "no limit", unlike every other
        // duration setting: review).
        if self.call_timeout.is_zero() || self.call_timeout > crate::MAX_CALL_TIMEOUT {
            return fail(format!(
                "call_timeout ({ENV_CONSUMER_CALL_TIMEOUT_MS}) must be more than 0 and at most \
                 {} s, not {:?}",
                crate::MAX_CALL_TIMEOUT.as_secs(),
                self.call_timeout
            ));
        }
        if let Some(url) = &self.endpoint_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return fail(format!(
                    "endpoint_url `{url}` is not an http:// or https:// URL"
                ));
            }
        }
        Ok(())
    }
}

/// The prefix of every variable [`ConsumerConfig::from_env`] reads: any other variable with it is
/// warned about as misspelt.
pub const ENV_CONSUMER_PREFIX: &str = "OUTBOX_SQS_CONSUMER_";
const ENV_PREFIX: &str = ENV_CONSUMER_PREFIX;

/// Every variable [`ConsumerConfig::from_env`] reads.
const ENV_VARIABLES: &[&str] = &[
    ENV_CONSUMER_CONCURRENCY,
    ENV_CONSUMER_RECEIVERS,
    ENV_CONSUMER_MAX_MESSAGES,
    ENV_CONSUMER_WAIT_SECS,
    ENV_CONSUMER_VISIBILITY_TIMEOUT_SECS,
    ENV_CONSUMER_RETRY_INITIAL_MS,
    ENV_CONSUMER_RETRY_MAX_SECS,
    ENV_CONSUMER_BAD_INPUT_DELAY_SECS,
    ENV_CONSUMER_CALL_TIMEOUT_MS,
    ENV_CONSUMER_HANDLER_TIMEOUT_SECS,
    ENV_CONSUMER_OFFLOAD_BUCKETS,
];

/// The names among `names` that have the consumer's prefix but are none of its variables.
pub(crate) fn unknown_variables(names: impl Iterator<Item = std::ffi::OsString>) -> Vec<String> {
    names
        .filter_map(|n| n.into_string().ok())
        .filter(|n| n.starts_with(ENV_PREFIX) && !ENV_VARIABLES.contains(&n.as_str()))
        .collect()
}

/// `d` in whole seconds for an SQS call, at least `min`.
pub(crate) fn secs(d: Duration, min: u64) -> i32 {
    i32::try_from(d.as_secs().max(min)).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;
