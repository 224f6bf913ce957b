//! From a claimed event to an SQS batch entry.

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use outbox_core::ClaimedEvent;
use outbox_core::message::{
    ATTR_AGGREGATE_ID, ATTR_AGGREGATE_TYPE, ATTR_EVENT_ID, ATTR_EVENT_TYPE, ATTR_TRACEPARENT,
    SQS_MAX_MESSAGE_BYTES, message_size,
};
use sha2::{Digest, Sha256};

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
    for b in digest.iter() {
        id.push(char::from(HEX[usize::from(b >> 4)]));
        id.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    id
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// An event ready to send.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The event's position in the `publish` call; also the batch entry's `Id`.
    pub(crate) index: usize,
    /// The event id, for logs.
    pub(crate) event_id: String,
    /// The batch entry, until the call that sends it takes it.
    pub(crate) entry: Option<SendMessageBatchRequestEntry>,
    /// The size SQS counts: body plus attributes.
    pub(crate) size: usize,
    /// The `MessageGroupId` on a FIFO queue.
    pub(crate) group: Option<String>,
}

fn string_attribute(value: &str) -> Result<MessageAttributeValue, String> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| format!("cannot build a message attribute: {e}"))
}

/// Builds the entry of `event` (at `index` in the call) for a queue that is FIFO or not. `Err` is
/// the reason the event can never be sent (too large), for a permanent outcome.
pub(crate) fn prepare(index: usize, event: &ClaimedEvent, fifo: bool) -> Result<Prepared, String> {
    // The payload's JSON text as stored, sent as is: never parsed (a document nested deeper than a
    // parser accepts, or a number beyond f64, goes through unchanged).
    let body = event.payload();
    let trace = event.traceparent().filter(|t| !t.is_empty());
    let size = message_size(
        body.len(),
        &event.event_type,
        &event.aggregate_type,
        &event.aggregate_id,
        trace,
    );
    if size > SQS_MAX_MESSAGE_BYTES {
        return Err(format!(
            "the message is {size} bytes (body and attributes); SQS accepts at most {SQS_MAX_MESSAGE_BYTES}"
        ));
    }
    let event_id = event.id.hyphenated().to_string();
    let mut entry = SendMessageBatchRequestEntry::builder()
        .id(index.to_string())
        .message_body(body)
        .message_attributes(ATTR_EVENT_ID, string_attribute(&event_id)?)
        .message_attributes(ATTR_EVENT_TYPE, string_attribute(&event.event_type)?)
        .message_attributes(
            ATTR_AGGREGATE_TYPE,
            string_attribute(&event.aggregate_type)?,
        )
        .message_attributes(ATTR_AGGREGATE_ID, string_attribute(&event.aggregate_id)?);
    if let Some(trace) = trace {
        entry = entry.message_attributes(ATTR_TRACEPARENT, string_attribute(trace)?);
    }
    let group = fifo.then(|| message_group_id(&event.aggregate_type, &event.aggregate_id));
    if let Some(group) = &group {
        entry = entry
            .message_group_id(group.clone())
            .message_deduplication_id(event_id.clone());
    }
    let entry = entry
        .build()
        .map_err(|e| format!("cannot build the SQS entry: {e}"))?;
    Ok(Prepared {
        index,
        event_id,
        entry: Some(entry),
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
