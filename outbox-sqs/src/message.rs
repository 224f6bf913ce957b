//! From a claimed event to an SQS or SNS batch entry.

use aws_sdk_sns::types::PublishBatchRequestEntry;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use outbox_core::ClaimedEvent;
use outbox_core::limits::{CharacterSet, MessageLimits};
use outbox_core::message::{
    ATTR_AGGREGATE_ID, ATTR_AGGREGATE_TYPE, ATTR_EVENT_ID, ATTR_EVENT_TYPE, ATTR_TRACEPARENT,
    message_size,
};
use outbox_core::{FailureKind, PublishFailure};
use sha2::{Digest, Sha256};

use crate::destination::DestinationKind;
use crate::offload::{EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, Offloaded, size_attribute_len};
use crate::publisher::Queue;
use crate::sns::sns_entry;
use crate::sqs_json::entry_json;

/// What SQS accepts in a message: 1 MiB (body and attributes, counted as
/// [`message_size`](outbox_core::message::message_size) counts them) and the XML 1.0 characters.
/// [`SqsPublisher`](crate::SqsPublisher) states them as its
/// [`Publisher::limits`](outbox_core::Publisher::limits).
pub const SQS_LIMITS: MessageLimits = MessageLimits::new("SQS", 1024 * 1024, CharacterSet::Xml);

/// The longest `MessageGroupId` SQS accepts.
pub const MAX_GROUP_ID_LEN: usize = 128;

/// The prefix of a hashed `MessageGroupId`.
pub const HASHED_GROUP_ID_PREFIX: &str = "sha256:";

/// The `MessageGroupId` of an aggregate's events on a FIFO queue.
///
/// `{aggregate_type}:{aggregate_id}` when that is 1–128 characters, each an ASCII letter, digit or
/// punctuation mark (what SQS allows); otherwise `sha256:` followed by the 64 lowercase hex digits
/// of the SHA-256 of `{aggregate_type}:{aggregate_id}` (UTF-8) — deterministic across processes,
/// versions and platforms, so a consumer can compute it too.
///
/// ```
/// use outbox_sqs::message_group_id;
/// assert_eq!(message_group_id("order", "42"), "order:42");
/// let long = "x".repeat(200);
/// let hashed = message_group_id("order", &long);
/// assert!(hashed.starts_with("sha256:") && hashed.len() == 71);
/// assert_eq!(hashed, message_group_id("order", &long));
/// ```
pub fn message_group_id(aggregate_type: &str, aggregate_id: &str) -> String {
    let natural = format!("{aggregate_type}:{aggregate_id}");
    if natural.len() <= MAX_GROUP_ID_LEN && natural.chars().all(|c| c.is_ascii_graphic()) {
        return natural;
    }
    let digest = Sha256::digest(natural.as_bytes());
    let mut id = String::with_capacity(HASHED_GROUP_ID_PREFIX.len() + 64);
    id.push_str(HASHED_GROUP_ID_PREFIX);
    push_hex(&mut id, &digest);
    id
}

/// Lower-case hexadecimal digits.
pub(crate) const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `bytes` in lower-case hexadecimal.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
}

/// A batch entry's `Id`: the event's position in its `publish` call, in decimal, kept inline (no
/// allocation per event).
#[derive(Clone, Copy)]
pub(crate) struct EntryId {
    digits: [u8; 20],
    len: u8,
}

impl EntryId {
    pub(crate) fn new(index: usize) -> Self {
        let mut digits = [0u8; 20];
        let mut n = index as u64;
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        digits.copy_within(start.., 0);
        EntryId {
            digits,
            len: (20 - start) as u8,
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII digits are ever written.
        std::str::from_utf8(&self.digits[..usize::from(self.len)]).unwrap_or("")
    }
}

impl std::fmt::Debug for EntryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An event ready to send.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The event's position in the `publish` call.
    pub(crate) index: usize,
    /// The batch entry's `Id` (`index` in decimal).
    pub(crate) id: EntryId,
    /// The event id, for logs.
    pub(crate) event_id: uuid::Uuid,
    pub(crate) entry: Entry,
    /// The size SQS and SNS count: body plus attributes.
    pub(crate) size: usize,
    /// The `MessageGroupId` on a FIFO queue or topic.
    pub(crate) group: Option<String>,
}

/// A batch entry of the destination's API.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    /// For SQS's `SendMessageBatch` through the SDK ([`SqsTransport::Sdk`](crate::SqsTransport::Sdk)).
    Sqs(SendMessageBatchRequestEntry),
    /// For SQS's `SendMessageBatch` through the direct transport: the entry's JSON object, written
    /// once.
    SqsJson(String),
    /// For SNS's `PublishBatch`.
    Sns(PublishBatchRequestEntry),
}

impl Prepared {
    /// The entry's `Id` in its batch call.
    pub(crate) fn id(&self) -> &str {
        self.id.as_str()
    }
}

