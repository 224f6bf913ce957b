//! The shape of a published message, shared by `emit` (which refuses what a broker would reject,
//! before commit, with the publisher's [`MessageLimits`](crate::limits::MessageLimits)) and by
//! publishers (which build the message).
//!
//! A message is the event's payload as PostgreSQL's `jsonb` prints it (the body: the relay reads
//! `payload::text`, with a space after every `:` and `,` and numbers in plain decimal; see
//! [`body_len`]) plus string attributes:
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

/// The length in bytes of the body a publisher sends for a payload serialised as `json` by
/// `serde_json`: PostgreSQL's `jsonb` text of it, which the relay reads. `jsonb` prints `": "` and
/// `", "` between members and elements, and numbers in plain decimal (`1e300` is 301 digits,
/// `1.5e-7` is `0.00000015`); strings and their escapes are printed as serde_json writes them.
/// Never less than the body's length (duplicate keys, which `jsonb` keeps once, make it an upper
/// bound), so `emit` refuses what the publisher would.
pub fn body_len(json: &str) -> usize {
    let bytes = json.as_bytes();
    let (mut len, mut i, mut in_string, mut escaped) = (bytes.len(), 0, false, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => in_string = true,
            b':' | b',' => len = len.saturating_add(1),
            b'-' | b'0'..=b'9' => {
                let end = bytes[i..]
                    .iter()
                    .position(|c| !matches!(c, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .map_or(bytes.len(), |n| i + n);
                let number = &json[i..end];
                len = len
                    .saturating_add(decimal_len(number))
                    .saturating_sub(number.len());
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    len
}

/// The length of a JSON number printed as PostgreSQL's `numeric` prints it: without an exponent,
/// with as many fraction digits as the number has beyond its exponent.
fn decimal_len(number: &str) -> usize {
    let Some(e_at) = number.find(['e', 'E']) else {
        return number.len();
    };
    let (mantissa, exponent) = (&number[..e_at], &number[e_at + 1..]);
    // An exponent too large for i64 (only hand-written JSON has one) counts as very large.
    let exponent: i64 = exponent.parse().unwrap_or(if exponent.starts_with('-') {
        i64::MIN / 2
    } else {
        i64::MAX / 2
    });
    let sign = usize::from(mantissa.starts_with('-'));
    let mantissa = mantissa.trim_start_matches('-');
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let scale = as_i64(frac.len()).saturating_sub(exponent).max(0);
    let int_digits = as_i64(int.len()).saturating_add(exponent).max(1);
    let total = int_digits.saturating_add(if scale > 0 {
        scale.saturating_add(1)
    } else {
        0
    });
    sign.saturating_add(usize::try_from(total).unwrap_or(usize::MAX))
}

/// The size of a message as SQS and SNS count it: body plus every attribute (name, data type and
/// value). `body_len` is the body's length as sent: [`body_len`] of the payload.
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
    fn body_len_counts_jsonb_separators_and_expanded_numbers() {
        assert_eq!(
            body_len(r#"{"a":1,"b":[1,2]}"#),
            r#"{"a": 1, "b": [1, 2]}"#.len()
        );
        assert_eq!(
            body_len(r#"{"a":"x:,y"}"#),
            r#"{"a": "x:,y"}"#.len(),
            "not in strings"
        );
        assert_eq!(body_len(r#"{"a":"q\"1,2"}"#), r#"{"a": "q\"1,2"}"#.len());
        assert_eq!(body_len("1e300"), 301);
        assert_eq!(body_len("1.5e-7"), "0.00000015".len());
        assert_eq!(body_len("-1e-7"), "-0.0000001".len());
        assert_eq!(body_len("2.5e3"), "2500".len());
        assert_eq!(body_len("1.25E+1"), "12.5".len());
        assert_eq!(body_len("[1.50,-0.5]"), "[1.50, -0.5]".len());
        assert!(
            body_len("1e999999999999999999999") > 1_000_000,
            "saturates, no panic"
        );
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
