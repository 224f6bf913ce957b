//! Amazon SNS topics as destinations: `PublishBatch` entries and calls.

use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};
use outbox_core::limits::{CharacterSet, MessageLimits};
use outbox_core::{FailureKind, PublishFailure};

use crate::message::Parts;

/// What an SNS topic accepts in a message by default: 256 KiB (body and attributes, counted as
/// [`message_size`](outbox_core::message::message_size) counts them) and the XML 1.0 characters.
/// A publisher with a route to a topic states these as its
/// [`Publisher::limits`](outbox_core::Publisher::limits) (unless it offloads large payloads), and
/// after its start-up check the topic's own `MaximumMessageSize` (1 KiB to
/// [`SNS_MAX_TOPIC_MESSAGE_BYTES`]) instead of the 256 KiB.
pub const SNS_LIMITS: MessageLimits = MessageLimits::new("SNS", 256 * 1024, CharacterSet::Xml);

/// The largest `MaximumMessageSize` SNS lets a topic be given: 1 MiB.
pub const SNS_MAX_TOPIC_MESSAGE_BYTES: usize = 1024 * 1024;

/// The most bytes (bodies and attributes of every entry) SNS accepts in one `PublishBatch` call
/// to a topic of the default size: 256 KiB. A call to a topic with a different
/// `MaximumMessageSize` carries at most that many bytes.
pub const SNS_MAX_BATCH_BYTES: usize = 256 * 1024;

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

/// The `PublishBatch` entry of a message.
pub(crate) fn sns_entry(parts: &Parts<'_>) -> Result<PublishBatchRequestEntry, PublishFailure> {
    let mut entry = PublishBatchRequestEntry::builder()
        .id(parts.id)
        .message(parts.body);
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
            format!("cannot build the SNS entry: {e}"),
        )
    })
}