/// A message's content, whichever API carries it.
pub(crate) struct Parts<'a> {
    /// The batch entry's `Id`.
    pub(crate) id: &'a str,
    /// The event id: the `MessageDeduplicationId` on FIFO destinations.
    pub(crate) event_id: &'a str,
    pub(crate) body: &'a str,
    /// `(name, data type, value)`.
    pub(crate) attributes: &'a [(&'static str, &'static str, &'a str)],
    /// The `MessageGroupId` on FIFO destinations.
    pub(crate) group: Option<String>,
}

fn attribute(data_type: &str, value: &str) -> Result<MessageAttributeValue, PublishFailure> {
    MessageAttributeValue::builder()
        .data_type(data_type)
        .string_value(value)
        .build()
        .map_err(|e| {
            PublishFailure::new(
                FailureKind::InvalidContent,
                format!("cannot build a message attribute: {e}"),
            )
        })
}

/// Refuses an attribute value that `limits` (the destination's) do not accept: empty, or holding a
/// character outside its set.
fn attribute_text(
    name: &'static str,
    value: &str,
    limits: MessageLimits,
) -> Result<(), PublishFailure> {
    if value.is_empty() {
        return Err(PublishFailure::new(
            FailureKind::InvalidContent,
            format!(
                "message attribute {name} would be empty, which {} does not accept",
                limits.broker()
            ),
        ));
    }
    limits.check_text(name, value).map_err(|e| {
        PublishFailure::new(
            FailureKind::InvalidContent,
            format!("message attribute {}", e.message()),
        )
    })
}

/// Refuses a body holding a character outside `limits`' set. JSON text holds control characters
/// escaped, so the bytes are looked at first (a byte scan, cheap beside the call): only a control
/// byte or the lead byte of U+F000–U+FFFF (U+FFFE and U+FFFF among them) has the characters read.
fn body_text(body: &str, limits: MessageLimits) -> Result<(), PublishFailure> {
    let suspect = |b: &u8| (*b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) || *b == 0xEF;
    if !body.as_bytes().iter().any(suspect) {
        return Ok(());
    }
    limits
        .check_text("the payload", body)
        .map_err(|e| PublishFailure::new(FailureKind::InvalidContent, e.message().to_owned()))
}

/// The `SendMessageBatch` entry of a message.
fn sqs_entry(parts: &Parts<'_>) -> Result<SendMessageBatchRequestEntry, PublishFailure> {
    let mut entry = SendMessageBatchRequestEntry::builder()
        .id(parts.id)
        .message_body(parts.body);
    for (name, data_type, value) in parts.attributes {
        entry = entry.message_attributes(*name, attribute(data_type, value)?);
    }
    if let Some(group) = &parts.group {
        entry = entry
            .message_group_id(group.clone())
            .message_deduplication_id(parts.event_id);
    }
    entry.build().map_err(|e| {
        PublishFailure::new(
            FailureKind::InvalidContent,
            format!("cannot build the SQS entry: {e}"),
        )
    })
}

