//! Writing events into the outbox inside the caller's transaction.

use outbox_queries::client::GenericClient;
use outbox_queries::queries::emit as sql;
use postgres_types::Json;
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::error::{Error, ErrorKind};
use crate::event::OutboxEvent;
use crate::message::{self, SQS_MAX_MESSAGE_BYTES};
use crate::trace;

/// Writes events with the generated insert queries, after checking each one against the limits of
/// the broker it will be published to.
///
/// [`emit`] and [`emit_all`] use the default `Emitter` (SQS's 1 MiB limit); build one with
/// [`Emitter::with_max_message_bytes`] for a lower limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emitter {
    max_message_bytes: usize,
}

impl Default for Emitter {
    fn default() -> Self {
        Emitter::new()
    }
}

/// One event, checked and serialised, ready to insert.
struct Checked {
    aggregate_type: &'static str,
    aggregate_id: String,
    event_type: &'static str,
    payload: Box<RawValue>,
    metadata: Box<RawValue>,
}

impl Emitter {
    /// An emitter with SQS's message limit ([`SQS_MAX_MESSAGE_BYTES`]).
    pub const fn new() -> Self {
        Emitter {
            max_message_bytes: SQS_MAX_MESSAGE_BYTES,
        }
    }

    /// An emitter that refuses messages larger than `max` bytes (payload and attributes, counted as
    /// SQS counts them). `max` may only lower SQS's limit.
    pub fn with_max_message_bytes(max: usize) -> Result<Self, Error> {
        if max == 0 || max > SQS_MAX_MESSAGE_BYTES {
            return Err(Error::config(format!(
                "max_message_bytes must be within 1..={SQS_MAX_MESSAGE_BYTES}, got {max}"
            )));
        }
        Ok(Emitter {
            max_message_bytes: max,
        })
    }

    /// The largest message this emitter accepts, in bytes.
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// Writes `event` through `client` — a `tokio_postgres` client or transaction, or a
    /// deadpool-postgres client or transaction — and returns the new event's id.
    ///
    /// Run it on the transaction that writes your business rows: the event is published if and only
    /// if that transaction commits. Invalid events are refused before anything is written (see
    /// [`ErrorKind`]); the transaction stays usable, so you decide whether to roll back.
    pub async fn emit<C, E>(&self, client: &C, event: &E) -> Result<Uuid, Error>
    where
        C: GenericClient,
        E: OutboxEvent + Sync + ?Sized,
    {
        let e = self.check(event)?;
        // Prepared through the client's statement cache where it has one (deadpool), so a warm
        // connection inserts in one round trip.
        let id = sql::insert_outbox_event()
            .prepare(client)
            .await?
            .bind(
                client,
                &e.aggregate_type,
                &e.aggregate_id.as_str(),
                &e.event_type,
                &Json(&*e.payload),
                &Json(&*e.metadata),
            )
            .one()
            .await?;
        Ok(id)
    }

    /// Writes many events in one statement and returns their ids in the same order. Either every
    /// event is valid and all are written, or none is.
    pub async fn emit_all<'e, C, E, I>(&self, client: &C, events: I) -> Result<Vec<Uuid>, Error>
    where
        C: GenericClient,
        E: OutboxEvent + Sync + ?Sized + 'e,
        I: IntoIterator<Item = &'e E>,
    {
        let checked = events
            .into_iter()
            .map(|e| self.check(e))
            .collect::<Result<Vec<_>, _>>()?;
        if checked.is_empty() {
            return Ok(Vec::new());
        }
        let aggregate_types: Vec<&str> = checked.iter().map(|e| e.aggregate_type).collect();
        let aggregate_ids: Vec<&str> = checked.iter().map(|e| e.aggregate_id.as_str()).collect();
        let event_types: Vec<&str> = checked.iter().map(|e| e.event_type).collect();
        let payloads: Vec<Json<&RawValue>> = checked.iter().map(|e| Json(&*e.payload)).collect();
        let metadata: Vec<Json<&RawValue>> = checked.iter().map(|e| Json(&*e.metadata)).collect();
        let ids = sql::insert_outbox_events()
            .prepare(client)
            .await?
            .bind(
                client,
                &aggregate_types,
                &aggregate_ids,
                &event_types,
                &payloads,
                &metadata,
            )
            .all()
            .await?;
        Ok(ids)
    }

    /// Serialises `event` and refuses it if the database or SQS would.
    fn check<E: OutboxEvent + ?Sized>(&self, event: &E) -> Result<Checked, Error> {
        let aggregate_type = event.aggregate_type();
        let event_type = event.event_type();
        let aggregate_id = event.aggregate_id().to_string();
        if aggregate_id.is_empty() {
            return Err(Error::new(
                ErrorKind::EmptyAggregateId,
                format!("event `{event_type}` has an empty aggregate id"),
            ));
        }
        for (field, value) in [
            ("aggregate_type", aggregate_type),
            ("event_type", event_type),
        ] {
            if value.is_empty() {
                return Err(Error::new(
                    ErrorKind::InvalidText,
                    format!("{field} is empty"),
                ));
            }
            message::check_text(field, value)?;
        }
        message::check_text("aggregate_id", &aggregate_id)?;

        let payload = serde_json::to_string(event).map_err(|e| {
            Error::new(
                ErrorKind::Serialize,
                format!("the payload of event `{event_type}` does not serialise to JSON"),
            )
            .with_source(e)
        })?;
        message::check_json("payload", &payload)?;
        message::check_depth("payload", &payload)?;
        let metadata = trace::current_metadata();
        let size = message::message_size(
            payload.len(),
            event_type,
            aggregate_type,
            &aggregate_id,
            message::traceparent(&metadata),
        );
        if size > self.max_message_bytes {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "event `{event_type}` would be a {size}-byte message; the limit is {} bytes",
                    self.max_message_bytes
                ),
            ));
        }
        let to_raw = |json: String| {
            RawValue::from_string(json)
                .map_err(|e| Error::new(ErrorKind::Serialize, "invalid JSON").with_source(e))
        };
        Ok(Checked {
            aggregate_type,
            aggregate_id,
            event_type,
            payload: to_raw(payload)?,
            metadata: to_raw(metadata.to_string())?,
        })
    }
}

/// Writes `event` in the caller's transaction with the default [`Emitter`]; returns the event id.
///
/// See [`Emitter::emit`].
pub async fn emit<C, E>(client: &C, event: &E) -> Result<Uuid, Error>
where
    C: GenericClient,
    E: OutboxEvent + Sync + ?Sized,
{
    Emitter::new().emit(client, event).await
}

/// Writes many events in one statement with the default [`Emitter`]; returns their ids in order.
///
/// See [`Emitter::emit_all`].
pub async fn emit_all<'e, C, E, I>(client: &C, events: I) -> Result<Vec<Uuid>, Error>
where
    C: GenericClient,
    E: OutboxEvent + Sync + ?Sized + 'e,
    I: IntoIterator<Item = &'e E>,
{
    Emitter::new().emit_all(client, events).await
}
