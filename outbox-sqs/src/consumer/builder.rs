//! [`ConsumerBuilder`]: settings in, a checked [`Consumer`] out.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::Region;
use aws_sdk_sqs::types::QueueAttributeName;
use deadpool_postgres::Pool;

use super::config::ConsumerConfig;
use super::handler::{Delivery, Observer};
use super::metrics::ConsumerMetrics;
use super::{Consumer, Inner};
use crate::clients::{load_default, no_region, s3_client};
use crate::destination::{Target, parse_target};
use crate::error::{Error, ErrorKind, Result, config_error};
use crate::sdk_error::{sdk_error, timeout_error};

/// The time limit of the calls `build` makes.
const BUILD_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds a [`Consumer`]; see [`Consumer::builder`].
#[must_use = "a builder does nothing until `build` is awaited"]
pub struct ConsumerBuilder {
    pool: Pool,
    queue: String,
    config: ConsumerConfig,
    sdk_config: Option<SdkConfig>,
    client: Option<Client>,
    s3: Option<aws_sdk_s3::Client>,
    observer: Option<Observer>,
    skip_delete_every: u64,
}

impl std::fmt::Debug for ConsumerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerBuilder")
            .field("queue", &self.queue)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ConsumerBuilder {
    pub(crate) fn new(pool: Pool, queue: String) -> Self {
        ConsumerBuilder {
            pool,
            queue,
            config: ConsumerConfig::new(""),
            sdk_config: None,
            client: None,
            s3: None,
            observer: None,
            skip_delete_every: 0,
        }
    }

    /// Replaces every setting with `config` (e.g. [`ConsumerConfig::from_env`]).
    pub fn config(mut self, config: ConsumerConfig) -> Self {
        self.config = config;
        self
    }

    /// The consumer's name: its inbox name, metrics label and log field. Required.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.name = name.into();
        self
    }

    /// Handlers running at once (default 10).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config.concurrency = n;
        self
    }

    /// `ReceiveMessage` calls that may wait at once, sharing the handlers (default 2). See
    /// [`ConsumerConfig::receivers`].
    pub fn receivers(mut self, n: usize) -> Self {
        self.config.receivers = n;
        self
    }

    /// The most messages one `ReceiveMessage` asks for, 1–10 (default 10).
    pub fn max_messages(mut self, n: i32) -> Self {
        self.config.max_messages = n;
        self
    }

    /// The long-poll wait, whole seconds up to 20 (default 20 s).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config.wait = wait;
        self
    }

    /// The longest one SQS or S3 call may take (default 10 s; a `ReceiveMessage` its long-poll
    /// wait more). See [`ConsumerConfig::call_timeout`].
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.config.call_timeout = timeout;
        self
    }

    /// The longest one handler may run (default 15 min); then it is given up, rolled back and its
    /// message retried after the retry delay. See [`ConsumerConfig::handler_timeout`].
    pub fn handler_timeout(mut self, timeout: Duration) -> Self {
        self.config.handler_timeout = timeout;
        self
    }

    /// The visibility time-out asked for on receive, extended while a handler runs (default 30 s).
    pub fn visibility_timeout(mut self, timeout: Duration) -> Self {
        self.config.visibility_timeout = timeout;
        self
    }

    /// The retry back-off after handler failures: `initial × 2^(receives − 1)`, at most `max`
    /// (default 1 s and 5 min).
    pub fn retry_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.config.retry_initial = initial;
        self.config.retry_max = max;
        self
    }

    /// What to do with messages that cannot be read (default
    /// [`BadInputPolicy::Release`](super::BadInputPolicy::Release) for 10 min).
    pub fn bad_input(mut self, policy: super::BadInputPolicy, delay: Duration) -> Self {
        self.config.bad_input = policy;
        self.config.bad_input_delay = delay;
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

    /// Uses this AWS configuration instead of loading the default chain.
    pub fn sdk_config(mut self, sdk_config: SdkConfig) -> Self {
        self.sdk_config = Some(sdk_config);
        self
    }

    /// Uses this client's configuration (e.g. the publisher's). Takes precedence over
    /// [`sdk_config`](Self::sdk_config).
    pub fn client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// The S3 client that reads payloads the publisher offloaded (see the [module docs](super)).
    /// By default one is made from the AWS configuration ([`sdk_config`](Self::sdk_config), or
    /// the default chain's) in the queue's region: give one when the SQS client was given with
    /// settings of its own ([`client`](Self::client)) that S3 needs too.
    pub fn s3_client(mut self, client: aws_sdk_s3::Client) -> Self {
        self.s3 = Some(client);
        self
    }

    /// The S3 buckets offloaded payloads may be read from (see
    /// [`ConsumerConfig::offload_buckets`]; default: any).
    pub fn offload_buckets<I, B>(mut self, buckets: I) -> Self
    where
        I: IntoIterator<Item = B>,
        B: Into<String>,
    {
        self.config.offload_buckets = buckets.into_iter().map(Into::into).collect();
        self
    }

    /// Calls `observer` with every message's [`Delivery`] once the consumer is done with it (for
    /// tests, demos and custom accounting; keep it quick — it runs on the handler's task).
    pub fn observe(mut self, observer: impl Fn(&Delivery) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Fault injection, for tests and demos: every `n`th handled message is not deleted after its
    /// transaction committed — as if the consumer had crashed right there — and is made visible
    /// again at once, so SQS delivers it again and the inbox must recognise it. 0 (the default)
    /// turns it off. Never use it in production.
    pub fn skip_delete_every(mut self, n: u64) -> Self {
        self.skip_delete_every = n;
        self
    }

    /// Validates the settings, loads the AWS configuration (unless given), resolves a queue name
    /// to its URL with `GetQueueUrl`, and checks the queue with `GetQueueAttributes` (logging a
    /// warning when it has no redrive policy: see the [module docs](super)).
    ///
    /// Fails with [`ErrorKind::Config`] on an invalid setting, a queue that is neither a queue URL
    /// nor a queue name (checked before any call), or no region, and with the SQS
    /// error (e.g. [`ErrorKind::QueueNotFound`], [`ErrorKind::Credentials`]) when the queue
    /// cannot be checked.
    pub async fn build(self) -> Result<Consumer> {
        let config = self.config;
        config.validate()?;
        // Checked before any call, as the relay's targets are: `not a url` was sent to
        // `GetQueueUrl` as a name and came back as a missing queue (black-box run).
        let queue = match parse_target(&self.queue) {
            Ok(Target::Topic(arn)) => {
                return Err(config_error(format!(
                    "the consumer's queue `{arn}` is an SNS topic: a consumer reads a queue \
                     subscribed to it"
                )));
            }
            Ok(target) => target,
            Err(_) if self.queue.trim().is_empty() => {
                return Err(config_error("the consumer's queue is empty"));
            }
            Err(e) => return Err(config_error(format!("the consumer's queue: {e}"))),
        };
        let sdk = match self.sdk_config {
            Some(sdk) => sdk,
            // The SQS endpoint override is applied to the SQS client below, not to the S3 one.
            None => load_default(config.region.as_deref(), None).await?,
        };
        let conf = match self.client {
            Some(client) => client.config().to_builder(),
            None => aws_sdk_sqs::config::Builder::from(&sdk),
        };
        let mut conf = conf;
        if let Some(region) = &config.region {
            conf = conf.region(Region::new(region.clone()));
        }
        if let Some(url) = &config.endpoint_url {
            conf = conf.endpoint_url(url);
        }
        let conf = conf.build();
        let Some(region) = conf.region() else {
            return Err(no_region());
        };
        crate::header_text::check_signing(sdk.credentials_provider(), Some(region.as_ref()))
            .await?;
        // Reads offloaded payloads (see `payload.rs`); no call until a pointer arrives.
        let s3 = match self.s3 {
            Some(s3) => s3,
            // Never at the SQS `endpoint_url`: S3's own endpoint comes from the configuration.
            None => s3_client(&sdk, conf.region().cloned(), None, None),
        };
        let client = Client::from_conf(conf);
        let queue_url = match queue {
            Target::QueueName(name) => resolve_queue_url(&client, &name).await?,
            Target::QueueUrl(url) | Target::Topic(url) => url,
        };
        check_queue(&client, &queue_url).await?;
        check_database(&self.pool).await?;
        let metrics = ConsumerMetrics::new(&config.name);
        Ok(Consumer {
            inner: Arc::new(Inner {
                client,
                s3,
                queue_url,
                pool: self.pool,
                config,
                metrics,
                observer: self.observer,
                skip_delete_every: self.skip_delete_every,
                handled_count: AtomicU64::new(0),
            }),
        })
    }
}

/// The consumer's database, checked once before it runs, when it answers within
/// [`BUILD_CALL_TIMEOUT`]: its inbox table there and usable, or a configuration error saying what
/// to run or grant (a consumer built on a database never migrated started, failed every delivery,
/// and its queue's redrive policy moved the messages to the dead-letter queue one by one, FIFO
/// groups out of order: black-box run); a database that does not exist is one too. A database that
/// does not answer (an outage, a failover) is left to the run, which waits for it; a warning says
/// so.
async fn check_database(pool: &Pool) -> Result<()> {
    let check = async {
        let client = pool.get().await.map_err(outbox_core::Error::from)?;
        outbox_core::check_inbox_database(&client).await
    };
    let failure = match tokio::time::timeout(BUILD_CALL_TIMEOUT, check).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(e)) if e.kind() == outbox_core::ErrorKind::Config => {
            return Err(config_error(e.message().to_owned()));
        }
        // SQLSTATE 3D000, invalid_catalog_name: no such database on the server.
        Ok(Err(e)) if e.sqlstate() == Some("3D000") => {
            return Err(config_error(format!(
                "the consumer's database does not exist: {}",
                outbox_core::error_chain(&e)
            )));
        }
        Ok(Err(e)) => outbox_core::error_chain(&e),
        Err(_) => format!("no answer within {} s", BUILD_CALL_TIMEOUT.as_secs()),
    };
    tracing::warn!(
        error = %failure,
        "the consumer's database is failing at start: the consumer waits for it, and checks its \
         inbox when it answers"
    );
    Ok(())
}