/// Builds the entry of `event` (at `index` in the call) for `queue` (an SQS queue or an SNS
/// topic, FIFO or not), carrying the payload, or the pointer to it when it was `offloaded` to S3;
/// a queue's entry as JSON when `direct` (the direct transport). `Err` is the reason the event
/// can never be sent (too large), for a permanent outcome.
pub(crate) fn prepare(
    index: usize,
    event: &ClaimedEvent,
    queue: &Queue,
    offloaded: Option<&Offloaded>,
    direct: bool,
) -> Result<Prepared, PublishFailure> {
    // The payload's JSON text as stored, sent as is: never parsed (a document nested deeper than a
    // parser accepts, or a number beyond f64, goes through unchanged).
    let body = offloaded.map_or(event.payload(), |o| o.body.as_str());
    let trace = event.traceparent().filter(|t| !t.is_empty());
    let mut size = message_size(
        body.len(),
        &event.event_type,
        &event.aggregate_type,
        &event.aggregate_id,
        trace,
    );
    let payload_len = offloaded.map(|o| o.payload_len.to_string());
    if let Some(o) = offloaded {
        size += size_attribute_len(o.payload_len);
    }
    let limits = queue.limits();
    let max = limits.max_message_bytes();
    if size > max {
        // The destination's own limit says so, read again just before (`limit_again.rs`): said
        // to be SQS's, a queue's lowered limit read like one nothing could raise (black-box run).
        let whose = if queue.limit_is_own() {
            format!(
                "the {} takes at most {max} (its MaximumMessageSize)",
                queue.kind
            )
        } else {
            format!("{} accepts at most {max}", limits.broker())
        };
        return Err(PublishFailure::new(
            FailureKind::TooLarge,
            format!("the message is {size} bytes (body and attributes); {whose}"),
        ));
    }
    // The payload as stored may hold what the broker refuses in a body (written by hand, or by an
    // emitter whose limits allow it): refused here for this event alone, in the relay's words.
    // (SQS refused such an entry alone, in its own; SNS was never asked: a black-box run.)
    if offloaded.is_none() {
        body_text(body, limits)?;
    }
    // The row's own text, sent as attribute values: what SQS and SNS refuse in one (an empty
    // value, a character outside their set) is refused here, for this event alone. Written by
    // hand past `emit`'s checks, it was sent as is; the broker's refusal could fail the whole
    // call, and how it is told varies.
    let texts = [
        (ATTR_EVENT_TYPE, event.event_type.as_str()),
        (ATTR_AGGREGATE_TYPE, event.aggregate_type.as_str()),
        (ATTR_AGGREGATE_ID, event.aggregate_id.as_str()),
    ];
    for (name, value) in texts
        .into_iter()
        .chain(trace.map(|t| (ATTR_TRACEPARENT, t)))
    {
        attribute_text(name, value, limits)?;
    }
    let mut event_id_buf = uuid::Uuid::encode_buffer();
    let event_id: &str = event.id.hyphenated().encode_lower(&mut event_id_buf);
    // At most six attributes, kept on the stack.
    let none = ("", "", "");
    let mut attributes = [
        (ATTR_EVENT_ID, "String", event_id),
        (ATTR_EVENT_TYPE, "String", event.event_type.as_str()),
        (ATTR_AGGREGATE_TYPE, "String", event.aggregate_type.as_str()),
        (ATTR_AGGREGATE_ID, "String", event.aggregate_id.as_str()),
        none,
        none,
    ];
    let mut count = 4;
    if let Some(trace) = trace {
        attributes[count] = (ATTR_TRACEPARENT, "String", trace);
        count += 1;
    }
    if let Some(len) = &payload_len {
        attributes[count] = (EXTENDED_PAYLOAD_SIZE_ATTRIBUTE, "Number", len.as_str());
        count += 1;
    }
    let group = queue
        .fifo
        .then(|| message_group_id(&event.aggregate_type, &event.aggregate_id));
    let id = EntryId::new(index);
    let parts = Parts {
        id: id.as_str(),
        event_id,
        body,
        attributes: &attributes[..count],
        group,
    };
    let entry = match queue.kind {
        DestinationKind::Topic => Entry::Sns(sns_entry(&parts)?),
        _ if direct => Entry::SqsJson(entry_json(&parts)),
        _ => Entry::Sqs(sqs_entry(&parts)?),
    };
    let group = parts.group;
    Ok(Prepared {
        index,
        id,
        event_id: event.id,
        entry,
        size,
        group,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(c: char) -> bool {
        c.is_ascii_alphanumeric() || "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~".contains(c)
    }

    #[test]
    fn entry_ids_are_the_index_in_decimal() {
        for n in [0usize, 7, 10, 99, 100, 12_345, usize::MAX] {
            assert_eq!(EntryId::new(n).as_str(), n.to_string());
        }
    }

    #[test]
    fn natural_group_id_when_valid() {
        assert_eq!(message_group_id("order", "42"), "order:42");
        let punctuation = "a!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~z";
        assert_eq!(
            message_group_id("t", punctuation),
            format!("t:{punctuation}")
        );
        // Exactly 128 characters stays natural.
        let id = "y".repeat(MAX_GROUP_ID_LEN - "order:".len());
        assert_eq!(message_group_id("order", &id), format!("order:{id}"));
    }

    #[test]
    fn hashed_group_id_when_too_long_or_with_other_characters() {
        let long = "y".repeat(MAX_GROUP_ID_LEN - "order:".len() + 1);
        for (t, id) in [
            ("order", long.as_str()),
            ("order", "with space"),
            ("order", "tab\there"),
            ("order", "ümlaut"),
            ("order", "emoji😀"),
        ] {
            let g = message_group_id(t, id);
            assert!(g.starts_with(HASHED_GROUP_ID_PREFIX), "{g}");
            assert_eq!(g.len(), HASHED_GROUP_ID_PREFIX.len() + 64);
            assert!(g.len() <= MAX_GROUP_ID_LEN);
            assert!(g.chars().all(allowed), "{g}");
            // Deterministic.
            assert_eq!(g, message_group_id(t, id));
        }
        // ":" alone is valid (1 character).
        assert_eq!(message_group_id("", ""), ":");
    }

    #[test]
    fn hash_is_sha256_of_the_natural_id() {
        // SHA-256("order:with space"), computed independently (`printf %s 'order:with space' | sha256sum`).
        assert_eq!(
            message_group_id("order", "with space"),
            "sha256:a1cab12dd76e8aced7eac9ca2bb1d267adc4f1fbda15c1c0a4304dbc5fbb40c0"
        );
        let different = message_group_id("order", "with  space");
        assert_ne!(message_group_id("order", "with space"), different);
    }

    #[test]
    fn every_result_is_a_valid_group_id() {
        for (t, id) in [
            ("order", "1"),
            ("a", "b c"),
            ("x", &"z".repeat(500)),
            ("ü", "ß"),
        ] {
            let g = message_group_id(t, id);
            assert!((1..=MAX_GROUP_ID_LEN).contains(&g.chars().count()), "{g}");
            assert!(g.chars().all(allowed), "{g}");
        }
    }
}
