//! S3 offload of large payloads, in the format of the AWS SQS/SNS Extended Client libraries.
//!
//! An event whose message would be larger than the threshold is written to S3 first, at
//! [`offload_key`]`(event_id)`; the message then carries a pointer instead of the payload:
//!
//! - body: `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"B","s3Key":"K"}]`;
//! - one more message attribute, [`EXTENDED_PAYLOAD_SIZE_ATTRIBUTE`] (`ExtendedPayloadSize`), of
//!   data type `Number`: the payload's size in bytes.
//!
//! This is what the Java `amazon-sqs-java-extended-client-lib` 2.x and
//! `amazon-sns-java-extended-client-lib` 2.x write and read, and what the Python
//! `amazon-sqs-extended-client` reads (it also accepts the legacy attribute `SQSLargePayloadSize`;
//! this crate writes the current name only).

use std::collections::{HashMap, HashSet};

use aws_sdk_s3::Client;
use outbox_core::limits::{CharacterSet, MessageLimits};
use outbox_core::message::message_size;
use outbox_core::{ClaimedEvent, FailureKind, PublishFailure, PublishOutcome};

use std::sync::Arc;
use std::time::Duration;

use crate::breaker::{Admit, Breaker};
use crate::detached::{Detached, Known};
use crate::down::Gate;
use crate::in_progress::{UploadResult, uploading_still};
use crate::publisher::SqsPublisher;
use crate::s3_down::S3Down;
use crate::slow_upload::SlowUploads;
use crate::upload_pace::UploadPace;
use crate::upload_slots::UploadSlots;

/// The message attribute that marks an offloaded message and holds the payload's size in bytes
/// (data type `Number`): the reserved name of the AWS Extended Client libraries.
pub const EXTENDED_PAYLOAD_SIZE_ATTRIBUTE: &str = "ExtendedPayloadSize";

/// The class name the pointer body starts with (the Extended Client libraries' `PayloadS3Pointer`).
pub const PAYLOAD_POINTER_CLASS: &str = "software.amazon.payloadoffloading.PayloadS3Pointer";

/// The prefix of every offloaded object's key: scope an S3 lifecycle rule to it.
pub const OFFLOAD_KEY_PREFIX: &str = "outbox/";

/// The largest message (payload and attributes) a publisher that offloads accepts: 64 MiB. S3
/// takes objects of up to 5 GiB in one `PutObject`, but the relay holds a claimed event in memory
/// (twice while writing it to S3) and PostgreSQL's `jsonb` stops at 255 MiB; 64 MiB keeps one event
/// far from both.
pub const OFFLOAD_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The limits of a publisher that offloads: [`OFFLOAD_MAX_MESSAGE_BYTES`], XML characters.
pub const OFFLOAD_LIMITS: MessageLimits = MessageLimits::new(
    "the S3 offload",
    OFFLOAD_MAX_MESSAGE_BYTES,
    CharacterSet::Xml,
);

/// The S3 key of an offloaded payload: [`OFFLOAD_KEY_PREFIX`] followed by the event id
/// (hyphenated, lower case). Deterministic, so a re-send after a crash overwrites the same object.
///
/// ```
/// assert_eq!(
///     outbox_sqs::offload_key("6f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6"),
///     "outbox/6f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6"
/// );
/// ```
pub fn offload_key(event_id: &str) -> String {
    format!("{OFFLOAD_KEY_PREFIX}{event_id}")
}

/// The message body that points at an offloaded payload, in the Extended Client format.
///
/// ```
/// assert_eq!(
///     outbox_sqs::pointer_body("my-bucket", "outbox/42"),
///     r#"["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"my-bucket","s3Key":"outbox/42"}]"#
/// );
/// ```
pub fn pointer_body(bucket: &str, key: &str) -> String {
    serde_json::json!([PAYLOAD_POINTER_CLASS, {"s3BucketName": bucket, "s3Key": key}]).to_string()
}

/// The bytes SQS and SNS count for the [`EXTENDED_PAYLOAD_SIZE_ATTRIBUTE`] of a payload of
/// `payload_len` bytes: name, data type and value.
pub(crate) fn size_attribute_len(payload_len: usize) -> usize {
    EXTENDED_PAYLOAD_SIZE_ATTRIBUTE.len() + "Number".len() + payload_len.to_string().len()
}

