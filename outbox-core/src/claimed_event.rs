//! The event a relay has claimed, as it hands it to a [`Publisher`](crate::Publisher).

use chrono::{DateTime, Utc};
use outbox_queries::queries::relay::{ClaimedRowBorrowed, HeadRowBorrowed};
use uuid::Uuid;

/// An event the relay has claimed and hands to a [`Publisher`](crate::Publisher).
///
/// The payload and metadata are the stored JSON *text*, never parsed by the relay: a payload any
/// JSON parser would refuse (nested deeper than serde_json's 127 levels, a number too large for
/// `f64`) still reaches the publisher unchanged, and publishing costs no parse and no
/// re-serialisation. The text is what PostgreSQL's `jsonb` prints (keys sorted by `jsonb`'s rules, a
/// space after `:` and `,`). Parse it yourself with [`payload_json`](Self::payload_json) when you
/// need to.
///
/// Built by the relay only (one conversion from the claim query's row); tests build one with
/// [`ClaimedEvent::for_test`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClaimedEvent {
    /// The event id: the consumer's dedupe key.
    pub id: Uuid,
    /// Insertion order across the outbox.
    pub seq: i64,
    /// The aggregate's type, e.g. `order`.
    pub aggregate_type: String,
    /// The aggregate's id.
    pub aggregate_id: String,
    /// The event's type, e.g. `order.placed`.
    pub event_type: String,
    /// Attempts counted before this one.
    pub attempts: u32,
    /// When the event's transaction started (the database clock).
    pub created_at: DateTime<Utc>,
    payload: String,
    metadata: String,
    traceparent: Option<String>,
}

/// What the head search saw of its window of the oldest pending events (the same on every head it
/// returns; `in_window` is the head's own).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadWindow {
    /// How many heads this claim takes at most (its share when hot heads are shared out).
    pub(crate) share: i64,
    /// The window's last `seq`.
    pub(crate) end: i64,
    /// The pending events in the window (fewer than its size: the window holds them all).
    pub(crate) rows: i64,
    /// The window's events of the head's aggregate, the head included.
    pub(crate) in_window: i64,
}

impl ClaimedEvent {
    /// The payload: the JSON text as stored, never parsed by the relay.
    pub fn payload(&self) -> &str {
        &self.payload
    }

    /// The metadata (trace context and other headers): the JSON text as stored.
    pub fn metadata(&self) -> &str {
        &self.metadata
    }

    /// The W3C `traceparent` in the event's metadata, if any (read once, when the event is built).
    pub fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_deref()
    }

    /// Parses the payload as `T` (e.g. `serde_json::Value`). Fails on a payload serde_json refuses
    /// (nested deeper than 127 levels, …) instead of panicking.
    pub fn payload_json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.payload)
    }

    /// The one conversion from the claim query's row.
    pub(crate) fn from_row(row: ClaimedRowBorrowed<'_>) -> Self {
        ClaimedEvent {
            id: row.id,
            seq: row.seq,
            aggregate_type: row.aggregate_type.to_owned(),
            aggregate_id: row.aggregate_id.to_owned(),
            event_type: row.event_type.to_owned(),
            // The table's CHECK keeps attempts non-negative; a negative value would count as 0.
            attempts: u32::try_from(row.attempts).unwrap_or(0),
            created_at: row.created_at,
            payload: row.payload.to_owned(),
            traceparent: traceparent_of(row.metadata),
            metadata: row.metadata.to_owned(),
        }
    }

    /// The conversion from the head claim's row, which carries the same columns plus what the
    /// head search saw of its window (returned alongside).
    pub(crate) fn from_head(row: HeadRowBorrowed<'_>) -> (Self, HeadWindow) {
        let window = HeadWindow {
            share: row.share,
            end: row.window_end,
            rows: row.window_rows,
            in_window: row.in_window,
        };
        let event = ClaimedEvent::from_row(ClaimedRowBorrowed {
            id: row.id,
            seq: row.seq,
            aggregate_type: row.aggregate_type,
            aggregate_id: row.aggregate_id,
            event_type: row.event_type,
            payload: row.payload,
            metadata: row.metadata,
            attempts: row.attempts,
            created_at: row.created_at,
        });
        (event, window)
    }

    /// An event built by hand, for tests of publishers: `payload` and `metadata` must be JSON
    /// text (not checked). Not part of the stable API.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn for_test(
        id: Uuid,
        seq: i64,
        aggregate_type: &str,
        aggregate_id: &str,
        event_type: &str,
        payload: impl Into<String>,
        metadata: impl Into<String>,
        attempts: u32,
    ) -> Self {
        let metadata = metadata.into();
        ClaimedEvent {
            id,
            seq,
            aggregate_type: aggregate_type.to_owned(),
            aggregate_id: aggregate_id.to_owned(),
            event_type: event_type.to_owned(),
            attempts,
            created_at: Utc::now(),
            payload: payload.into(),
            traceparent: traceparent_of(&metadata),
            metadata,
        }
    }

    /// Replaces the payload text, for tests of publishers. Not part of the stable API.
    #[doc(hidden)]
    pub fn set_payload(&mut self, payload: impl Into<String>) {
        self.payload = payload.into();
    }

    /// Replaces the metadata text, for tests of publishers. Not part of the stable API.
    #[doc(hidden)]
    pub fn set_metadata(&mut self, metadata: impl Into<String>) {
        self.metadata = metadata.into();
        self.traceparent = traceparent_of(&self.metadata);
    }
}

