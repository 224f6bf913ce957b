//! SQS test support: clients for the local SQS server (fauxqs) and throwaway queues on it.
//!
//! Settings come from the standard AWS variables, with local defaults:
//!
//! - endpoint: `AWS_ENDPOINT_URL_SQS` (or `AWS_ENDPOINT_URL`), default [`DEFAULT_ENDPOINT`]
//!   (`http://127.0.0.1:4566`, where `bash scripts/services.sh` starts fauxqs);
//! - region: `AWS_REGION` (or `AWS_DEFAULT_REGION`), default `us-east-1`;
//! - credentials: the default chain when `AWS_ACCESS_KEY_ID` or `AWS_PROFILE` is set, otherwise the
//!   static pair `test`/`test`.
//!
//! The default endpoint is local, so tests never reach real AWS unless an endpoint is set
//! explicitly.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_sqs::config::{ConfigBag, Credentials, Intercept};
use aws_sdk_sqs::error::{BoxError, DisplayErrorContext, SdkError};
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchInput;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};

/// The local SQS server's endpoint when no AWS endpoint variable is set.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:4566";
/// The region when no region variable is set.
pub const DEFAULT_REGION: &str = "us-east-1";

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The SQS endpoint the tests use: `AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL` or
/// [`DEFAULT_ENDPOINT`].
pub fn endpoint() -> String {
    env("AWS_ENDPOINT_URL_SQS")
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned())
}

/// The AWS configuration for the local SQS server, from the environment with local defaults (see
/// the [module docs](self)).
pub async fn sdk_config() -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if env("AWS_ENDPOINT_URL_SQS").is_none() && env("AWS_ENDPOINT_URL").is_none() {
        loader = loader.endpoint_url(DEFAULT_ENDPOINT);
    }
    if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
        loader = loader.region(Region::new(DEFAULT_REGION));
    }
    if env("AWS_ACCESS_KEY_ID").is_none() && env("AWS_PROFILE").is_none() {
        loader = loader.credentials_provider(test_credentials());
    }
    loader.load().await
}

/// An AWS configuration for an SQS server at `endpoint` (e.g. the SQS test fixture): region
/// `us-east-1`, credentials `test`/`test`, nothing read from the environment.
pub async fn sdk_config_for(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(DEFAULT_REGION))
        .credentials_provider(test_credentials())
        .load()
        .await
}

fn test_credentials() -> Credentials {
    Credentials::new("test", "test", None, None, "outbox-tests")
}

/// A client for the local SQS server (see [`sdk_config`]).
pub async fn sqs_client() -> Client {
    Client::new(&sdk_config().await)
}

/// A client for the local SQS server that counts its `SendMessageBatch` calls in `counter`.
pub async fn counting_sqs_client(counter: &BatchCallCounter) -> Client {
    let conf = aws_sdk_sqs::config::Builder::from(&sdk_config().await)
        .interceptor(counter.clone())
        .build();
    Client::from_conf(conf)
}

/// Counts the `SendMessageBatch` operations of the clients it is installed in (an SDK interceptor;
/// see [`counting_sqs_client`]). An operation counts once, however many attempts the SDK makes.
#[derive(Debug, Clone, Default)]
pub struct BatchCallCounter(Arc<AtomicU64>);

impl BatchCallCounter {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// `SendMessageBatch` operations so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl Intercept for BatchCallCounter {
    fn name(&self) -> &'static str {
        "BatchCallCounter"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if context
            .input()
            .downcast_ref::<SendMessageBatchInput>()
            .is_some()
        {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// A message read from a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// SQS's message id.
    pub message_id: String,
    /// The body.
    pub body: String,
    /// The message attributes: name → string value.
    pub attributes: BTreeMap<String, String>,
    /// The message attributes' data types: name → `String`, `Number`, ….
    pub attribute_types: BTreeMap<String, String>,
    /// The `MessageGroupId` system attribute (FIFO queues).
    pub group_id: Option<String>,
    /// The `MessageDeduplicationId` system attribute (FIFO queues).
    pub dedup_id: Option<String>,
}

/// A fresh, uniquely named queue on the local SQS server, deleted (best effort) when dropped.
#[derive(Debug)]
pub struct TestQueue {
    client: Client,
    name: String,
    url: String,
}

impl TestQueue {
    /// Creates a standard queue.
    ///
    /// # Panics
    ///
    /// When the local SQS server cannot be reached (the message says how to start it) or refuses
    /// to create the queue.
    pub async fn standard() -> TestQueue {
        Self::create(false).await
    }

