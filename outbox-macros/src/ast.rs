//! The derive input as this macro sees it: the type, its fields or variants, and their
//! `#[outbox(...)]` attributes, with the default names filled in.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::{Data as SynData, DeriveInput, Fields, Generics, Ident, Member, Type};

use crate::attr::{self, Krate, Position};
use crate::ctxt::Ctxt;
use crate::name;

/// A struct or enum deriving `OutboxEvent`.
pub struct Container<'a> {
    /// The type's name.
    pub ident: &'a Ident,
    /// The type's generics, as written.
    pub generics: &'a Generics,
    /// Where the generated code finds `outbox_core`.
    pub krate: Krate,
    /// The aggregate type, given or defaulted.
    pub aggregate: Name,
    /// The fields or the variants.
    pub data: Data<'a>,
    /// An `aggregate_id` key sat on the type itself, and was reported as misplaced.
    pub aggregate_id_misplaced: bool,
}

/// The body of a [`Container`].
pub enum Data<'a> {
    /// A struct: one event type.
    Struct {
        /// The event type, given or defaulted.
        event_type: Name,
        /// The fields, in declaration order.
        fields: Vec<Field<'a>>,
    },
    /// An enum: one event type per variant.
    Enum(Vec<Variant<'a>>),
}

/// A variant of an enum.
pub struct Variant<'a> {
    /// The variant's name.
    pub ident: &'a Ident,
    /// The event type, given or defaulted.
    pub event_type: Name,
    /// The fields, in declaration order.
    pub fields: Vec<Field<'a>>,
    /// An `aggregate_id` key sat on the variant itself, and was reported as misplaced.
    pub aggregate_id_misplaced: bool,
}

/// A field of a struct or of a variant.
pub struct Field<'a> {
    /// `name` or `0`: how to access the field.
    pub member: Member,
    /// The field's type.
    pub ty: &'a Type,
    /// The `aggregate_id` key, if the field has one.
    pub aggregate_id: Option<syn::Path>,
    /// The field's `#[outbox(...)]` had errors (see [`attr::Attrs::aggregate_id_failed`]).
    pub aggregate_id_failed: bool,
}

/// An `aggregate` or `event_type`.
pub struct Name {
    /// The name itself.
    pub value: String,
    /// The string literal it was given with, or the identifier it was derived from.
    pub span: Span,
    /// Given or derived.
    pub origin: Origin,
}

/// Where a [`Name`] comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum Origin {
    /// Given with a string literal.
    Explicit,
    /// Derived from the named identifier, as written without `r#`.
    Default(String),
    /// Given, but not as a string literal; that error is reported, and the name is not checked.
    Invalid,
}

impl Name {
    fn explicit(lit: &syn::LitStr) -> Name {
        Name {
            value: lit.value(),
            span: lit.span(),
            origin: Origin::Explicit,
        }
    }

    fn invalid(at: &Ident) -> Name {
        Name {
            value: String::new(),
            span: at.span(),
            origin: Origin::Invalid,
        }
    }

    /// The given name, else (if none was attempted) the default `default()` derived from `from`.
    fn given_or(
        lit: Option<&syn::LitStr>,
        invalid: bool,
        from: &Ident,
        default: impl FnOnce() -> String,
    ) -> Name {
        match lit {
            Some(lit) => Name::explicit(lit),
            None if invalid => Name::invalid(from),
            None => Name::default(default(), from),
        }
    }

    fn default(value: String, from: &Ident) -> Name {
        Name {
            value,
            span: from.span(),
            origin: Origin::Default(from.unraw().to_string()),
        }
    }
}

impl<'a> Container<'a> {
    /// Reads `input`; `None` (after recording an error) for a union, which cannot derive.
    pub fn from_ast(cx: &Ctxt, input: &'a DeriveInput) -> Option<Container<'a>> {
        let ident = &input.ident;
        let type_words = name::strip_event_suffix(name::words(&ident.unraw().to_string()));
        match &input.data {
            SynData::Union(union) => {
                cx.error_spanned_by(
                    union.union_token,
                    "#[derive(OutboxEvent)] supports structs and enums, not unions",
                );
                None
            }
            SynData::Struct(data) => {
                let attrs = attr::parse(cx, &input.attrs, Position::Struct);
                // `OrderCreated`: aggregate `order`, event type `order.created`.
                // A value given but not as a string is reported once, not also as a default
                // that cannot be derived.
                let aggregate = Name::given_or(
                    attrs.aggregate.as_ref(),
                    attrs.aggregate_invalid,
                    ident,
                    || type_words.first().cloned().unwrap_or_default(),
                );
                let event_type = Name::given_or(
                    attrs.event_type.as_ref(),
                    attrs.event_type_invalid,
                    ident,
                    || type_words.join("."),
                );
                Some(Container {
                    ident,
                    generics: &input.generics,
                    krate: attrs.krate,
                    aggregate,
                    data: Data::Struct {
                        event_type,
                        fields: fields_from_ast(cx, &data.fields),
                    },
                    aggregate_id_misplaced: attrs.aggregate_id_failed,
                })
            }
            SynData::Enum(data) => {
                let attrs = attr::parse(cx, &input.attrs, Position::Enum);
                // `OrderEvent`: aggregate `order`; `ShoppingCartEvent`: `shopping_cart`.
                let aggregate = Name::given_or(
                    attrs.aggregate.as_ref(),
                    attrs.aggregate_invalid,
                    ident,
                    || type_words.join("_"),
                );
                let variants = data
                    .variants
                    .iter()
                    .map(|variant| {
                        let attrs = attr::parse(cx, &variant.attrs, Position::Variant);
                        // `OrderEvent::Created`: `order.created`.
                        let event_type = Name::given_or(
                            attrs.event_type.as_ref(),
                            attrs.event_type_invalid,
                            &variant.ident,
                            || {
                                let words = name::words(&variant.ident.unraw().to_string());
                                format!("{}.{}", aggregate.value, words.join("."))
                            },
                        );
                        Variant {
                            ident: &variant.ident,
                            event_type,
                            fields: fields_from_ast(cx, &variant.fields),
                            aggregate_id_misplaced: attrs.aggregate_id_failed,
                        }
                    })
                    .collect();
                Some(Container {
                    ident,
                    generics: &input.generics,
                    krate: attrs.krate,
                    aggregate,
                    data: Data::Enum(variants),
                    aggregate_id_misplaced: attrs.aggregate_id_failed,
                })
            }
        }
    }
}

fn fields_from_ast<'a>(cx: &Ctxt, fields: &'a Fields) -> Vec<Field<'a>> {
    fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let attrs = attr::parse(cx, &field.attrs, Position::Field);
            Field {
                member: match &field.ident {
                    Some(ident) => Member::Named(ident.clone()),
                    None => Member::Unnamed(i.into()),
                },
                ty: &field.ty,
                aggregate_id: attrs.aggregate_id,
                aggregate_id_failed: attrs.aggregate_id_failed,
            }
        })
        .collect()
}
