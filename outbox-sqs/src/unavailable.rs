//! What a publisher cannot reach now: the queues, topics and offload bucket whose circuit breaker
//! is open, for a health check or a status page.

use std::time::Duration;

use crate::destination::DestinationKind;
use crate::publisher::SqsPublisher;

/// A queue or topic whose circuit breaker is open (see [`SqsPublisher::unavailable_queues`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnavailableQueue {
    /// The queue's URL, or the topic's ARN.
    pub url: String,
    /// A queue or a topic.
    pub kind: DestinationKind,
    /// How long since its first failure of this open period.
    pub unavailable_for: Duration,
    /// The last SQS or SNS error seen for it.
    pub last_error: String,
}

/// The offload bucket while its circuit breaker is open (see
/// [`SqsPublisher::unavailable_bucket`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnavailableBucket {
    /// The bucket's name.
    pub bucket: String,
    /// How long since its first refusal of this open period.
    pub unavailable_for: Duration,
    /// The last S3 error seen for it.
    pub last_error: String,
}

impl SqsPublisher {
    /// The queues and topics whose circuit breaker is open now: they failed as a whole — missing,
    /// access or key denied, throttled — and have not answered normally since. The offload
    /// bucket is not a queue: see [`unavailable_bucket`](SqsPublisher::unavailable_bucket).
    pub fn unavailable_queues(&self) -> Vec<UnavailableQueue> {
        self.inner
            .queues
            .iter()
            .filter_map(|q| {
                q.breaker
                    .broken_for()
                    .map(|(unavailable_for, last_error)| UnavailableQueue {
                        url: q.url.clone(),
                        kind: q.kind,
                        unavailable_for,
                        last_error,
                    })
            })
            .collect()
    }

    /// The offload bucket while its circuit breaker is open — S3 refused an upload as a whole:
    /// the bucket missing, access or its KMS key denied — and no upload has succeeded since;
    /// `None` while it works, and without offload. Its large events wait meanwhile, as a broken
    /// queue's do (the `outbox_s3_bucket_unavailable` gauge says the same).
    pub fn unavailable_bucket(&self) -> Option<UnavailableBucket> {
        let offload = self.inner.offload.as_ref()?;
        offload
            .breaker
            .broken_for()
            .map(|(unavailable_for, last_error)| UnavailableBucket {
                bucket: offload.bucket.clone(),
                unavailable_for,
                last_error,
            })
    }
}