/// The `traceparent` string of a metadata object; `None` when absent, not a string, not a W3C
/// trace context, or when the metadata does not parse (it is written by
/// `emit`, so that only happens to rows written by hand).
fn traceparent_of(metadata: &str) -> Option<String> {
    // Most events carry no trace context: skip the parse. The text is `jsonb`'s output, which
    // prints the key plainly (never with `\u` escapes for ASCII), so without it there is no key.
    if !metadata.contains("traceparent") {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        // The key is `message::METADATA_TRACEPARENT`.
        traceparent: Option<serde_json::Value>,
    }
    let meta: Meta = serde_json::from_str(metadata).ok()?;
    match meta.traceparent? {
        // Anything else is not forwarded: a hand-written row's garbage went out as the message's
        // `traceparent` attribute, and one with a control character got its event dead-lettered
        // (black-box run).
        serde_json::Value::String(s) => crate::trace::valid_traceparent(&s).map(str::to_owned),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_read_from_metadata_and_bad_metadata_is_ignored() {
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let e = ClaimedEvent::for_test(
            Uuid::new_v4(),
            1,
            "order",
            "1",
            "order.placed",
            "{}",
            format!(r#"{{"traceparent": "{tp}", "other": 1}}"#),
            0,
        );
        assert_eq!(e.traceparent(), Some(tp));
        let deep = format!("{{\"x\": {}{}}}", "[".repeat(300), "]".repeat(300));
        let mut e = e;
        e.set_metadata(deep);
        assert_eq!(e.traceparent(), None);
        e.set_metadata(r#"{"traceparent": 5}"#);
        assert_eq!(e.traceparent(), None);
    }

    #[test]
    fn only_a_w3c_traceparent_is_forwarded() {
        let e = ClaimedEvent::for_test(
            Uuid::new_v4(),
            1,
            "order",
            "1",
            "order.placed",
            "{}",
            r#"{"traceparent": "garbage\n\u0001"}"#,
            0,
        );
        assert_eq!(
            e.traceparent(),
            None,
            "not forwarded, not a reason to dead-letter"
        );
        let mut e = e;
        e.set_metadata(r#"{"traceparent": "garbage"}"#);
        assert_eq!(e.traceparent(), None);
    }

    #[test]
    fn payload_json_fails_instead_of_panicking_on_deep_payloads() {
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let e = ClaimedEvent::for_test(Uuid::new_v4(), 1, "o", "1", "t", deep.clone(), "{}", 0);
        assert_eq!(e.payload(), deep);
        assert!(e.payload_json::<serde_json::Value>().is_err());
    }
}
