//! The `OutboxEvent` trait: what an event says about itself.

use std::fmt;
use std::future::Future;

use crate::client::GenericClient;
use uuid::Uuid;

use crate::error::Error;

use serde::Serialize;

/// A domain event that can be written to the outbox: a serde payload plus three pieces of
/// metadata, the [aggregate type](OutboxEvent::aggregate_type), the
/// [event type](OutboxEvent::event_type) and the [aggregate id](OutboxEvent::aggregate_id).
///
/// Usually derived with [`#[derive(OutboxEvent)]`](macro@crate::OutboxEvent), next to serde's
/// `#[derive(Serialize)]`; the derive's documentation is the full reference of its attributes,
/// default names and compile-time checks.
///
/// # The payload
///
/// The payload is the value's serde serialisation, as JSON: whatever `serde_json::to_value(&event)`
/// gives. Serde's attributes (`rename`, `rename_all`, `tag`, `skip`, ...) shape it; they have no
/// effect on the metadata, and `#[outbox(...)]` attributes have no effect on the payload.
///
/// # Deriving for a struct
///
/// A struct is one event type. Mark the field that holds the aggregate id with
/// `#[outbox(aggregate_id)]`; its type must implement [`Display`](fmt::Display) (integers,
/// `String`, `Uuid`, your own id newtypes...).
///
/// ```rust
/// use outbox_core::OutboxEvent;
/// use serde::Serialize;
/// use uuid::Uuid;
///
/// #[derive(Serialize, OutboxEvent)]
/// #[outbox(aggregate = "order", event_type = "order.created")]
/// struct OrderCreated {
///     #[outbox(aggregate_id)]
///     order_id: Uuid,
///     total_cents: i64,
/// }
///
/// let id = Uuid::new_v4();
/// let event = OrderCreated { order_id: id, total_cents: 1250 };
/// assert_eq!(event.aggregate_type(), "order");
/// assert_eq!(event.event_type(), "order.created");
/// assert_eq!(event.aggregate_id().to_string(), id.to_string());
/// assert_eq!(
///     serde_json::to_value(&event).unwrap(),
///     serde_json::json!({ "order_id": id, "total_cents": 1250 }),
/// );
/// ```
///
/// Tuple structs and generic structs derive the same way. Both names may be left out; the defaults
/// come from the type's name (here `customer` and `customer.address.changed`):
///
/// ```rust
/// # use outbox_core::OutboxEvent;
/// # use serde::Serialize;
/// #[derive(Serialize, OutboxEvent)]
/// struct CustomerAddressChanged(#[outbox(aggregate_id)] u64, String);
///
/// let event = CustomerAddressChanged(42, "Lyon".to_owned());
/// assert_eq!(event.aggregate_type(), "customer");
/// assert_eq!(event.event_type(), "customer.address.changed");
/// assert_eq!(event.aggregate_id().to_string(), "42");
/// assert_eq!(serde_json::to_value(&event).unwrap(), serde_json::json!([42, "Lyon"]));
/// ```
///
/// # Deriving for an enum
///
/// An enum gathers the events of one aggregate: `aggregate` goes on the enum, and each variant is
/// an event type of its own, with an `event_type` of its own (by default the aggregate, a dot and
/// the variant's name: `order.placed`). Every variant marks its aggregate id field, in named or
/// tuple fields alike.
///
/// The payload is serde's serialisation of the whole enum, so the variant shows up in it the way
/// serde represents enums: by default *externally tagged*, the variant's name as the only key of an
/// object holding the variant's content. Consumers can read the event type from the message's
/// attributes instead; serde's `#[serde(tag = "...")]` (internally tagged), `tag` + `content`
/// (adjacently tagged) and `untagged` choose other shapes.
///
/// ```rust
/// use outbox_core::OutboxEvent;
/// use serde::Serialize;
/// use serde_json::json;
///
/// #[derive(Serialize, OutboxEvent)]
/// #[outbox(aggregate = "order")]
/// enum OrderEvent {
///     Placed {
///         #[outbox(aggregate_id)]
///         order_id: u64,
///         lines: u32,
///     },
///     #[outbox(event_type = "order.shipped.v2")]
///     Shipped {
///         #[outbox(aggregate_id)]
///         order_id: u64,
///         carrier: String,
///     },
///     Cancelled(#[outbox(aggregate_id)] u64),
/// }
///
/// let placed = OrderEvent::Placed { order_id: 7, lines: 2 };
/// assert_eq!(placed.aggregate_type(), "order");
/// assert_eq!(placed.event_type(), "order.placed");
/// assert_eq!(placed.aggregate_id().to_string(), "7");
/// assert_eq!(
///     serde_json::to_value(&placed).unwrap(),
///     json!({ "Placed": { "order_id": 7, "lines": 2 } }),
/// );
///
/// let shipped = OrderEvent::Shipped { order_id: 7, carrier: "DHL".into() };
/// assert_eq!(shipped.event_type(), "order.shipped.v2");
/// assert_eq!(
///     serde_json::to_value(&shipped).unwrap(),
///     json!({ "Shipped": { "order_id": 7, "carrier": "DHL" } }),
/// );
///
/// let cancelled = OrderEvent::Cancelled(7);
/// assert_eq!(cancelled.event_type(), "order.cancelled");
/// // A newtype variant holds its one value directly.
/// assert_eq!(serde_json::to_value(&cancelled).unwrap(), json!({ "Cancelled": 7 }));
/// ```
///
/// With serde's internal tagging, and the default names (the enum's name without `Event`, in
/// snake case, for the aggregate):
///
/// ```rust
/// # use outbox_core::OutboxEvent;
/// # use serde::Serialize;
/// # use serde_json::json;
/// #[derive(Serialize, OutboxEvent)]
/// #[serde(tag = "type", rename_all = "snake_case")]
/// enum ShoppingCartEvent {
///     ItemAdded {
///         #[outbox(aggregate_id)]
///         cart_id: u64,
///         sku: String,
///     },
///     CheckedOut {
///         #[outbox(aggregate_id)]
///         cart_id: u64,
///     },
/// }
///
/// let added = ShoppingCartEvent::ItemAdded { cart_id: 3, sku: "A-1".into() };
/// assert_eq!(added.aggregate_type(), "shopping_cart");
/// assert_eq!(added.event_type(), "shopping_cart.item.added");
/// assert_eq!(
///     serde_json::to_value(&added).unwrap(),
///     json!({ "type": "item_added", "cart_id": 3, "sku": "A-1" }),
/// );
/// ```
///
/// # Where `outbox_core` is
///
/// The derived code names this crate `::outbox_core`. When it has another name (renamed in
/// `Cargo.toml`, or re-exported by another crate), say where it is with `crate`:
///
/// ```rust
/// # use serde::Serialize;
/// // As if renamed in Cargo.toml: `outbox = { package = "outbox-core", version = "..." }`.
/// use outbox_core as outbox;
/// use outbox::OutboxEvent;
///
/// #[derive(Serialize, OutboxEvent)]
/// #[outbox(crate = "outbox")]
/// struct InvoicePaid {
///     #[outbox(aggregate_id)]
///     invoice: u32,
/// }
/// # assert_eq!(InvoicePaid { invoice: 1 }.event_type(), "invoice.paid");
/// ```
///
/// # Implementing by hand
///
/// When no field holds the id as is, implement the trait yourself: `aggregate_id` may return any
/// [`Display`](fmt::Display) value, borrowing from the event or not.
///
/// ```rust
/// use std::fmt;
///
/// use outbox_core::OutboxEvent;
/// use serde::Serialize;
///
/// #[derive(Serialize)]
/// struct SeatBooked {
///     flight: String,
///     seat: String,
/// }
///
/// impl OutboxEvent for SeatBooked {
///     fn aggregate_type(&self) -> &'static str {
///         "seat"
///     }
///
///     fn event_type(&self) -> &'static str {
///         "seat.booked"
///     }
///
///     fn aggregate_id(&self) -> impl fmt::Display + '_ {
///         format!("{}/{}", self.flight, self.seat)
///     }
/// }
///
/// let event = SeatBooked { flight: "LH400".into(), seat: "12C".into() };
/// assert_eq!(event.aggregate_id().to_string(), "LH400/12C");
/// ```
pub trait OutboxEvent: Serialize {
    /// The kind of aggregate the event is about, e.g. `"order"`: the same for every event of one
    /// aggregate, whatever its type.
    ///
    /// Derived: the `aggregate` attribute, or a default from the type's name.
    fn aggregate_type(&self) -> &'static str;

