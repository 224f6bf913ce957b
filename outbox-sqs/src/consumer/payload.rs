//! The body a handler's event is decoded from: the message's own, or, for a message whose payload
//! the publisher offloaded to S3 (the Extended Client format, see [`crate::offload`]), the object
//! its pointer names.
//!
//! The object is not deleted after the event is handled: with SNS fan-out every subscribed queue
//! carries a pointer to the same object. Expire them with an S3 lifecycle rule on the
//! [`OFFLOAD_KEY_PREFIX`](crate::OFFLOAD_KEY_PREFIX) (longer than the queues' retention).

use std::borrow::Cow;
use std::time::Duration;

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::Message;
use outbox_core::FailureKind;
use serde::Deserialize;

use super::config::ConsumerConfig;
use super::gate::ProbeError;
use crate::s3::kind_of;

use crate::offload::{EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, PAYLOAD_POINTER_CLASS};

/// The attribute older Extended Client libraries set instead of [`EXTENDED_PAYLOAD_SIZE_ATTRIBUTE`].
const LEGACY_PAYLOAD_SIZE_ATTRIBUTE: &str = "SQSLargePayloadSize";

/// The pointer class older Extended Client libraries write (the Java 1.x library, the Python one
/// with its legacy attribute); today's readers accept it beside [`PAYLOAD_POINTER_CLASS`].
const LEGACY_POINTER_CLASS: &str = "com.amazon.sqs.javamessaging.MessageS3Pointer";

/// How much longer than the call time-out reading an offloaded object may take, per MiB it holds.
const PER_MIB: Duration = Duration::from_secs(1);

/// Why the body could not be had.
#[derive(Debug)]
pub(crate) enum PayloadError {
    /// Marked offloaded, but the pointer is not one this consumer reads (see
    /// [`BadInput::BadPointer`](super::BadInput::BadPointer)): bad input.
    Malformed(String),
    /// S3 refused the object (missing, denied): a failed delivery.
    Fetch(String),
    /// S3 is failing (unreachable, too slow, a server error): a failed delivery, and reading
    /// offloaded payloads waits until S3 answers again (see [`Gate`](super::gate::Gate)).
    Unavailable(String),
}

/// The pointer's second element.
#[derive(Deserialize)]
struct Pointer {
    #[serde(rename = "s3BucketName")]
    bucket: String,
    #[serde(rename = "s3Key")]
    key: String,
}

/// The declared size of an offloaded payload, when `message` is marked offloaded: `Err` when it
/// is not a byte count (a black-box run's `abc` and 20-digit sizes read as 0, and the object was
/// then refused as "larger than the message says 0").
pub(crate) fn offloaded_size(message: &Message) -> Option<Result<u64, PayloadError>> {
    let attributes = message.message_attributes()?;
    let (name, value) = [
        EXTENDED_PAYLOAD_SIZE_ATTRIBUTE,
        LEGACY_PAYLOAD_SIZE_ATTRIBUTE,
    ]
    .into_iter()
    .find_map(|name| attributes.get(name).map(|v| (name, v)))?;
    let text = value.string_value().unwrap_or_default().trim();
    Some(text.parse().map_err(|_| {
        let shown: String = text.chars().take(40).collect();
        PayloadError::Malformed(format!(
            "marked offloaded, but its {name} `{shown}` is not a byte count"
        ))
    }))
}

/// The bucket an offloaded `message` points into; `None` when it carries its payload (or its
/// pointer or its size is malformed: that is found when it is read).
pub(crate) fn offloaded_bucket(message: &Message) -> Option<String> {
    offloaded_size(message)?.ok()?;
    pointer(message.body().unwrap_or_default())
        .ok()
        .map(|p| p.bucket)
}

/// Probes `bucket` with `HeadBucket` within `timeout`: any answer of S3 (the bucket missing or
/// denied included) is an answer; no answer in time, no connection or a server error is not.
pub(crate) async fn probe_bucket(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    timeout: Duration,
) -> Result<(), ProbeError> {
    match tokio::time::timeout(timeout, s3.head_bucket().bucket(bucket).send()).await {
        Err(_) => Err(ProbeError::Silent(timeout)),
        Ok(Err(e)) if is_outage(&e) => Err(ProbeError::Failed(outbox_core::error_chain(&e))),
        Ok(_) => Ok(()),
    }
}

/// Whether an S3 call's error says S3 is failing rather than refusing this request.
fn is_outage<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> bool {
    matches!(
        kind_of(e),
        FailureKind::Timeout | FailureKind::Unreachable | FailureKind::Broker
    )
}

/// Why an offloaded payload was not read.
enum Unread {
    /// S3 failing, unreachable, or the transfer cut off.
    Outage(String),
    /// S3 refused (the object gone, access denied).
    Failed(String),
    /// The object is far larger than the message says, or of no stated length.
    TooLarge(Option<u64>),
}

/// How many times the size a message declares (`ExtendedPayloadSize`) its object may be, at
/// least 1 MiB: other clients may count the size differently, never by this much.
const SIZE_SLACK: u64 = 4;

/// The bucket and key of a pointer body.
fn pointer(body: &str) -> Result<Pointer, PayloadError> {
    let malformed =
        || PayloadError::Malformed("marked offloaded, but the body is not an S3 pointer".into());
    let (class, pointer): (String, Pointer) =
        serde_json::from_str(body).map_err(|_| malformed())?;
    if class != PAYLOAD_POINTER_CLASS && class != LEGACY_POINTER_CLASS {
        return Err(malformed());
    }
    Ok(pointer)
}

/// Whether a pointer into `bucket` may be read, given the consumer's `offload_buckets` (empty:
/// any).
pub(crate) fn may_read(allowed: &[String], bucket: &str) -> bool {
    allowed.is_empty() || allowed.iter().any(|b| b == bucket)
}

