//! Checks on the parsed input that no single attribute can make: one aggregate id per event, valid
//! names, distinct event types.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use crate::ast::{Container, Data, Field, Name, Origin, Variant};
use crate::ctxt::Ctxt;
use crate::name;

/// Records every problem with `cont` in `cx`.
pub fn check(cx: &Ctxt, cont: &Container<'_>) {
    match &cont.data {
        Data::Struct { event_type, fields } => {
            if check_aggregate_id(cx, fields) && !cont.aggregate_id_misplaced {
                let why = if fields.is_empty() {
                    "it has no field to hold the aggregate id"
                } else {
                    "mark the field that holds the aggregate id"
                };
                cx.error_spanned_by(
                    cont.ident,
                    format!(
                        "missing #[outbox(aggregate_id)] on a field of `{}`: {why}",
                        cont.ident
                    ),
                );
            }
            check_struct_names(cx, &cont.aggregate, event_type);
        }
        Data::Enum(variants) => {
            if variants.is_empty() {
                cx.error_spanned_by(
                    cont.ident,
                    format!(
                        "#[derive(OutboxEvent)] needs an enum with at least one variant: `{}` \
                         has no value to emit",
                        cont.ident
                    ),
                );
            }
            for variant in variants {
                let misplaced = cont.aggregate_id_misplaced || variant.aggregate_id_misplaced;
                if check_aggregate_id(cx, &variant.fields) && !misplaced {
                    let why = if variant.fields.is_empty() {
                        "it has no field to hold the aggregate id"
                    } else {
                        "mark the field that holds the aggregate id"
                    };
                    cx.error_spanned_by(
                        variant.ident,
                        format!(
                            "missing #[outbox(aggregate_id)] in variant `{}`: every variant of \
                             an event enum needs one; {why}",
                            variant.ident
                        ),
                    );
                }
            }
            let aggregate_ok = check_name(cx, "aggregate", &cont.aggregate);
            check_event_types(cx, variants, aggregate_ok);
        }
    }
}

/// Records an error for every `#[outbox(aggregate_id)]` after the first among `fields`; `true`
/// if there is none and no field tried to have one (the caller reports that, naming the struct or
/// variant).
fn check_aggregate_id(cx: &Ctxt, fields: &[Field<'_>]) -> bool {
    let mut marked = fields
        .iter()
        .filter_map(|f| Some((f, f.aggregate_id.as_ref()?)));
    let Some((first, _)) = marked.next() else {
        return !fields.iter().any(|f| f.aggregate_id_failed);
    };
    for (_, key) in marked {
        cx.error_spanned_by(
            key,
            format!(
                "more than one #[outbox(aggregate_id)]: an event has one aggregate id, and it is \
                 already on field `{}`",
                member_text(&first.member)
            ),
        );
    }
    false
}

/// A struct's aggregate and event type. When both are defaults derived from the type name and
/// both are invalid (say, a name with non-ASCII letters), one error says so.
fn check_struct_names(cx: &Ctxt, aggregate: &Name, event_type: &Name) {
    if let (Origin::Default(from), Origin::Default(_)) = (&aggregate.origin, &event_type.origin) {
        if let (Err(_), Err(why)) = (
            name::check(&aggregate.value),
            name::check(&event_type.value),
        ) {
            let why = if event_type.value.is_empty() {
                "nothing is left once the `Event` suffix is dropped".to_owned()
            } else {
                format!("for event_type {}, {why}", shown(&event_type.value))
            };
            cx.error_at(
                event_type.span,
                format!(
                    "cannot derive a default aggregate and event_type from the name `{from}`: \
                     {why}; set them with #[outbox(aggregate = \"...\", event_type = \"...\")]"
                ),
            );
            return;
        }
    }
    check_name(cx, "aggregate", aggregate);
    check_name(cx, "event_type", event_type);
}

/// Every variant's event type is valid, and no two variants share one.
fn check_event_types(cx: &Ctxt, variants: &[Variant<'_>], aggregate_ok: bool) {
    let mut seen: HashMap<&str, &syn::Ident> = HashMap::new();
    for variant in variants {
        let event_type = &variant.event_type;
        let ok = match &event_type.origin {
            Origin::Explicit | Origin::Invalid => check_name(cx, "event_type", event_type),
            // The default embeds the aggregate: when that is invalid, its error is enough.
            Origin::Default(_) if !aggregate_ok => false,
            Origin::Default(from) => match name::check(&event_type.value) {
                Ok(()) => true,
                Err(why) => {
                    cx.error_at(
                        event_type.span,
                        format!(
                            "invalid default event_type {} (the aggregate, a dot, and the words \
                             of the variant name `{from}`): {why}; set one with \
                             #[outbox(event_type = \"...\")]",
                            shown(&event_type.value)
                        ),
                    );
                    false
                }
            },
        };
        if !ok {
            continue;
        }
        match seen.entry(&event_type.value) {
            Entry::Vacant(entry) => {
                entry.insert(variant.ident);
            }
            Entry::Occupied(first) => cx.error_at(
                event_type.span,
                format!(
                    "event_type {} is already the event type of variant `{}`: each variant needs \
                     its own",
                    shown(&event_type.value),
                    first.get()
                ),
            ),
        }
    }
}

/// Records an error and returns `false` if `name` is not a valid `aggregate`/`event_type`.
fn check_name(cx: &Ctxt, key: &str, name: &Name) -> bool {
    let Err(why) = name::check(&name.value) else {
        return true;
    };
    let msg = match &name.origin {
        // Not a string literal: already reported.
        Origin::Invalid => return false,
        Origin::Explicit => format!("invalid {key} {}: {why}", shown(&name.value)),
        Origin::Default(from) if name.value.is_empty() => format!(
            "cannot derive a default {key} from the name `{from}`: nothing is left once the \
             `Event` suffix is dropped; set one with #[outbox({key} = \"...\")]"
        ),
        Origin::Default(from) => format!(
            "invalid default {key} {}, derived from the name `{from}`: {why}; set one with \
             #[outbox({key} = \"...\")]",
            shown(&name.value)
        ),
    };
    cx.error_at(name.span, msg);
    false
}

/// `value` quoted for an error message, cut short if long.
fn shown(value: &str) -> String {
    const MAX_CHARS: usize = 40;
    match value.char_indices().nth(MAX_CHARS) {
        None => format!("{value:?}"),
        Some((cut, _)) => format!("{:?}...", &value[..cut]),
    }
}

fn member_text(member: &syn::Member) -> String {
    match member {
        syn::Member::Named(ident) => ident.to_string(),
        syn::Member::Unnamed(index) => index.index.to_string(),
    }
}
