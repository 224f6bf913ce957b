//! The publisher's own Prometheus metrics: which queues, topics and buckets are unavailable
//! (circuit breaker open: they refuse) or down (they do not answer).
//!
//! | name | type | meaning |
//! |---|---|---|
//! | `outbox_sqs_queue_unavailable{queue}` | gauge | 1 while the queue's circuit breaker is open, else 0 |
//! | `outbox_sns_topic_unavailable{topic}` | gauge | 1 while the topic's circuit breaker is open, else 0 |
//! | `outbox_s3_bucket_unavailable{bucket}` | gauge | 1 while the offload bucket's circuit breaker is open (S3 refused an upload: the bucket missing, access denied), else 0 |
//! | `outbox_sqs_queue_down{queue}` | gauge | 1 while the queue does not answer (down: its events wait, uncounted), else 0 |
//! | `outbox_sns_topic_down{topic}` | gauge | 1 while the topic does not answer, else 0 |
//! | `outbox_s3_down{bucket}` | gauge | 1 while S3 does not answer for the offload bucket (offloaded events wait, uncounted), else 0 |

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    queue: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TopicLabel {
    topic: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BucketLabel {
    bucket: String,
}

/// The registry of the publisher's metrics and the gauge families in it.
pub(crate) struct SqsMetrics {
    registry: Registry,
    unavailable: Family<QueueLabel, Gauge>,
    topic_unavailable: Family<TopicLabel, Gauge>,
    bucket_unavailable: Family<BucketLabel, Gauge>,
    queue_down: Family<QueueLabel, Gauge>,
    topic_down: Family<TopicLabel, Gauge>,
    s3_down: Family<BucketLabel, Gauge>,
}

impl SqsMetrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::default();
        let unavailable = Family::<QueueLabel, Gauge>::default();
        registry.register(
            "outbox_sqs_queue_unavailable",
            "1 while the queue's circuit breaker is open (it failed as a whole and has not \
             answered normally since), else 0",
            unavailable.clone(),
        );
        let topic_unavailable = Family::<TopicLabel, Gauge>::default();
        registry.register(
            "outbox_sns_topic_unavailable",
            "1 while the topic's circuit breaker is open (it failed as a whole and has not \
             answered normally since), else 0",
            topic_unavailable.clone(),
        );
        let bucket_unavailable = Family::<BucketLabel, Gauge>::default();
        registry.register(
            "outbox_s3_bucket_unavailable",
            "1 while the offload bucket's circuit breaker is open (S3 refused an upload: the \
             bucket missing, access denied; not yet answered normally since), else 0",
            bucket_unavailable.clone(),
        );
        // Down, not refusing: no answer (black-box run: the gauges above stayed at 0 through S3
        // and SNS black holes, and an alert on them never fired for the commonest outage).
        let queue_down = Family::<QueueLabel, Gauge>::default();
        registry.register(
            "outbox_sqs_queue_down",
            "1 while the queue does not answer (down: its events wait, uncounted, until a probe \
             is answered), else 0",
            queue_down.clone(),
        );
        let topic_down = Family::<TopicLabel, Gauge>::default();
        registry.register(
            "outbox_sns_topic_down",
            "1 while the topic does not answer (down: its events wait, uncounted, until a probe \
             is answered), else 0",
            topic_down.clone(),
        );
        let s3_down = Family::<BucketLabel, Gauge>::default();
        registry.register(
            "outbox_s3_down",
            "1 while S3 does not answer for the offload bucket (down: offloaded events wait, \
             uncounted, until a probe upload goes through), else 0",
            s3_down.clone(),
        );
        SqsMetrics {
            registry,
            unavailable,
            topic_unavailable,
            bucket_unavailable,
            queue_down,
            topic_down,
            s3_down,
        }
    }

    /// The gauge of queue `url` (shown as 0 from now on).
    pub(crate) fn unavailable(&self, url: &str) -> Gauge {
        self.unavailable
            .get_or_create(&QueueLabel {
                queue: url.to_owned(),
            })
            .clone()
    }

    /// The gauge of topic `arn` (shown as 0 from now on).
    pub(crate) fn topic_unavailable(&self, arn: &str) -> Gauge {
        self.topic_unavailable
            .get_or_create(&TopicLabel {
                topic: arn.to_owned(),
            })
            .clone()
    }

    /// The gauge of the offload bucket `bucket` (shown as 0 from now on).
    pub(crate) fn bucket_unavailable(&self, bucket: &str) -> Gauge {
        self.bucket_unavailable
            .get_or_create(&BucketLabel {
                bucket: bucket.to_owned(),
            })
            .clone()
    }

    /// The down gauge of queue `url` (shown as 0 from now on).
    pub(crate) fn queue_down(&self, url: &str) -> Gauge {
        self.queue_down
            .get_or_create(&QueueLabel {
                queue: url.to_owned(),
            })
            .clone()
    }

    /// The down gauge of topic `arn` (shown as 0 from now on).
    pub(crate) fn topic_down(&self, arn: &str) -> Gauge {
        self.topic_down
            .get_or_create(&TopicLabel {
                topic: arn.to_owned(),
            })
            .clone()
    }

    /// The down gauge of S3 for the offload bucket `bucket` (shown as 0 from now on).
    pub(crate) fn s3_down(&self, bucket: &str) -> Gauge {
        self.s3_down
            .get_or_create(&BucketLabel {
                bucket: bucket.to_owned(),
            })
            .clone()
    }

    /// The metrics in the text exposition format (OpenMetrics, ending in `# EOF`).
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; an empty answer would be the only consequence.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
