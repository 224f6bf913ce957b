//! What a handler learns about a message besides the event: the [`Envelope`], read from the
//! message attributes the publisher sets (see the crate docs' "Message shape").

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use outbox_core::message::{
    ATTR_AGGREGATE_ID, ATTR_AGGREGATE_TYPE, ATTR_EVENT_ID, ATTR_EVENT_TYPE, ATTR_TRACEPARENT,
};
use uuid::Uuid;

/// The metadata of a received event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Envelope {
    /// The event id (attribute `event_id`): the inbox's dedupe key.
    pub event_id: Uuid,
    /// The event type (attribute `event_type`), e.g. `order.placed`.
    pub event_type: String,
    /// The aggregate type (attribute `aggregate_type`); empty when the message has none.
    pub aggregate_type: String,
    /// The aggregate id (attribute `aggregate_id`); empty when the message has none.
    pub aggregate_id: String,
    /// How many times SQS has handed out this message, this time included (1 on the first
    /// delivery): SQS's `ApproximateReceiveCount`.
    pub receive_count: u32,
    /// The producer's W3C trace context (attribute `traceparent`), when the event was emitted
    /// inside a trace: a valid one only (see [`outbox_core::trace::valid_traceparent`]).
    pub traceparent: Option<String>,
    /// SQS's message id.
    pub message_id: String,
    /// The `MessageGroupId` on a FIFO queue.
    pub message_group_id: Option<String>,
}

/// Why a message cannot be handed to a handler. Counted as the `reason` label of
/// `outbox_consumer_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BadInput {
    /// No `event_id` attribute, or one that is not a UUID.
    MissingEventId,
    /// No `event_type` attribute, or one the handler's event type does not accept.
    UnknownEventType,
    /// The body does not decode into the handler's event type.
    Undecodable,
    /// Marked offloaded (an `ExtendedPayloadSize` attribute), but its S3 pointer is not one this
    /// consumer reads: not a pointer, a size that is not a byte count, a bucket outside
    /// [`offload_buckets`](super::ConsumerConfig::offload_buckets), an object far larger than the
    /// size declared or of no stated length, or one that is not UTF-8 text. (S3 failing or refusing is a failed delivery,
    /// `offload`, not bad input.)
    BadPointer,
}

impl BadInput {
    /// The metric label: `missing_event_id`, `unknown_event_type`, `undecodable`, `bad_pointer`.
    pub fn as_str(self) -> &'static str {
        match self {
            BadInput::MissingEventId => "missing_event_id",
            BadInput::UnknownEventType => "unknown_event_type",
            BadInput::Undecodable => "undecodable",
            BadInput::BadPointer => "bad_pointer",
        }
    }
}

/// The string value of message attribute `name`.
fn attribute<'m>(message: &'m Message, name: &str) -> Option<&'m str> {
    message
        .message_attributes()
        .and_then(|a| a.get(name))
        .and_then(|v| v.string_value())
}

fn system<'m>(message: &'m Message, name: &MessageSystemAttributeName) -> Option<&'m str> {
    message
        .attributes()
        .and_then(|a| a.get(name))
        .map(String::as_str)
}

/// The receive count of `message` (1 when SQS did not say).
pub(crate) fn receive_count(message: &Message) -> u32 {
    system(
        message,
        &MessageSystemAttributeName::ApproximateReceiveCount,
    )
    .and_then(|n| n.parse().ok())
    .unwrap_or(1)
}

/// The `MessageGroupId` of `message`, if any.
pub(crate) fn group_id(message: &Message) -> Option<&str> {
    system(message, &MessageSystemAttributeName::MessageGroupId)
}

/// The `event_id` and `event_type` attributes of `message` as they come (empty when absent), each
/// cut to [`CARRIED_MAX_CHARS`] characters: for the log line of a message without a usable
/// envelope.
pub(crate) fn carried(message: &Message) -> (String, String) {
    let cut = |name| {
        attribute(message, name)
            .unwrap_or_default()
            .chars()
            .take(CARRIED_MAX_CHARS)
            .collect()
    };
    (cut(ATTR_EVENT_ID), cut(ATTR_EVENT_TYPE))
}

/// The most characters of an attribute [`carried`] keeps.
const CARRIED_MAX_CHARS: usize = 128;

