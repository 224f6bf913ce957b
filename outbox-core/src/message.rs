//! The shape of a published message, shared by `emit` (which refuses what a broker would reject,
//! before commit, with the publisher's [`MessageLimits`](crate::limits::MessageLimits)) and by
//! publishers (which build the message).
//!
//! A message is the event's payload as compact JSON (the body) plus string attributes:
//! [`ATTR_EVENT_ID`], [`ATTR_EVENT_TYPE`], [`ATTR_AGGREGATE_TYPE`], [`ATTR_AGGREGATE_ID`] and, when the
//! event's metadata holds one, [`ATTR_TRACEPARENT`].

use crate::error::{Error, ErrorKind};

/// Attribute holding the event id (a UUID, the consumer's dedupe key).
pub const ATTR_EVENT_ID: &str = "event_id";
/// Attribute holding the event type, e.g. `order.created`.
pub const ATTR_EVENT_TYPE: &str = "event_type";
/// Attribute holding the aggregate type, e.g. `order`.
pub const ATTR_AGGREGATE_TYPE: &str = "aggregate_type";
/// Attribute holding the aggregate id as text.
pub const ATTR_AGGREGATE_ID: &str = "aggregate_id";
/// Attribute holding the W3C trace context, when the event was emitted inside a trace.
pub const ATTR_TRACEPARENT: &str = "traceparent";
/// The metadata key `emit` stores the W3C trace context under.
pub const METADATA_TRACEPARENT: &str = "traceparent";

/// Brokers count an attribute's name, its data type and its value.
const STRING_DATA_TYPE_LEN: usize = "String".len();
/// The length of a hyphenated UUID.
const UUID_TEXT_LEN: usize = 36;

/// Refuses a JSON document (as serialised by `serde_json`) that `jsonb` would reject: one holding
/// the escape `\u0000` (`jsonb` cannot store NUL). Which raw characters a broker accepts is the
/// business of [`MessageLimits::check_text`](crate::limits::MessageLimits::check_text).
pub fn check_json(field: &'static str, json: &str) -> Result<(), Error> {
    let bytes = json.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes.get(i + 1) == Some(&b'u') && bytes.get(i + 2..i + 6) == Some(b"0000") {
                return Err(Error::new(
                    ErrorKind::InvalidText,
                    format!("{field} holds a NUL character (\\u0000), which jsonb does not accept"),
                ));
            }
            // Skip the escaped character: `\\` must not start a new escape.
            i += 2;
            continue;
        }
        i += 1;
    }
    Ok(())
}

/// The deepest nesting of arrays and objects `emit` accepts in a payload: what serde_json accepts by
/// default (its recursion limit of 128 admits 127 levels), so that consumers' parsers can read it.
/// PostgreSQL stores deeper documents; the relay publishes them as text, unparsed, but `emit`
/// refuses to write them.
pub const MAX_JSON_DEPTH: usize = 127;

/// The deepest nesting of arrays and objects in a JSON text (0 for a scalar), found without
/// recursion. Brackets inside strings do not count.
pub fn json_depth(json: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in json.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Refuses a payload nested deeper than [`MAX_JSON_DEPTH`].
pub fn check_depth(field: &'static str, json: &str) -> Result<(), Error> {
    let depth = json_depth(json);
    if depth > MAX_JSON_DEPTH {
        return Err(Error::new(
            ErrorKind::TooDeep,
            format!("{field} is nested {depth} levels deep; the limit is {MAX_JSON_DEPTH}"),
        ));
    }
    Ok(())
}

/// The size of a message as SQS and SNS count it: body plus every attribute (name, data type and
/// value).
pub fn message_size(
    body_len: usize,
    event_type: &str,
    aggregate_type: &str,
    aggregate_id: &str,
    traceparent: Option<&str>,
) -> usize {
    let attr = |name: &str, value_len: usize| name.len() + STRING_DATA_TYPE_LEN + value_len;
    body_len
        + attr(ATTR_EVENT_ID, UUID_TEXT_LEN)
        + attr(ATTR_EVENT_TYPE, event_type.len())
        + attr(ATTR_AGGREGATE_TYPE, aggregate_type.len())
        + attr(ATTR_AGGREGATE_ID, aggregate_id.len())
        + traceparent.map_or(0, |t| attr(ATTR_TRACEPARENT, t.len()))
}

/// The W3C trace context stored in an event's metadata, if any.
pub fn traceparent(metadata: &serde_json::Value) -> Option<&str> {
    metadata.get(METADATA_TRACEPARENT)?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_json_finds_nul_escapes_but_not_escaped_backslashes() {
        let nul = serde_json::to_string(&serde_json::json!({"a": "x\u{0}y"})).unwrap();
        assert_eq!(
            check_json("payload", &nul).unwrap_err().kind(),
            ErrorKind::InvalidText
        );
        // A literal backslash followed by "u0000" is fine text.
        let literal = serde_json::to_string(&serde_json::json!({"a": "\\u0000"})).unwrap();
        assert!(check_json("payload", &literal).is_ok(), "{literal}");
        // Control characters are escaped by serde_json.
        let ctrl = serde_json::to_string(&serde_json::json!({"a": "\u{1}"})).unwrap();
        assert!(check_json("payload", &ctrl).is_ok());
    }

    #[test]
    fn json_depth_counts_nesting_outside_strings() {
        assert_eq!(json_depth("1"), 0);
        assert_eq!(json_depth(r#"{"a": [1, {"b": []}]}"#), 4);
        assert_eq!(json_depth(r#"{"a": "[[[[\"[["}"#), 1);
        let at_limit = format!(
            "{}{}",
            "[".repeat(MAX_JSON_DEPTH),
            "]".repeat(MAX_JSON_DEPTH)
        );
        assert!(check_depth("payload", &at_limit).is_ok());
        // The limit is what serde_json accepts.
        assert!(serde_json::from_str::<serde_json::Value>(&at_limit).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&format!("[{at_limit}]")).is_err());
        let over = format!("[{at_limit}]");
        assert_eq!(
            check_depth("payload", &over).unwrap_err().kind(),
            ErrorKind::TooDeep
        );
    }

    #[test]
    fn message_size_counts_body_and_every_attribute() {
        let size = message_size(10, "order.created", "order", "42", None);
        let expected = 10
            + ("event_id".len() + 6 + 36)
            + ("event_type".len() + 6 + "order.created".len())
            + ("aggregate_type".len() + 6 + "order".len())
            + ("aggregate_id".len() + 6 + 2);
        assert_eq!(size, expected);
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        assert_eq!(
            message_size(10, "order.created", "order", "42", Some(tp)),
            expected + "traceparent".len() + 6 + tp.len()
        );
    }
}
