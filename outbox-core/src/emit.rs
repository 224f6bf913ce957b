//! Writing events into the outbox inside the caller's transaction.

use crate::client::GenericClient;
use outbox_queries::queries::emit as sql;
use postgres_types::Json;
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::error::{Error, ErrorKind};
use crate::event::OutboxEvent;
use crate::limits::MessageLimits;
use crate::message;
use crate::publisher::Publisher;
use crate::trace;

/// The longest aggregate type and id `emit` accepts, together, in bytes. They are the key of the
/// per-aggregate indexes, whose entries PostgreSQL caps at 2 704 bytes: a longer key would fail the
/// insert (aborting the caller's transaction) instead of being refused beforehand.
pub const MAX_AGGREGATE_KEY_BYTES: usize = 2000;

/// Writes events with the generated insert queries, after checking each one against the limits of
/// the broker it will be published to.
///
/// [`emit`] and [`emit_all`] use the default `Emitter`: per-aggregate order, and the default
/// [`MessageLimits`] (1 MiB, XML characters: what SQS accepts; SNS takes less). Build one with
/// [`Emitter::for_publisher`] to check the limits of the broker you publish to (SNS accepts 256
/// KiB; a publisher that offloads large payloads accepts more), or with
/// [`Emitter::with_max_message_bytes`] for a lower limit of your own:
///
/// ```
/// use outbox_core::Emitter;
/// use outbox_core::limits::{CharacterSet, MessageLimits};
///
/// let emitter = Emitter::with_limits(MessageLimits::new("SNS", 256 * 1024, CharacterSet::Xml));
/// assert_eq!(emitter.limits().max_message_bytes(), 262_144);
/// // Build it once, e.g. `Emitter::for_publisher(&publisher)`, and keep it with your pool.
/// ```
///
/// # Per-aggregate order and the aggregate lock
///
/// By default every insert first takes a transaction-scoped advisory lock on its event's aggregate
/// (inside the same statement: no extra round trip). Writers of one aggregate therefore wait for
/// each other from their emit to their commit or rollback, which makes the order of an
/// aggregate's events (`seq`) the order in which they commit, however writers interleave: the relay
/// never publishes an event while an earlier event of its aggregate is still uncommitted. Writers of
/// different aggregates never wait for each other.
///
/// Two rules follow, as with any lock:
/// - **Emit early or late, but know that the aggregate stays locked until commit.** A transaction
///   that emits and then runs for a long time delays other writers of that aggregate (only).
/// - **Deadlocks**: a transaction that emits for several aggregates locks them in the order it
///   emits. Two transactions that emit for the same aggregates in opposite orders can deadlock;
///   PostgreSQL detects it within `deadlock_timeout` (1 s) and aborts one of them with SQLSTATE
///   `40P01`, which your transaction retry handles like a serialisation failure. Emit in a
///   consistent order (e.g. sorted by aggregate), or use [`emit_all`](Emitter::emit_all), which
///   takes all its locks in one fixed order.
///
/// A transaction holds one lock per distinct aggregate it emitted for; PostgreSQL's lock table
/// holds `max_locks_per_transaction` × `max_connections` locks (6 400 by default) for all sessions
/// together, so a transaction that emits for thousands of distinct aggregates needs a larger
/// `max_locks_per_transaction`.
///
/// If your relays run with per-aggregate order off (`--no-ordering`), turn the lock off too with
/// [`per_aggregate_order(false)`](Emitter::per_aggregate_order): writers then never wait.
///
/// # Pipelining: emit without an extra round trip
///
/// On a deadpool connection, `emit` sends its insert when its future is first polled, so it can
/// ride in the same round trip as a statement of yours: see [`Emitter::emit_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emitter {
    limits: MessageLimits,
    ordered: bool,
}

impl Default for Emitter {
    fn default() -> Self {
        Emitter::new()
    }
}

/// One event, checked and serialised, ready to insert.
pub(crate) struct Checked {
    aggregate_type: &'static str,
    aggregate_id: String,
    event_type: &'static str,
    payload: Box<RawValue>,
    metadata: Box<RawValue>,
}

impl Emitter {
    /// An emitter with the default [`MessageLimits`].
    pub const fn new() -> Self {
        Emitter::with_limits(MessageLimits::DEFAULT)
    }

    /// An emitter that checks events against `limits`.
    pub const fn with_limits(limits: MessageLimits) -> Self {
        Emitter {
            limits,
            ordered: true,
        }
    }

    /// An emitter that checks events against the limits `publisher` states
    /// ([`Publisher::limits`]).
    pub fn for_publisher<P: Publisher>(publisher: &P) -> Self {
        Emitter::with_limits(publisher.limits())
    }

    /// Whether inserts take the aggregate lock that keeps per-aggregate order (default `true`; see
    /// [the type's docs](Emitter#per-aggregate-order-and-the-aggregate-lock)). Turn it off only when
    /// every relay runs with per-aggregate order off.
    pub const fn per_aggregate_order(mut self, on: bool) -> Self {
        self.ordered = on;
        self
    }

    /// An emitter with the default limits, lowered to `max` bytes per message (payload and
    /// attributes, counted as SQS and SNS count them). `max` may only lower the default limit.
    pub fn with_max_message_bytes(max: usize) -> Result<Self, Error> {
        let limits = MessageLimits::default();
        if max == 0 || max > limits.max_message_bytes() {
            return Err(Error::config(format!(
                "max_message_bytes must be within 1..={}, got {max}",
                limits.max_message_bytes()
            )));
        }
        Ok(Emitter::with_limits(limits.with_max_message_bytes(max)))
    }

    /// The limits this emitter checks.
    pub fn limits(&self) -> MessageLimits {
        self.limits
    }

