//! Parsing `#[outbox(...)]` attributes.
//!
//! Every key is recognised everywhere, so that a key in the wrong place gets a message saying where
//! it belongs instead of "unknown key". Errors go to the [`Ctxt`]; parsing carries on with the next
//! key, so one build reports every mistake.

use std::collections::HashSet;

use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, Lit, LitStr, Meta, Token};

use crate::ctxt::Ctxt;

/// The attribute's name: `#[outbox(...)]`.
pub const OUTBOX: &str = "outbox";

/// Where an `#[outbox(...)]` attribute sits; decides which keys it may hold.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// On a struct.
    Struct,
    /// On an enum.
    Enum,
    /// On an enum's variant.
    Variant,
    /// On a field of a struct or of a variant.
    Field,
}

impl Position {
    /// The keys allowed here, for the "unknown key" message.
    fn expected(self) -> &'static str {
        match self {
            Position::Struct => "`crate`, `aggregate` or `event_type`",
            Position::Enum => "`crate` or `aggregate`",
            Position::Variant => "`event_type`",
            Position::Field => "`aggregate_id`",
        }
    }

    /// How an error message names this position.
    fn noun(self) -> &'static str {
        match self {
            Position::Struct => "a struct",
            Position::Enum => "an enum",
            Position::Variant => "an enum variant",
            Position::Field => "a field",
        }
    }
}

/// A key of `#[outbox(...)]`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// `crate = "path"`: where to find `outbox_core`.
    Crate,
    /// `aggregate = "..."`.
    Aggregate,
    /// `event_type = "..."`.
    EventType,
    /// `aggregate_id`, a flag.
    AggregateId,
}

impl Key {
    fn from_name(name: &str) -> Option<Key> {
        match name {
            "crate" => Some(Key::Crate),
            "aggregate" => Some(Key::Aggregate),
            "event_type" => Some(Key::EventType),
            "aggregate_id" => Some(Key::AggregateId),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Key::Crate => "crate",
            Key::Aggregate => "aggregate",
            Key::EventType => "event_type",
            Key::AggregateId => "aggregate_id",
        }
    }

    /// An example of the key's use, for error messages.
    fn example(self) -> &'static str {
        match self {
            Key::Crate => r#"#[outbox(crate = "::outbox_core")]"#,
            Key::Aggregate => r#"#[outbox(aggregate = "order")]"#,
            Key::EventType => r#"#[outbox(event_type = "order.created")]"#,
            Key::AggregateId => "#[outbox(aggregate_id)]",
        }
    }

    /// `None` if the key may appear at `position`, else the message saying where it belongs.
    fn misplaced(self, position: Position) -> Option<String> {
        use Position::*;
        let msg = match (self, position) {
            (Key::Crate, Struct | Enum)
            | (Key::Aggregate, Struct | Enum)
            | (Key::EventType, Struct | Variant)
            | (Key::AggregateId, Field) => return None,
            (Key::Crate, Variant | Field) => format!(
                "`crate` goes on the struct or enum, not on {}",
                position.noun()
            ),
            (Key::Aggregate, Variant) => "`aggregate` goes on the enum, not on a variant: \
                 all the events of one enum are about one aggregate"
                .to_owned(),
            (Key::Aggregate, Field) => "`aggregate` goes on the struct or enum, not on a field; \
                 to mark the field that holds the aggregate id, write #[outbox(aggregate_id)]"
                .to_owned(),
            (Key::EventType, Enum) => "`event_type` goes on each variant of an enum, not on the \
                 enum: every variant is its own event type"
                .to_owned(),
            (Key::EventType, Field) => {
                "`event_type` goes on the struct or on an enum variant, not on a field".to_owned()
            }
            (Key::AggregateId, Struct | Enum | Variant) => format!(
                "`aggregate_id` goes on the field that holds the aggregate id, not on {}",
                position.noun()
            ),
        };
        Some(msg)
    }
}

/// Where the generated code finds `outbox_core`.
pub enum Krate {
    /// `::outbox_core`.
    Default,
    /// `#[outbox(crate = "...")]`.
    Custom(syn::Path),
    /// `crate = ...` was given but is not a path; the derive emits no impl at all then, since any
    /// path it guessed could fail to resolve and add a misleading error.
    Invalid,
}

/// The keys found in the `#[outbox(...)]` attributes of one item; [`Position`] decides which of
/// these can be set.
pub struct Attrs {
    /// `crate = "..."`.
    pub krate: Krate,
    /// `aggregate = "..."`.
    pub aggregate: Option<LitStr>,
    /// `aggregate = ...` was given, but not as a string; no default should be checked instead.
    pub aggregate_invalid: bool,
    /// `event_type = "..."`.
    pub event_type: Option<LitStr>,
    /// `event_type = ...` was given, but not as a string; no default should be checked instead.
    pub event_type_invalid: bool,
    /// The `aggregate_id` key, kept for its span.
    pub aggregate_id: Option<syn::Path>,
    /// Whether these attributes seem to try to mark an aggregate id, and fail: `aggregate_id` in
    /// the wrong place or with a value; on a field, `aggregate`, an unknown key, or an attribute
    /// that does not parse. The error said what is wrong; "missing aggregate_id" would only
    /// repeat it.
    pub aggregate_id_failed: bool,
}