/// The outcome of an event whose upload the bucket refused, or whose bucket's breaker is open:
/// put back, or dead-lettered once the bucket has refused longer than the limit.
pub(crate) fn refused(failure: PublishFailure, dead_letter: bool) -> PublishOutcome {
    if dead_letter {
        PublishOutcome::Permanent(failure)
    } else {
        PublishOutcome::Unavailable(failure)
    }
}

/// `out` with the events at `indexes` [refused](refused) for `reason`.
fn refuse_all(
    mut out: HashMap<usize, std::result::Result<Offloaded, PublishOutcome>>,
    indexes: &[usize],
    reason: &str,
    dead_letter: bool,
) -> HashMap<usize, std::result::Result<Offloaded, PublishOutcome>> {
    for &i in indexes {
        let failure = PublishFailure::new(FailureKind::Destination, reason);
        out.insert(i, Err(refused(failure, dead_letter)));
    }
    out
}

/// `out` with the events at `indexes` put back, uncounted, while S3 is down.
fn wait_all(
    mut out: HashMap<usize, std::result::Result<Offloaded, PublishOutcome>>,
    indexes: &[usize],
    failure: &PublishFailure,
) -> HashMap<usize, std::result::Result<Offloaded, PublishOutcome>> {
    for &i in indexes {
        out.insert(i, Err(PublishOutcome::Unavailable(failure.clone())));
    }
    out
}

/// A payload written to S3: what the message carries instead.
#[derive(Debug, Clone)]
pub(crate) struct Offloaded {
    /// The pointer body.
    pub(crate) body: String,
    /// The payload's size in bytes (the attribute's value).
    pub(crate) payload_len: usize,
}

/// Writes payloads to the offload bucket.
#[derive(Debug)]
pub(crate) struct Offloader {
    pub(crate) client: Client,
    pub(crate) bucket: String,
    /// Offload messages larger than this; `None`: larger than their destination's limit.
    pub(crate) threshold: Option<usize>,
    /// The events whose last upload timed out while S3 answered.
    pub(crate) slow: SlowUploads,
    /// The bucket's circuit breaker: opened by a refusal (the bucket missing, access denied).
    pub(crate) breaker: Breaker,
    /// Whether S3 is down (no answer, 5xx): its events wait, uncounted, never dead-lettered.
    pub(crate) down: Arc<S3Down>,
    /// The uploads in flight at once, across publishes, apart from the calls' (sharing the
    /// calls' slots, slow uploads held them and the events that need no upload waited: review).
    /// A running upload holds one, its publish gone or not.
    pub(crate) slots: UploadSlots,
    /// How long a publish waits for an upload (see `detached.rs`).
    pub(crate) offload_wait: Duration,
    /// The uploads going on without their publish, and their results.
    pub(crate) detached: Arc<Detached<UploadResult>>,
    /// Whether uploads outlast the wait right now (then publishes do not wait for them).
    pub(crate) pace: UploadPace,
}

impl SqsPublisher {
    /// The events (by index, of those at `order`) whose messages are over the offload threshold:
    /// their payloads go to S3 before they are sent. Empty without offload.
    pub(crate) fn to_offload(&self, events: &[ClaimedEvent], order: &[usize]) -> HashSet<usize> {
        let Some(offload) = &self.inner.offload else {
            return HashSet::new();
        };
        order
            .iter()
            .copied()
            .filter(|&i| self.over_threshold(offload, &events[i]))
            .collect()
    }

    /// Whether the message of `e` is over the offload threshold of its destination.
    fn over_threshold(&self, offload: &Offloader, e: &ClaimedEvent) -> bool {
        self.inner.router.route(&e.event_type).is_some_and(|queue| {
            // A threshold set above what the queue or topic takes (checked against the
            // service's limit at build; the queue's own `MaximumMessageSize` is read later,
            // by the start-up check or a probe: `max_message.rs`) gives way to that limit: a
            // message between the two is offloaded, not refused as too large.
            let limit = queue.limits().max_message_bytes();
            let threshold = offload.threshold.map_or(limit, |t| t.min(limit));
            let trace = e.traceparent().filter(|t| !t.is_empty());
            let size = message_size(
                e.payload().len(),
                &e.event_type,
                &e.aggregate_type,
                &e.aggregate_id,
                trace,
            );
            size > threshold
        })
    }

