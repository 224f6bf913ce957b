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

/// Derives `outbox_core::OutboxEvent`. See the trait's documentation.
#[proc_macro_derive(OutboxEvent, attributes(outbox))]
pub fn derive_outbox_event(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input).into()
}