/// Parses every `#[outbox(...)]` in `attrs`, which sit at `position`.
pub fn parse(cx: &Ctxt, attrs: &[Attribute], position: Position) -> Attrs {
    let mut out = Attrs {
        krate: Krate::Default,
        aggregate: None,
        aggregate_invalid: false,
        event_type: None,
        event_type_invalid: false,
        aggregate_id: None,
        aggregate_id_failed: false,
    };
    let mut seen = HashSet::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident(OUTBOX)) {
        let list = match &attr.meta {
            Meta::List(list) => list,
            _ => {
                cx.error_spanned_by(
                    attr,
                    "expected a list of keys: #[outbox(...)], e.g. #[outbox(aggregate_id)]",
                );
                out.aggregate_id_failed |= position == Position::Field;
                continue;
            }
        };
        let metas = match list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated) {
            Ok(metas) => metas,
            Err(err) => {
                cx.syn_error(err);
                out.aggregate_id_failed |= position == Position::Field;
                continue;
            }
        };
        for meta in &metas {
            parse_one(cx, meta, position, &mut seen, &mut out);
        }
    }
    out
}

/// Parses one `key` or `key = value` into `out`.
fn parse_one(cx: &Ctxt, meta: &Meta, position: Position, seen: &mut HashSet<Key>, out: &mut Attrs) {
    let path = meta.path();
    let Some(key) = path
        .get_ident()
        .and_then(|ident| Key::from_name(&ident.to_string()))
    else {
        cx.error_spanned_by(
            path,
            format!(
                "unknown key `{}` in #[outbox(...)] on {}; expected {}",
                path_text(path),
                position.noun(),
                position.expected()
            ),
        );
        // On a field, where `aggregate_id` is the only key, an unknown key is likely a misspelling.
        out.aggregate_id_failed |= position == Position::Field;
        return;
    };
    if let Some(msg) = key.misplaced(position) {
        cx.error_spanned_by(path, msg);
        out.aggregate_id_failed |=
            key == Key::AggregateId || (key == Key::Aggregate && position == Position::Field);
        return;
    }
    if !seen.insert(key) {
        cx.error_spanned_by(
            path,
            format!("duplicate key `{}`: it may be given once", key.name()),
        );
        return;
    }
    match key {
        Key::AggregateId => match meta {
            Meta::Path(path) => out.aggregate_id = Some(path.clone()),
            _ => {
                cx.error_spanned_by(
                    meta,
                    format!("`aggregate_id` takes no value; write {}", key.example()),
                );
                out.aggregate_id_failed = true;
            }
        },
        Key::Aggregate => {
            out.aggregate = string_value(cx, key, meta);
            out.aggregate_invalid = out.aggregate.is_none();
        }
        Key::EventType => {
            out.event_type = string_value(cx, key, meta);
            out.event_type_invalid = out.event_type.is_none();
        }
        Key::Crate => {
            out.krate = match string_value(cx, key, meta) {
                None => Krate::Invalid,
                Some(lit) => match lit.parse::<syn::Path>() {
                    Ok(path) => Krate::Custom(path),
                    Err(_) => {
                        cx.error_spanned_by(
                            &lit,
                            format!(
                                "`crate` must be a path to outbox_core, e.g. {}",
                                key.example()
                            ),
                        );
                        Krate::Invalid
                    }
                },
            }
        }
    }
}

/// The string literal of `key = "..."`, or `None` after recording an error.
fn string_value(cx: &Ctxt, key: Key, meta: &Meta) -> Option<LitStr> {
    let Meta::NameValue(nv) = meta else {
        cx.error_spanned_by(
            meta,
            format!("`{}` needs a value: {}", key.name(), key.example()),
        );
        return None;
    };
    let mut value = &nv.value;
    // A value passed through a `macro_rules!` `$x:expr` arrives wrapped in an invisible group.
    while let Expr::Group(group) = value {
        value = &group.expr;
    }
    match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit.clone()),
        _ => {
            cx.error_spanned_by(
                &nv.value,
                format!(
                    "expected a string literal for `{}`, e.g. {}",
                    key.name(),
                    key.example()
                ),
            );
            None
        }
    }
}

/// `a::b` as written, without the spaces `ToTokens` would add.
fn path_text(path: &syn::Path) -> String {
    let segments = path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::");
    if path.leading_colon.is_some() {
        format!("::{segments}")
    } else {
        segments
    }
}