async fn resolve_queue_url(client: &Client, name: &str) -> Result<String> {
    let what = format!("GetQueueUrl for queue name `{name}`");
    let call = client.get_queue_url().queue_name(name).send();
    match tokio::time::timeout(BUILD_CALL_TIMEOUT, call).await {
        Err(_) => Err(timeout_error(&what, BUILD_CALL_TIMEOUT)),
        Ok(Err(e)) => Err(sdk_error(&what, e)),
        Ok(Ok(out)) => out
            .queue_url()
            .map(str::to_owned)
            .ok_or_else(|| Error::new(ErrorKind::Service, format!("{what}: no URL in the answer"))),
    }
}

async fn check_queue(client: &Client, url: &str) -> Result<()> {
    let what = format!("GetQueueAttributes on queue `{url}`");
    let call = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .send();
    let out = match tokio::time::timeout(BUILD_CALL_TIMEOUT, call).await {
        Err(_) => return Err(timeout_error(&what, BUILD_CALL_TIMEOUT)),
        Ok(Err(e)) => return Err(sdk_error(&what, e)),
        Ok(Ok(out)) => out,
    };
    let redrive = out
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::RedrivePolicy));
    if redrive.is_none_or(|r| r.is_empty()) {
        tracing::warn!(
            queue = %url,
            "the queue has no redrive policy: a message that always fails is retried (with \
             back-off) forever; give the queue a dead-letter queue (RedrivePolicy with \
             maxReceiveCount)"
        );
    }
    Ok(())
}
