//! Paths used by the code `#[derive(OutboxEvent)]` generates. Not public API.

pub use core::fmt::Display;

pub use serde::Serialize;

pub use crate::event::OutboxEvent;
