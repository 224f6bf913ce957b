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
                    "the body of a `{}` event does not decode (line {}, column {})",
                    quoted(event_type),
                    e.line(),
                    e.column()
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

    #[test]
    fn errors_never_quote_the_body_and_cut_long_types() {
        let secret = r#"{"id":"card-4111111111111111"}"#;
        let e = Manual::decode("manual.a", secret).unwrap_err();
        assert!(!e.to_string().contains("4111"), "{e}");
        let long = "x".repeat(10_000);
        assert!(quoted(&long).len() == QUOTED_TYPE_MAX);
    }
}