    /// The largest message this emitter accepts, in bytes.
    pub fn max_message_bytes(&self) -> usize {
        self.limits.max_message_bytes()
    }

    /// Writes `event` through `client` — a `tokio_postgres` client or transaction, or a
    /// deadpool-postgres client or transaction — and returns the new event's id.
    ///
    /// The id is a UUIDv7 made here: time-ordered (Unix milliseconds first, then random bits), so
    /// the table's primary key grows at its right edge, and unique like any UUID. It is the
    /// consumer's dedupe key; order between events is the outbox's `seq`, not the id.
    ///
    /// Run it on the transaction that writes your business rows: the event is published if and only
    /// if that transaction commits. Invalid events are refused before anything is written (see
    /// [`ErrorKind`]); the transaction stays usable, so you decide whether to roll back.
    ///
    /// On a deadpool connection that has prepared it once, the insert is sent on the future's first
    /// poll from the statement cache, without awaiting anything before, so it can ride in the same
    /// round trip as a statement of yours: see [`emit_with`](Emitter::emit_with). (A plain
    /// `tokio_postgres` client has no statement cache: each emit prepares its insert first, one
    /// round trip more.)
    pub async fn emit<C, E>(&self, client: &C, event: &E) -> Result<Uuid, Error>
    where
        C: GenericClient,
        E: OutboxEvent + Sync + ?Sized,
    {
        let e = self.check(event)?;
        self.insert(client, e).await
    }

    /// Writes an event [`check`](Self::check) passed. The insert is sent on the future's first
    /// poll (from a warm statement cache): see [`emit_with`](Emitter::emit_with).
    pub(crate) async fn insert<C: GenericClient>(
        &self,
        client: &C,
        e: Checked,
    ) -> Result<Uuid, Error> {
        let id = Uuid::now_v7();
        // Prepared through the client's statement cache where it has one (deadpool), so a warm
        // connection inserts in one round trip, sent on first poll.
        // The ordered and unordered statements are distinct generated types with the same shape.
        macro_rules! insert {
            ($statement:expr) => {
                $statement
                    .prepare(client)
                    .await?
                    .bind(
                        client,
                        &e.aggregate_type,
                        &e.aggregate_id.as_str(),
                        &id,
                        &e.event_type,
                        &Json(&*e.payload),
                        &Json(&*e.metadata),
                    )
                    .one()
                    .await?
            };
        }
        let written = if self.ordered {
            insert!(sql::insert_outbox_event())
        } else {
            insert!(sql::insert_outbox_event_unordered())
        };
        Ok(written)
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
            .enumerate()
            .map(|(i, e)| {
                self.check(e)
                    .map_err(|err| err.context(format_args!("event {i} of the batch (from 0)")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if checked.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = checked.iter().map(|_| Uuid::now_v7()).collect();
        let aggregate_types: Vec<&str> = checked.iter().map(|e| e.aggregate_type).collect();
        let aggregate_ids: Vec<&str> = checked.iter().map(|e| e.aggregate_id.as_str()).collect();
        let event_types: Vec<&str> = checked.iter().map(|e| e.event_type).collect();
        let payloads: Vec<Json<&RawValue>> = checked.iter().map(|e| Json(&*e.payload)).collect();
        let metadata: Vec<Json<&RawValue>> = checked.iter().map(|e| Json(&*e.metadata)).collect();
        macro_rules! insert_all {
            ($statement:expr) => {
                $statement
                    .prepare(client)
                    .await?
                    .bind(
                        client,
                        &aggregate_types,
                        &aggregate_ids,
                        &ids,
                        &event_types,
                        &payloads,
                        &metadata,
                    )
                    .all()
                    .await?
            };
        }
        let written = if self.ordered {
            insert_all!(sql::insert_outbox_events())
        } else {
            insert_all!(sql::insert_outbox_events_unordered())
        };
        Ok(written)
    }

    /// Serialises `event` and refuses it if the database or the broker would.
    pub(crate) fn check<E: OutboxEvent + ?Sized>(&self, event: &E) -> Result<Checked, Error> {
        let aggregate_type = event.aggregate_type();
        let event_type = event.event_type();
        let aggregate_id = event.aggregate_id().to_string();
        // A blank id is a missing one (a form's empty field, say): as an aggregate it would put
        // every such event of the type into one group, in one order.
        if aggregate_id.trim().is_empty() {
            let what = if aggregate_id.is_empty() {
                "an empty aggregate id"
            } else {
                "a blank aggregate id (only whitespace)"
            };
            return Err(Error::new(
                ErrorKind::EmptyAggregateId,
                format!("event `{event_type}` has {what}"),
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
            self.limits.check_text(field, value)?;
        }
        self.limits.check_text("aggregate_id", &aggregate_id)?;
        let key = aggregate_type.len() + aggregate_id.len();
        if key > MAX_AGGREGATE_KEY_BYTES {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "event `{event_type}`: aggregate_type and aggregate_id together are {key} \
                     bytes; the limit is {MAX_AGGREGATE_KEY_BYTES} (they are an index key)"
                ),
            ));
        }

        let payload = serde_json::to_string(event).map_err(|e| {
            Error::new(
                ErrorKind::Serialize,
                format!("the payload of event `{event_type}` does not serialise to JSON"),
            )
            .with_source(e)
        })?;
        message::check_json("payload", &payload)?;
        self.limits.check_text("payload", &payload)?;
        message::check_depth("payload", &payload)?;
        let metadata = trace::current_metadata();
        // Measured as the relay will send it (jsonb's text), not as serialised here.
        let size = message::message_size(
            message::body_len(&payload),
            event_type,
            aggregate_type,
            &aggregate_id,
            message::traceparent(&metadata),
        );
        self.limits.check_size(event_type, size)?;
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