    /// The event's type, e.g. `"order.created"`: what consumers route and dispatch on.
    ///
    /// Derived: the `event_type` attribute of the struct or of the value's enum variant, or a
    /// default from the type's or the variant's name.
    fn event_type(&self) -> &'static str;

    /// The id of the aggregate instance the event is about, written to the outbox as text (its
    /// `Display` output, which must not be empty or only whitespace). Together with the
    /// [aggregate type](OutboxEvent::aggregate_type) it names the instance whose events the relay
    /// publishes in order.
    ///
    /// Derived: a borrow of the field marked `#[outbox(aggregate_id)]` (of the value's variant, for
    /// an enum); nothing is formatted or allocated until the id is written.
    fn aggregate_id(&self) -> impl fmt::Display + '_;

    /// Every event type a value of this type can have: the struct's one, or one per enum variant.
    /// [`DecodeEvent`](crate::DecodeEvent) accepts only these.
    ///
    /// The derive fills it in. A hand-written implementation may leave the default, an empty
    /// list, which means "not declared": decoding then accepts any event type whose body decodes
    /// into a value that reports that event type.
    fn event_types() -> &'static [&'static str]
    where
        Self: Sized,
    {
        &[]
    }

    /// Writes this event to the outbox through `client` — the transaction that writes your
    /// business rows — and returns the event id. Same as [`emit(client, self)`](crate::emit()).
    fn emit<C: GenericClient>(&self, client: &C) -> impl Future<Output = Result<Uuid, Error>> + Send
    where
        Self: Sync,
    {
        crate::emit::emit(client, self)
    }
}
