//! Decoding received events back into the types that derive [`OutboxEvent`]: the consumer's half
//! of the derive.

use serde::de::DeserializeOwned;

use crate::error::{Error, ErrorKind};
use crate::event::OutboxEvent;

/// Longest event type quoted in an error (the text comes from the wire).
const QUOTED_TYPE_MAX: usize = 200;

/// Decodes a received event — its `event_type` (the message attribute of the same name) and its
/// body (the payload JSON) — into a type that derives [`OutboxEvent`] and serde's `Deserialize`.
///
/// Implemented for every such type. A struct accepts its own event type; an enum accepts the event
/// type of each of its variants, so one enum can receive every event of an aggregate. Decoding is
/// the mirror of [`emit`](crate::emit()): the body is deserialised as the type was serialised
/// (serde's representation of an enum decides the variant), and the decoded value must report the
/// event type it arrived with.
///
/// ```
/// use outbox_core::{DecodeEvent, ErrorKind, OutboxEvent};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, PartialEq, Serialize, Deserialize, OutboxEvent)]
/// #[outbox(aggregate = "order")]
/// #[serde(tag = "kind")]
/// enum OrderEvent {
///     #[outbox(event_type = "order.placed")]
///     Placed { #[outbox(aggregate_id)] order_id: u64, total_cents: i64 },
///     #[outbox(event_type = "order.shipped")]
///     Shipped { #[outbox(aggregate_id)] order_id: u64 },
/// }
///
/// let body = r#"{"kind":"Shipped","order_id":7}"#;
/// assert_eq!(
///     OrderEvent::decode("order.shipped", body).unwrap(),
///     OrderEvent::Shipped { order_id: 7 },
/// );
/// assert_eq!(OrderEvent::event_types(), ["order.placed", "order.shipped"]);
/// let unknown = OrderEvent::decode("invoice.paid", "{}").unwrap_err();
/// assert_eq!(unknown.kind(), ErrorKind::UnknownEventType);
/// let bad = OrderEvent::decode("order.placed", r#"{"kind":"Placed"}"#).unwrap_err();
/// assert_eq!(bad.kind(), ErrorKind::Decode);
/// ```
pub trait DecodeEvent: OutboxEvent + DeserializeOwned + Sized {
    /// Whether events of `event_type` decode into this type.
    fn accepts(event_type: &str) -> bool {
        let types = Self::event_types();
        types.is_empty() || types.contains(&event_type)
    }

    /// Decodes `body`, received as an event of `event_type`.
    ///
    /// Errors: [`ErrorKind::UnknownEventType`] when this type has no such event type (the body is
    /// not looked at); [`ErrorKind::Decode`] when the body is not this type's JSON, or decodes
    /// into a value of another event type. The error never quotes the body.
    fn decode(event_type: &str, body: &str) -> Result<Self, Error> {
        if !Self::accepts(event_type) {
            return Err(Error::new(
                ErrorKind::UnknownEventType,
                format!(
                    "event type `{}` is not one of {:?}",
                    quoted(event_type),
                    Self::event_types()
                ),
            ));
        }
        let value: Self = serde_json::from_str(body).map_err(|e| {
            Error::new(
                ErrorKind::Decode,
                format!(
                    "the body of a `{}` event does not decode: {}",
                    quoted(event_type),
                    why(&e)
                ),
            )
        })?;
        if value.event_type() != event_type {
            return Err(Error::new(
                ErrorKind::Decode,
                format!(
                    "the body of a `{}` event decodes into a `{}` event",
                    quoted(event_type),
                    value.event_type()
                ),
            ));
        }
        Ok(value)
    }
}

impl<T: OutboxEvent + DeserializeOwned> DecodeEvent for T {}

/// Why a body does not decode, without quoting it: serde's messages quote the body's values
/// ("invalid type: string \"…\"", "unknown variant `…`"), so only what the type itself names (a
/// missing or duplicate field) is kept, with the position when there is one (none inside an
/// internally tagged enum: a black-box run read "line 0, column 0" for a missing field, and could
/// not tell a schema mismatch from junk).
fn why(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let text = e.to_string();
    let what = match e.classify() {
        Category::Syntax => "not JSON".to_owned(),
        Category::Eof => "JSON cut short".to_owned(),
        Category::Io => "unreadable".to_owned(),
        Category::Data => ["missing field `", "duplicate field `"]
            .iter()
            .find_map(|prefix| {
                let rest = text.strip_prefix(prefix)?;
                let (field, _) = rest.split_once('`')?;
                Some(format!("{prefix}{}`", quoted(field)))
            })
            .unwrap_or_else(|| {
                "JSON of another shape (a value of another type, or an unknown variant)".to_owned()
            }),
    };
    match e.line() {
        0 => what,
        line => format!("{what} (line {line}, column {})", e.column()),
    }
}

/// `text`, cut to a length fit for an error message.
fn quoted(text: &str) -> &str {
    match text.char_indices().nth(QUOTED_TYPE_MAX) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Manual {
        id: u32,
        kind: String,
    }

    impl OutboxEvent for Manual {
        fn aggregate_type(&self) -> &'static str {
            "manual"
        }
        fn event_type(&self) -> &'static str {
            if self.kind == "a" {
                "manual.a"
            } else {
                "manual.b"
            }
        }
        fn aggregate_id(&self) -> impl std::fmt::Display + '_ {
            self.id
        }
    }

    #[test]
    fn undeclared_types_accept_any_event_type_the_value_confirms() {
        let a = Manual::decode("manual.a", r#"{"id":1,"kind":"a"}"#).unwrap();
        assert_eq!(a.kind, "a");
        let e = Manual::decode("manual.a", r#"{"id":1,"kind":"b"}"#).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Decode);
        assert!(e.to_string().contains("`manual.b`"), "{e}");
    }

    /// A black-box run read "(line 0, column 0)" for a body without a field the type needs: it
    /// could not tell that from junk.
    #[test]
    fn errors_say_why_naming_only_what_the_type_names() {
        let cases = [
            (
                r#"{"id":1}"#,
                "does not decode: missing field `kind` (line 1, column 8)",
            ),
            (r#"{"id":1,"kind":"a","id":2}"#, "duplicate field `id`"),
            ("card 4111", "does not decode: not JSON (line 1, column 1)"),
            (r#"{"id":1,"#, "does not decode: JSON cut short"),
            (
                r#"{"id":"4111","kind":"a"}"#,
                "does not decode: JSON of another shape",
            ),
        ];
        for (body, why) in cases {
            let e = Manual::decode("manual.a", body).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Decode);
            let text = e.to_string();
            assert!(
                text.contains(why) && !text.contains("4111"),
                "{body}: {text}"
            );
        }
    }

    #[test]
    fn errors_never_quote_the_body_and_cut_long_types() {
        let secret = r#"{"id":"card-4111111111111111"}"#;
        let e = Manual::decode("manual.a", secret).unwrap_err();
        assert!(!e.to_string().contains("4111"), "{e}");
        let long = "x".repeat(10_000);
        assert!(quoted(&long).len() == QUOTED_TYPE_MAX);
    }
}
