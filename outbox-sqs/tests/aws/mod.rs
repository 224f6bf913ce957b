//! SNS and S3 test support: throwaway topics, subscriptions and buckets on the local AWS emulator
//! (fauxqs serves SQS, SNS and S3 on one port; `bash scripts/services.sh` starts it). The endpoint
//! is the SQS one of `outbox_tests::sqs` (`AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL`, or
//! `http://127.0.0.1:4566`), used for all three services.
#![allow(dead_code)]

use aws_sdk_sns::error::{DisplayErrorContext, SdkError};
use aws_sdk_sqs::types::QueueAttributeName;
use outbox_tests::sqs::{TestQueue, endpoint, sdk_config};

fn unreachable(service: &str, e: &dyn std::fmt::Display) -> ! {
    panic!(
        "cannot reach the local {service} server at {}: {e}\n\
         Start it with `bash scripts/services.sh` (installs fauxqs, which serves SQS, SNS and S3, \
         into .tools/ and runs it on 127.0.0.1:4566), or point AWS_ENDPOINT_URL_SQS at a server \
         that speaks SQS, SNS and S3.",
        endpoint()
    )
}

/// An SNS client for the local server.
pub async fn sns_client() -> aws_sdk_sns::Client {
    let sdk = sdk_config().await;
    aws_sdk_sns::Client::from_conf(
        aws_sdk_sns::config::Builder::from(&sdk)
            .endpoint_url(endpoint())
            .build(),
    )
}

/// An S3 client for the local server (path-style addressing).
pub async fn s3_client() -> aws_sdk_s3::Client {
    let sdk = sdk_config().await;
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .endpoint_url(endpoint())
            .force_path_style(true)
            .build(),
    )
}

/// A fresh topic (deleted, best effort, when dropped).
pub struct TestTopic {
    pub client: aws_sdk_sns::Client,
    pub arn: String,
}

impl TestTopic {
    /// A standard topic.
    pub async fn standard() -> TestTopic {
        Self::create(false, None).await
    }

    /// A FIFO topic (`….fifo`, no content-based deduplication).
    pub async fn fifo() -> TestTopic {
        Self::create(true, None).await
    }

    /// A standard topic with its `MaximumMessageSize` set to `bytes`.
    pub async fn with_max_message_size(bytes: usize) -> TestTopic {
        Self::create(false, Some(bytes)).await
    }

    async fn create(fifo: bool, max_message_size: Option<usize>) -> TestTopic {
        let client = sns_client().await;
        let mut name = format!("outbox-test-{}", uuid::Uuid::new_v4().simple());
        let mut request = client.create_topic();
        if fifo {
            name.push_str(".fifo");
            request = request.attributes("FifoTopic", "true");
        }
        if let Some(bytes) = max_message_size {
            request = request.attributes("MaximumMessageSize", bytes.to_string());
        }
        match request.name(&name).send().await {
            Ok(out) => TestTopic {
                arn: out
                    .topic_arn()
                    .expect("CreateTopic returns an ARN")
                    .to_owned(),
                client,
            },
            Err(e @ (SdkError::DispatchFailure(_) | SdkError::TimeoutError(_))) => {
                unreachable("SNS", &DisplayErrorContext(&e))
            }
            Err(e) => panic!("CreateTopic {name}: {}", DisplayErrorContext(&e)),
        }
    }

    /// Subscribes `queue` to the topic, with raw message delivery on or off.
    pub async fn subscribe(&self, queue: &TestQueue, raw: bool) {
        let arn = queue
            .client()
            .get_queue_attributes()
            .queue_url(queue.url())
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .expect("GetQueueAttributes")
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
            .expect("a queue ARN");
        self.client
            .subscribe()
            .topic_arn(&self.arn)
            .protocol("sqs")
            .endpoint(arn)
            .attributes("RawMessageDelivery", if raw { "true" } else { "false" })
            .send()
            .await
            .unwrap_or_else(|e| panic!("Subscribe: {}", DisplayErrorContext(&e)));
    }

    /// Deletes the topic now.
    pub async fn delete(&self) {
        self.client
            .delete_topic()
            .topic_arn(&self.arn)
            .send()
            .await
            .unwrap_or_else(|e| panic!("DeleteTopic: {}", DisplayErrorContext(&e)));
    }
}

/// A fresh bucket name (the bucket is created by [`create_bucket`]).
pub fn bucket_name() -> String {
    format!("outbox-test-{}", uuid::Uuid::new_v4().simple())
}

/// Creates bucket `name`.
pub async fn create_bucket(s3: &aws_sdk_s3::Client, name: &str) {
    match s3.create_bucket().bucket(name).send().await {
        Ok(_) => {}
        Err(e @ (SdkError::DispatchFailure(_) | SdkError::TimeoutError(_))) => {
            unreachable("S3", &DisplayErrorContext(&e))
        }
        Err(e) => panic!("CreateBucket {name}: {}", DisplayErrorContext(&e)),
    }
}

/// The object at `key`, or `None` when there is none.
pub async fn get_object(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Option<Vec<u8>> {
    match s3.get_object().bucket(bucket).key(key).send().await {
        Ok(out) => Some(
            out.body
                .collect()
                .await
                .expect("read the object")
                .into_bytes()
                .to_vec(),
        ),
        Err(SdkError::ServiceError(ctx)) if ctx.raw().status().as_u16() == 404 => None,
        Err(e) => panic!("GetObject {bucket}/{key}: {}", DisplayErrorContext(&e)),
    }
}

/// A new bucket and a new standard queue.
pub async fn bucket_and_queue() -> (String, TestQueue) {
    let s3 = s3_client().await;
    let bucket = bucket_name();
    create_bucket(&s3, &bucket).await;
    (bucket, TestQueue::standard().await)
}

/// The emulator's address, for a proxy in front of it.
pub fn upstream() -> std::net::SocketAddr {
    endpoint()
        .trim_start_matches("http://")
        .parse()
        .expect("the SQS endpoint is http://host:port")
}

/// A publisher builder offloading every message over 1 KiB to `bucket` through the proxy at `s3`
/// (its SQS calls straight to the server), one attempt per call, with `call_timeout`.
pub async fn offloading(
    s3: std::net::SocketAddr,
    queue: &TestQueue,
    bucket: &str,
    call_timeout: std::time::Duration,
) -> outbox_sqs::SqsPublisherBuilder {
    use outbox_tests::sqs::sdk_config_for;
    let sqs = aws_sdk_sqs::Client::new(&sdk_config_for(&endpoint()).await);
    outbox_sqs::SqsPublisher::builder()
        .sdk_config(sdk_config_for(&format!("http://{s3}")).await)
        .client(sqs)
        .max_attempts(1)
        .call_timeout(call_timeout)
        .default_queue(queue.url())
        .offload_bucket(bucket)
        .offload_threshold(1024)
}
