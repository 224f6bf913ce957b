//! Messages a queue got from an SNS topic without raw message delivery: SNS wraps each in a JSON
//! notification (`Type`, `TopicArn`, the body as `Message`, the attributes as `MessageAttributes`)
//! and sends it with no SQS message attributes. The consumer reads such a message as the one SNS
//! was given: its body and attributes are taken out of the notification before anything else
//! reads it (a black-box run: every event through a non-raw subscription was bad input, "missing
//! event id", and dead-lettered).

use std::collections::HashMap;

use aws_sdk_sqs::types::{Message, MessageAttributeValue};
use outbox_core::message::ATTR_EVENT_ID;
use serde::Deserialize;

/// The parts of an SNS notification the consumer reads.
#[derive(Deserialize)]
struct Notification {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(rename = "TopicArn")]
    topic_arn: String,
    #[serde(rename = "Message")]
    message: String,
    #[serde(rename = "MessageAttributes", default)]
    attributes: HashMap<String, Attribute>,
}

/// One of a notification's `MessageAttributes`.
#[derive(Deserialize)]
struct Attribute {
    #[serde(rename = "Type")]
    data_type: String,
    #[serde(rename = "Value")]
    value: String,
}

/// `message`, or, when it is an SNS notification (and carries no `event_id` attribute of its own),
/// the message SNS was given: the notification's `Message` as body and its string and number
/// `MessageAttributes` as attributes (binary ones, base64 in the notification, are left out: the
/// consumer reads none). SQS's own parts — ids, receipt handle, system attributes such as the
/// receive count and the FIFO group — are kept.
pub(crate) fn unwrapped(mut message: Message) -> Message {
    let own_attributes = message
        .message_attributes()
        .is_some_and(|a| a.contains_key(ATTR_EVENT_ID));
    let body = message.body().unwrap_or_default();
    if own_attributes || !body.trim_start().starts_with('{') {
        return message;
    }
    let Ok(notification) = serde_json::from_str::<Notification>(body) else {
        return message;
    };
    if notification.kind != "Notification" || !notification.topic_arn.starts_with("arn:") {
        return message;
    }
    let attributes: HashMap<String, MessageAttributeValue> = notification
        .attributes
        .into_iter()
        .filter(|(_, a)| !a.data_type.starts_with("Binary"))
        .filter_map(|(name, a)| {
            MessageAttributeValue::builder()
                .data_type(a.data_type)
                .string_value(a.value)
                .build()
                .ok()
                .map(|v| (name, v))
        })
        .collect();
    message.body = Some(notification.message);
    message.message_attributes = Some(attributes);
    message
}

#[cfg(test)]
mod tests;
