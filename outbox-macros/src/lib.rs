//! `#[derive(OutboxEvent)]`. Use it through `outbox_core`, which re-exports it.
//!
//! The macro is a pipeline: `ast` reads the input (with `attr` parsing the `#[outbox(...)]`
//! attributes and `name` supplying default names), `valid` checks it, and `expand` writes the impl.
//! Every stage records its errors in a `ctxt::Ctxt`, so that one build reports all of them.

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

mod ast;
mod attr;
mod ctxt;
mod expand;
mod name;
mod valid;

/// Derives `OutboxEvent` for a struct or an enum that also derives (or implements) serde's
/// `Serialize`.
///
/// The [trait's documentation](../outbox_core/trait.OutboxEvent.html) has runnable examples; this
/// is the reference.
///
/// # Attributes
///
/// | Where | Key | Meaning |
/// |---|---|---|
/// | struct | `aggregate = "..."` | [`aggregate_type`](../outbox_core/trait.OutboxEvent.html#tymethod.aggregate_type) |
/// | struct | `event_type = "..."` | [`event_type`](../outbox_core/trait.OutboxEvent.html#tymethod.event_type) |
/// | enum | `aggregate = "..."` | `aggregate_type`, the same for every variant |
/// | enum variant | `event_type = "..."` | `event_type` of that variant's values |
/// | field | `aggregate_id` | [`aggregate_id`](../outbox_core/trait.OutboxEvent.html#tymethod.aggregate_id) is this field |
/// | struct or enum | `crate = "path"` | where `outbox_core` is, if not at `::outbox_core` |
///
/// Keys may be combined in one `#[outbox(...)]` or spread over several; each may be given once.
///
/// Exactly one field is `#[outbox(aggregate_id)]`: of the struct, or of each variant of the enum
/// (named or tuple fields alike). Its type must implement `Display`. `aggregate_id()` borrows it:
/// for a struct it returns `&field` itself, for an enum a `&dyn Display` of the value's variant.
///
/// For a generic type the impl keeps the type's own parameters and bounds, and adds
/// `Self: Serialize` plus `T: Display` for an id field whose type involves a type parameter.
///
/// # Names
///
/// `aggregate` and `event_type` are 1 to 256 bytes of ASCII letters, digits and `.` `_` `-` `:`
/// `/`, starting with a letter. Given ones are checked at compile time, and so are defaults.
///
/// # Default names
///
/// A name is split into lowercase words:
///
/// - `_` separates words (and is dropped), and `r#` is ignored;
/// - an uppercase letter after a lowercase letter or a digit starts a word;
/// - a run of uppercase letters is one word, an acronym, except that its last letter starts the
///   next word when a lowercase letter follows it: `HTTPRequestSent` is `http`, `request`, `sent`,
///   and `SentToAPI` is `sent`, `to`, `api`;
/// - digits stay with the word before them: `OrderV2Created` is `order`, `v2`, `created`.
///
/// Then, when `aggregate` or `event_type` is left out:
///
/// | Derive on | Default `aggregate` | Default `event_type` |
/// |---|---|---|
/// | struct | the first word of the type's name | all the words of the type's name, joined with `.` |
/// | enum | the words of the enum's name, joined with `_` | per variant: the aggregate, `.`, and the words of the variant's name joined with `.` |
///
/// For both, a last word `Event` or `Events` of the type's name is dropped first (not of a
/// variant's name). For example:
///
/// | Type | `aggregate` | `event_type` |
/// |---|---|---|
/// | `struct OrderCreated` | `order` | `order.created` |
/// | `struct OrderLineAddedEvent` | `order` | `order.line.added` |
/// | `struct HTTPRequestSent` | `http` | `http.request.sent` |
/// | `enum OrderEvent { Created, .. }` | `order` | `order.created` |
/// | `enum ShoppingCartEvents { ItemAdded, .. }` | `shopping_cart` | `shopping_cart.item.added` |
/// | `#[outbox(aggregate = "billing")] enum InvoiceEvent { Paid, .. }` | `billing` | `billing.paid` |
///
/// So `struct OrderCreated` and `OrderEvent::Created` default to the same names. A variant named
/// after the aggregate gets it twice (`OrderEvent::OrderCreated` defaults to
/// `order.order.created`): name variants without the prefix, or give `event_type`. A struct whose
/// aggregate has several words (`ShoppingCartCheckedOut`) needs an explicit `aggregate`.
///
/// # Compile-time errors
///
/// All of these are reported together, each on the offending token. Alongside the errors the
/// derive emits a placeholder impl (except for a union, or a `crate` path that is not a path), so
/// that code using the type as an `OutboxEvent` adds no errors of its own:
///
/// - a struct, or an enum variant, with no `#[outbox(aggregate_id)]` field, or with more than one;
/// - an unknown key (the message lists the keys allowed there), a key where it does not belong
///   (`event_type` on an enum, `aggregate` on a variant, `aggregate_id` on a type...), a key given
///   twice, `aggregate_id` with a value, a value that is not a string literal;
/// - an `aggregate` or `event_type`, given or default, that is not a valid name (see above);
/// - two variants of an enum with the same `event_type`;
/// - an enum without variants, or a union;
/// - an id field whose type does not implement `Display` (reported by the compiler, on the type).
#[proc_macro_derive(OutboxEvent, attributes(outbox))]
pub fn derive_outbox_event(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input).into()
}
