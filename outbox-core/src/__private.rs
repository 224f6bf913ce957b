//! Paths used by the code `#[derive(OutboxEvent)]` generates. Not public API.

pub use core::fmt::Display;

pub use serde::Serialize;

pub use crate::event::OutboxEvent;

/// The aggregate id of a struct: the field itself, borrowed. A function rather than a plain `&` so
/// that a field type without `Display` fails here, with the error on the field's type.
#[inline]
pub fn aggregate_id<T: Display + ?Sized>(id: &T) -> &T {
    id
}