/// The body of `message`: its own, or the S3 object its pointer names (read within the call
/// time-out and a second per MiB begun of the declared size), from one of the configured
/// `offload_buckets` only.
pub(crate) async fn body<'m>(
    s3: &aws_sdk_s3::Client,
    message: &'m Message,
    config: &ConsumerConfig,
) -> Result<Cow<'m, str>, PayloadError> {
    let call_timeout = config.call_timeout;
    let own = message.body().unwrap_or_default();
    let Some(size) = offloaded_size(message) else {
        return Ok(Cow::Borrowed(own));
    };
    let size = size?;
    let Pointer { bucket, key } = pointer(own)?;
    if !may_read(&config.offload_buckets, &bucket) {
        let shown: String = bucket.chars().take(64).collect();
        return Err(PayloadError::Malformed(format!(
            "the pointer names bucket `{shown}`, not one of this consumer's offload buckets: \
             not read"
        )));
    }
    let mib = u32::try_from(size.div_ceil(1024 * 1024)).unwrap_or(u32::MAX);
    let limit = call_timeout.saturating_add(PER_MIB.saturating_mul(mib));
    // Held in memory whole: an object much larger than the message says is not read (a pointer
    // to a multi-GB object would exhaust the consumer's memory: review).
    let most = size.saturating_mul(SIZE_SLACK).max(1024 * 1024);
    let read = async {
        let object = s3
            .get_object()
            .bucket(&bucket)
            .key(&key)
            .send()
            .await
            .map_err(|e| {
                let outage = is_outage(&e);
                // S3's code and message, not the SDK's `Debug` of them.
                let text = crate::sdk_error::sdk_error("GetObject", e)
                    .message()
                    .to_owned();
                if outage {
                    Unread::Outage(text)
                } else {
                    Unread::Failed(text)
                }
            })?;
        let length = object.content_length().and_then(|n| u64::try_from(n).ok());
        if length.is_none_or(|n| n > most) {
            return Err(Unread::TooLarge(length));
        }
        // Cut off while the object streams in: the connection failed.
        let bytes = object
            .body
            .collect()
            .await
            .map_err(|e| Unread::Outage(outbox_core::error_chain(&e)))?;
        Ok(bytes.into_bytes())
    };
    let cannot = |e: String| format!("cannot read the offloaded payload s3://{bucket}/{key}: {e}");
    let bytes = match tokio::time::timeout(limit, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(Unread::Outage(e))) => return Err(PayloadError::Unavailable(cannot(e))),
        Ok(Err(Unread::Failed(e))) => return Err(PayloadError::Fetch(cannot(e))),
        Ok(Err(Unread::TooLarge(length))) => {
            let length = length.map_or_else(
                || "of no stated length".to_owned(),
                |n| format!("{n} bytes"),
            );
            return Err(PayloadError::Malformed(format!(
                "the offloaded payload s3://{bucket}/{key} is {length}, where the message says \
                 {size}: not read"
            )));
        }
        Err(_) => {
            return Err(PayloadError::Unavailable(format!(
                "reading the offloaded payload s3://{bucket}/{key} took longer than {limit:?}"
            )));
        }
    };
    String::from_utf8(bytes.to_vec())
        .map(Cow::Owned)
        .map_err(|_| PayloadError::Malformed("the offloaded payload is not UTF-8 text".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sqs::types::MessageAttributeValue;

    fn number(v: &str) -> MessageAttributeValue {
        MessageAttributeValue::builder()
            .data_type("Number")
            .string_value(v)
            .build()
            .unwrap()
    }

    #[test]
    fn a_pointer_is_read_from_either_attribute_and_checked() {
        let body = crate::offload::pointer_body("b", "outbox/1");
        let m = Message::builder()
            .body(&body)
            .message_attributes(EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, number("3000000"))
            .build();
        assert_eq!(offloaded_size(&m).unwrap().ok(), Some(3_000_000));
        let p = pointer(m.body().unwrap()).unwrap();
        assert_eq!((p.bucket.as_str(), p.key.as_str()), ("b", "outbox/1"));
        let legacy = Message::builder()
            .body(&body)
            .message_attributes(LEGACY_PAYLOAD_SIZE_ATTRIBUTE, number("10"))
            .build();
        assert_eq!(offloaded_size(&legacy).unwrap().ok(), Some(10));
        // The pointer class the older libraries write with that attribute (it was refused as
        // malformed: bad input, deleted or dead-lettered).
        let p = pointer(
            r#"["com.amazon.sqs.javamessaging.MessageS3Pointer",{"s3BucketName":"b","s3Key":"k"}]"#,
        )
        .unwrap();
        assert_eq!((p.bucket.as_str(), p.key.as_str()), ("b", "k"));
        assert!(offloaded_size(&Message::builder().body("{}").build()).is_none());
        // A size that is not a byte count is malformed, saying so (it read as 0).
        for bad in ["abc", "", "-5", "12345678901234567890123", "1.5"] {
            let m = Message::builder()
                .body(&body)
                .message_attributes(EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, number(bad))
                .build();
            match offloaded_size(&m) {
                Some(Err(PayloadError::Malformed(reason))) => {
                    assert!(reason.contains("is not a byte count"), "{reason}")
                }
                other => panic!("{bad}: {:?}", other.map(|r| r.ok())),
            }
        }
        assert!(matches!(pointer("{}"), Err(PayloadError::Malformed(_))));
        assert!(matches!(
            pointer(r#"["some.OtherClass",{"s3BucketName":"b","s3Key":"k"}]"#),
            Err(PayloadError::Malformed(_))
        ));
    }
}
