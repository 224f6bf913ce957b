//! The `OutboxEvent` trait: what an event says about itself.

use std::fmt;

use serde::Serialize;

/// A domain event that can be written to the outbox. Usually derived with
/// [`#[derive(OutboxEvent)]`](macro@crate::OutboxEvent).
///
/// The payload is the value's serde serialisation.
pub trait OutboxEvent: Serialize {
    /// The kind of aggregate the event is about, e.g. `"order"`.
    fn aggregate_type(&self) -> &'static str;

    /// The event's type, e.g. `"order.created"`.
    fn event_type(&self) -> &'static str;

    /// The id of the aggregate instance the event is about; written to the outbox as text.
    fn aggregate_id(&self) -> impl fmt::Display + '_;
}
