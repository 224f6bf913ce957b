//! Event types for tests, implementing `OutboxEvent` by hand (the derive has its own tests).

use outbox_core::{ClaimedEvent, OutboxEvent};
use serde::Serialize;

/// A test event about aggregate `order`/`order_id`.
#[derive(Debug, Clone, Serialize)]
pub struct TestEvent {
    /// The aggregate id.
    pub order_id: String,
    /// A sequence number within the aggregate (to check ordering).
    pub n: u64,
    /// Free text (for size and character tests).
    pub note: String,
}

impl TestEvent {
    /// Event `n` of aggregate `order_id`.
    pub fn new(order_id: impl Into<String>, n: u64) -> Self {
        TestEvent {
            order_id: order_id.into(),
            n,
            note: String::new(),
        }
    }

    /// With a note.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }
}

impl OutboxEvent for TestEvent {
    fn aggregate_type(&self) -> &'static str {
        "order"
    }

    fn event_type(&self) -> &'static str {
        "order.test"
    }

    fn aggregate_id(&self) -> impl std::fmt::Display + '_ {
        &self.order_id
    }
}

/// An event whose payload refuses to serialise (one field's serializer always fails).
#[derive(Debug, Clone, Serialize)]
pub struct Unserialisable {
    /// The aggregate id.
    pub id: String,
    /// A field whose serializer always fails.
    #[serde(serialize_with = "refuse")]
    pub broken: (),
}

impl Unserialisable {
    /// An unserialisable event about order `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Unserialisable {
            id: id.into(),
            broken: (),
        }
    }
}

fn refuse<S: serde::Serializer>(_: &(), _: S) -> Result<S::Ok, S::Error> {
    Err(serde::ser::Error::custom("this field refuses to serialise"))
}

impl OutboxEvent for Unserialisable {
    fn aggregate_type(&self) -> &'static str {
        "order"
    }

    fn event_type(&self) -> &'static str {
        "order.broken"
    }

    fn aggregate_id(&self) -> impl std::fmt::Display + '_ {
        &self.id
    }
}

/// The `note` of a claimed [`TestEvent`]'s payload, if it has one (`None` for other payloads,
/// including ones too deep to parse).
pub fn note(event: &ClaimedEvent) -> Option<String> {
    let payload: serde_json::Value = event.payload_json().ok()?;
    payload.get("note")?.as_str().map(str::to_owned)
}
