//! The requests the fixture decodes and the per-message checks SQS makes on them.

use std::borrow::Cow;
use std::collections::BTreeMap;

use md5::{Digest, Md5};
use serde::Deserialize;

use crate::protocol::{MAX_ATTRIBUTES, MAX_MESSAGE_BYTES};

/// Text of a request: borrowed from the request's bytes unless JSON escapes had to be decoded
/// (the fixture's hot path is the benchmarks' `SendMessageBatch`: no copy per field).
pub(crate) type Text<'a> = Cow<'a, str>;

/// A message's attributes: name → value.
pub(crate) type Attributes<'a> = BTreeMap<Text<'a>, AttributeValue<'a>>;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct AttributeValue<'a> {
    #[serde(borrow)]
    pub(crate) data_type: Text<'a>,
    #[serde(borrow)]
    pub(crate) string_value: Option<Text<'a>>,
    #[serde(borrow)]
    pub(crate) binary_value: Option<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct BatchEntry<'a> {
    #[serde(borrow)]
    pub(crate) id: Text<'a>,
    #[serde(borrow)]
    pub(crate) message_body: Text<'a>,
    #[serde(default, borrow)]
    pub(crate) message_attributes: Attributes<'a>,
    #[serde(borrow)]
    pub(crate) message_group_id: Option<Text<'a>>,
    #[serde(borrow)]
    pub(crate) message_deduplication_id: Option<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct SendMessageBatchInput<'a> {
    #[serde(borrow)]
    pub(crate) queue_url: Text<'a>,
    #[serde(default, borrow)]
    pub(crate) entries: Vec<BatchEntry<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct SendMessageInput<'a> {
    #[serde(borrow)]
    pub(crate) queue_url: Text<'a>,
    #[serde(borrow)]
    pub(crate) message_body: Text<'a>,
    #[serde(default, borrow)]
    pub(crate) message_attributes: Attributes<'a>,
    #[serde(borrow)]
    pub(crate) message_group_id: Option<Text<'a>>,
    #[serde(borrow)]
    pub(crate) message_deduplication_id: Option<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct QueueUrlInput {
    pub(crate) queue_url: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct QueueNameInput {
    pub(crate) queue_name: String,
    #[serde(default)]
    pub(crate) attributes: BTreeMap<String, String>,
}

/// Whether SQS accepts `c` in a body or attribute value.
pub(crate) fn is_sqs_char(c: char) -> bool {
    matches!(c as u32,
        0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
}

pub(crate) fn queue_name(url: &str) -> &str {
    url.trim_end_matches('/').rsplit('/').next().unwrap_or(url)
}

/// What SQS counts against the 1 MiB limit: the body plus each attribute's name, type and value.
pub(crate) fn message_size(body: &str, attributes: &Attributes<'_>) -> usize {
    body.len()
        + attributes
            .iter()
            .map(|(name, a)| {
                name.len()
                    + a.data_type.len()
                    + a.string_value.as_ref().map_or(0, |v| v.len())
                    + a.binary_value.as_ref().map_or(0, |v| v.len())
            })
            .sum::<usize>()
}

/// The per-message checks SQS makes; `Err((code, message))` on the first failure.
pub(crate) fn check_message(
    body: &str,
    attributes: &Attributes<'_>,
    group_id: Option<&str>,
    fifo: bool,
    max_bytes: usize,
) -> Result<(), (&'static str, String)> {
    if body.is_empty() {
        return Err((
            "MissingParameter",
            "The request must contain the parameter MessageBody.".into(),
        ));
    }
    if !body.chars().all(is_sqs_char) {
        return Err((
            "InvalidMessageContents",
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF".into(),
        ));
    }
    if attributes.len() > MAX_ATTRIBUTES {
        return Err((
            "InvalidParameterValue",
            format!(
                "Number of message attributes [{}] exceeds the allowed maximum [{MAX_ATTRIBUTES}].",
                attributes.len()
            ),
        ));
    }
    for (name, a) in attributes {
        let value = a.string_value.as_deref().or(a.binary_value.as_deref());
        match value {
            None | Some("") => {
                return Err((
                    "InvalidParameterValue",
                    format!(
                        "Message (user) attribute '{name}' must contain a non-empty value of type '{}'.",
                        a.data_type
                    ),
                ));
            }
            Some(v) if !v.chars().all(is_sqs_char) => {
                return Err((
                    "InvalidParameterValue",
                    format!("Message (user) attribute '{name}' value contains invalid characters."),
                ));
            }
            Some(_) => {}
        }
    }
    let size = message_size(body, attributes);
    // The queue's own limit (SQS's unless set), in SQS's words.
    let max_bytes = max_bytes.min(MAX_MESSAGE_BYTES);
    if size > max_bytes {
        return Err((
            "InvalidParameterValue",
            format!(
                "One or more parameters are invalid. Reason: Message must be shorter than {max_bytes} bytes."
            ),
        ));
    }
    if fifo && group_id.is_none() {
        return Err((
            "MissingParameter",
            "The request must contain the parameter MessageGroupId.".into(),
        ));
    }
    Ok(())
}

pub(crate) fn md5_hex(text: &str) -> String {
    let digest = Md5::digest(text.as_bytes());
    let mut out = String::with_capacity(32);
    for b in digest.iter() {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 0xf)]));
    }
    out
}