    /// Writes the payloads of the events (by index, in `order`) whose messages are over the
    /// offload threshold to S3, concurrently within the in-flight limit. Returns, by index, the
    /// pointer of each, or the outcome of an event that cannot be sent now (the message is never
    /// sent without its object): `Unavailable` when S3 is unreachable, too slow or failing (5xx)
    /// — down, once a `HeadBucket` is not answered either (see [`S3Down`]; an upload unanswered
    /// after a second is checked so while it runs: `upload_watch.rs`) — when the deadline
    /// would pass first, or when S3 refuses (the bucket missing, access denied:
    /// the bucket's breaker opens, as a queue's does, and its events become `Permanent` once it
    /// has refused longer than the broken-destination limit); `Permanent` above
    /// [`OFFLOAD_MAX_MESSAGE_BYTES`]. Empty without offload.
    pub(crate) async fn offload_large(
        &self,
        events: &[ClaimedEvent],
        order: &[usize],
        deadline: Option<tokio::time::Instant>,
    ) -> HashMap<usize, std::result::Result<Offloaded, PublishOutcome>> {
        let Some(offload) = &self.inner.offload else {
            return HashMap::new();
        };
        let large = order
            .iter()
            .copied()
            .filter(|&i| self.over_threshold(offload, &events[i]));
        let mut out = HashMap::new();
        let (too_large, large): (Vec<usize>, Vec<usize>) =
            large.partition(|&i| events[i].payload().len() > OFFLOAD_MAX_MESSAGE_BYTES);
        for i in too_large {
            let failure = PublishFailure::new(
                FailureKind::TooLarge,
                format!(
                    "the payload is {} bytes; the publisher offloads at most \
                     {OFFLOAD_MAX_MESSAGE_BYTES}",
                    events[i].payload().len()
                ),
            );
            out.insert(i, Err(PublishOutcome::Permanent(failure)));
        }
        if large.is_empty() {
            return out;
        }
        // What became of the uploads that went on without their publish: their pointers are
        // sent without uploading again, and a counted failure counts now. An upload put back
        // uncounted (S3 down, a first slow-link time-out) starts over, as a new one would.
        let mut fresh = Vec::with_capacity(large.len());
        for i in large {
            let e = &events[i];
            match offload.detached.take(e.id) {
                Known::Done(Err(PublishOutcome::Unavailable(_))) | Known::Unknown => fresh.push(i),
                Known::Done(result) => {
                    out.insert(i, result);
                }
                Known::Running => {
                    out.insert(i, Err(uploading_still(e.payload().len())));
                }
            }
        }
        let large = fresh;
        if large.is_empty() {
            return out;
        }
        let put_one =
            |i: usize| async move { (i, self.offload_one(offload, &events[i], deadline).await) };
        // The bucket's breaker admits a batch's uploads as a queue's admits a call: all of them;
        // none (put back, or past the limit dead-lettered); or, as its probe, the first, and the
        // others once the probe closed it (admitted one by one, the others were dead-lettered
        // past the limit while the probe that closed the breaker was under way).
        let rest = match offload.breaker.admit() {
            Admit::Call => &large[..],
            Admit::Refuse {
                reason,
                dead_letter,
            } => {
                return refuse_all(out, &large, &reason, dead_letter);
            }
            Admit::Probe => {
                let (i, outcome) = put_one(large[0]).await;
                out.insert(i, outcome);
                if let Some((reason, dead_letter)) = offload.breaker.refusal() {
                    return refuse_all(out, &large[1..], &reason, dead_letter);
                }
                &large[1..]
            }
        };
        // S3 down: its events put back at once (a task of its own probes it).
        if let Gate::Wait(failure) = offload.down.gate() {
            return wait_all(out, rest, &failure);
        }
        out.extend(futures::future::join_all(rest.iter().map(|&i| put_one(i))).await);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_is_the_extended_client_format_and_escapes() {
        let body = pointer_body("b", "outbox/1");
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed[0], PAYLOAD_POINTER_CLASS);
        assert_eq!(parsed[1]["s3BucketName"], "b");
        assert_eq!(parsed[1]["s3Key"], "outbox/1");
        assert_eq!(parsed.as_array().unwrap().len(), 2);
        // Odd characters stay valid JSON.
        let odd: serde_json::Value = serde_json::from_str(&pointer_body("b\"x", "k\\y")).unwrap();
        assert_eq!(odd[1]["s3BucketName"], "b\"x");
    }

    #[test]
    fn key_is_deterministic_and_prefixed() {
        assert_eq!(offload_key("abc"), "outbox/abc");
        assert_eq!(offload_key("abc"), offload_key("abc"));
    }

    #[test]
    fn size_attribute_counts_name_type_and_digits() {
        assert_eq!(size_attribute_len(20_971_520), 19 + 6 + 8);
        assert_eq!(size_attribute_len(0), 19 + 6 + 1);
    }
}