impl Envelope {
    /// Reads the envelope of `message`; `Err` when it has no usable `event_id` or `event_type`.
    pub(crate) fn read(message: &Message) -> Result<Envelope, BadInput> {
        let event_id = attribute(message, ATTR_EVENT_ID)
            .and_then(|id| Uuid::parse_str(id.trim()).ok())
            .ok_or(BadInput::MissingEventId)?;
        let event_type = attribute(message, ATTR_EVENT_TYPE)
            .filter(|t| !t.is_empty())
            .ok_or(BadInput::UnknownEventType)?;
        let text = |name| attribute(message, name).unwrap_or_default().to_owned();
        Ok(Envelope {
            event_id,
            event_type: event_type.to_owned(),
            aggregate_type: text(ATTR_AGGREGATE_TYPE),
            aggregate_id: text(ATTR_AGGREGATE_ID),
            receive_count: receive_count(message),
            // Only a valid one: handlers may pass it on (garbage and all-zero ids were handed
            // over as they came: black-box run).
            traceparent: attribute(message, ATTR_TRACEPARENT)
                .and_then(outbox_core::trace::valid_traceparent)
                .map(str::to_owned),
            message_id: message.message_id().unwrap_or_default().to_owned(),
            message_group_id: group_id(message).map(str::to_owned),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sqs::types::MessageAttributeValue;

    fn attr(v: &str) -> MessageAttributeValue {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(v)
            .build()
            .unwrap()
    }

    #[test]
    fn reads_the_publishers_attributes() {
        let id = Uuid::new_v4();
        let m = Message::builder()
            .message_id("m-1")
            .message_attributes(ATTR_EVENT_ID, attr(&id.to_string()))
            .message_attributes(ATTR_EVENT_TYPE, attr("order.placed"))
            .message_attributes(ATTR_AGGREGATE_TYPE, attr("order"))
            .message_attributes(ATTR_AGGREGATE_ID, attr("42"))
            .attributes(MessageSystemAttributeName::ApproximateReceiveCount, "3")
            .attributes(MessageSystemAttributeName::MessageGroupId, "order:42")
            .build();
        let e = Envelope::read(&m).unwrap();
        assert_eq!(e.event_id, id);
        assert_eq!(e.event_type, "order.placed");
        assert_eq!(
            (e.aggregate_type.as_str(), e.aggregate_id.as_str()),
            ("order", "42")
        );
        assert_eq!(e.receive_count, 3);
        assert_eq!(e.traceparent, None);
        assert_eq!(e.message_group_id.as_deref(), Some("order:42"));
    }

    /// Only a valid trace context reaches the handler: garbage and all-zero ids were handed over
    /// as they came (black-box run); a later version's extra fields are cut off.
    #[test]
    fn only_a_valid_trace_context_is_read() {
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let with = |traceparent: &str| {
            let m = Message::builder()
                .message_attributes(ATTR_EVENT_ID, attr(&Uuid::new_v4().to_string()))
                .message_attributes(ATTR_EVENT_TYPE, attr("order.placed"))
                .message_attributes(ATTR_TRACEPARENT, attr(traceparent))
                .build();
            Envelope::read(&m).unwrap().traceparent
        };
        assert_eq!(with(tp).as_deref(), Some(tp));
        assert_eq!(with("garbage"), None);
        assert_eq!(
            with("00-00000000000000000000000000000000-0000000000000000-00"),
            None
        );
        let later = format!("01{}-more", &tp[2..]);
        assert_eq!(with(&later).as_deref(), Some(&later[..55]));
    }

    /// A message with a type but no usable id is logged with the type it carries (a black-box
    /// run read `event_type=""`), cut to a bounded length.
    #[test]
    fn what_a_message_without_an_envelope_carries_is_kept_for_its_log() {
        let m = Message::builder()
            .message_attributes(ATTR_EVENT_TYPE, attr("acct.step"))
            .build();
        assert_eq!(Envelope::read(&m), Err(BadInput::MissingEventId));
        assert_eq!(carried(&m), (String::new(), "acct.step".to_owned()));
        let long = "é".repeat(1000);
        let m = Message::builder()
            .message_attributes(ATTR_EVENT_ID, attr("not-a-uuid"))
            .message_attributes(ATTR_EVENT_TYPE, attr(&long))
            .build();
        let (id, event_type) = carried(&m);
        assert_eq!(id, "not-a-uuid");
        assert_eq!(event_type.chars().count(), CARRIED_MAX_CHARS);
    }

    #[test]
    fn missing_or_invalid_ids_and_types_are_bad_input() {
        let m = Message::builder().build();
        assert_eq!(Envelope::read(&m), Err(BadInput::MissingEventId));
        let m = Message::builder()
            .message_attributes(ATTR_EVENT_ID, attr("not-a-uuid"))
            .build();
        assert_eq!(Envelope::read(&m), Err(BadInput::MissingEventId));
        let m = Message::builder()
            .message_attributes(ATTR_EVENT_ID, attr(&Uuid::new_v4().to_string()))
            .build();
        assert_eq!(Envelope::read(&m), Err(BadInput::UnknownEventType));
        assert_eq!(receive_count(&m), 1);
    }
}