    /// Creates a FIFO queue (name ending in `.fifo`, no content-based deduplication).
    ///
    /// # Panics
    ///
    /// As [`standard`](Self::standard).
    pub async fn fifo() -> TestQueue {
        Self::create(true).await
    }

    async fn create(fifo: bool) -> TestQueue {
        let client = sqs_client().await;
        let mut name = format!("outbox-test-{}", uuid::Uuid::new_v4().simple());
        let mut request = client.create_queue();
        if fifo {
            name.push_str(".fifo");
            request = request
                .attributes(QueueAttributeName::FifoQueue, "true")
                .attributes(QueueAttributeName::ContentBasedDeduplication, "false");
        }
        let url = match request.queue_name(&name).send().await {
            Ok(out) => out
                .queue_url()
                .expect("CreateQueue returns a URL")
                .to_owned(),
            Err(e @ (SdkError::DispatchFailure(_) | SdkError::TimeoutError(_))) => panic!(
                "cannot reach the local SQS server at {}: {}\n\
                 Start it with `bash scripts/services.sh` (installs fauxqs into .tools/ and runs it \
                 on 127.0.0.1:4566), or point AWS_ENDPOINT_URL_SQS at another SQS server.",
                endpoint(),
                DisplayErrorContext(&e)
            ),
            Err(e) => panic!(
                "the SQS server at {} refused to create queue {name}: {}",
                endpoint(),
                DisplayErrorContext(&e)
            ),
        };
        TestQueue { client, name, url }
    }

    /// The queue URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The queue name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client the queue was created with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Long-polls until `expected` messages were read or `timeout` passed, deleting what it reads,
    /// and returns the messages in the order received (possibly more than `expected` when the
    /// last receive brought more; fewer on time-out).
    ///
    /// # Panics
    ///
    /// When a receive or delete call fails.
    pub async fn receive_all(&self, expected: usize, timeout: Duration) -> Vec<ReceivedMessage> {
        let deadline = Instant::now() + timeout;
        let mut received = Vec::new();
        while received.len() < expected {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // Long polls last whole seconds; below one second, poll briefly.
            let wait = i32::try_from(left.as_secs().min(1)).unwrap_or(1);
            let out = self
                .client
                .receive_message()
                .queue_url(&self.url)
                .max_number_of_messages(10)
                .wait_time_seconds(wait)
                .message_attribute_names("All")
                .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
                .message_system_attribute_names(MessageSystemAttributeName::MessageDeduplicationId)
                .send()
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "ReceiveMessage on {}: {}",
                        self.url,
                        DisplayErrorContext(&e)
                    )
                });
            let messages = out.messages();
            if messages.is_empty() && wait == 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            for m in messages {
                if let Some(handle) = m.receipt_handle() {
                    self.client
                        .delete_message()
                        .queue_url(&self.url)
                        .receipt_handle(handle)
                        .send()
                        .await
                        .unwrap_or_else(|e| {
                            panic!("DeleteMessage on {}: {}", self.url, DisplayErrorContext(&e))
                        });
                }
                let mut attributes = BTreeMap::new();
                let mut attribute_types = BTreeMap::new();
                for (name, value) in m.message_attributes().into_iter().flatten() {
                    attributes.insert(
                        name.clone(),
                        value.string_value().unwrap_or_default().to_owned(),
                    );
                    attribute_types.insert(name.clone(), value.data_type().to_owned());
                }
                let system = |name: MessageSystemAttributeName| {
                    m.attributes().and_then(|a| a.get(&name)).cloned()
                };
                received.push(ReceivedMessage {
                    message_id: m.message_id().unwrap_or_default().to_owned(),
                    body: m.body().unwrap_or_default().to_owned(),
                    attributes,
                    attribute_types,
                    group_id: system(MessageSystemAttributeName::MessageGroupId),
                    dedup_id: system(MessageSystemAttributeName::MessageDeduplicationId),
                });
            }
        }
        received
    }
}

impl Drop for TestQueue {
    fn drop(&mut self) {
        // Best effort, without blocking on the test's runtime (whose pooled connections a blocked
        // thread could not drive): a fresh client on a short-lived runtime in another thread.
        let url = std::mem::take(&mut self.url);
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("drop-test-queue".into())
            .spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    rt.block_on(async {
                        let client = sqs_client().await;
                        let delete = client.delete_queue().queue_url(url).send();
                        let _ = tokio::time::timeout(Duration::from_secs(5), delete).await;
                    });
                }
                let _ = done.send(());
            });
        if spawned.is_ok() {
            let _ = wait.recv_timeout(Duration::from_secs(6));
        }
    }
}
