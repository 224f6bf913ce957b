//! Code generation: the `OutboxEvent` impl, or the errors plus a stub impl.

use std::collections::HashSet;

use proc_macro2::{Group, Ident, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{DeriveInput, Type, WhereClause};

use crate::ast::{Container, Data, Field};
use crate::attr::Krate;
use crate::ctxt::Ctxt;
use crate::valid;

/// The whole derive: parse, validate, generate.
pub fn derive(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let cont = ast_and_check(&cx, input);
    match (cx.check(), cont) {
        (Ok(()), Some(cont)) => impl_outbox_event(&cont),
        (Ok(()), None) => unreachable!("no container without an error"),
        (Err(err), cont) => {
            let errors = err.to_compile_error();
            // With a stub impl, the user's uses of the trait still type-check, so the errors above
            // are the only ones. No stub for a union (nothing could make it an event) or when the
            // crate path is unusable (the stub would fail to resolve it).
            let stub = cont
                .filter(|c| !matches!(c.krate, Krate::Invalid))
                .map(|c| stub_impl(&c));
            quote!(#errors #stub)
        }
    }
}

fn ast_and_check<'a>(cx: &Ctxt, input: &'a DeriveInput) -> Option<Container<'a>> {
    let cont = Container::from_ast(cx, input)?;
    valid::check(cx, &cont);
    Some(cont)
}

/// `::outbox_core::__private`, or `<crate>::__private` after `#[outbox(crate = "<crate>")]`.
fn private(cont: &Container<'_>) -> TokenStream {
    match &cont.krate {
        Krate::Custom(path) => quote!(#path::__private),
        Krate::Default | Krate::Invalid => quote!(::outbox_core::__private),
    }
}

/// The impl's where clause: the user's, plus `Self: Serialize` (which the supertrait needs, and
/// which serde's derive only gives under bounds on the type parameters) and `T: Display` for an
/// aggregate id field whose type involves a type parameter.
fn where_clause(cont: &Container<'_>, id_fields: &[&Field<'_>]) -> Option<WhereClause> {
    let generics = cont.generics;
    if generics.params.is_empty() {
        return generics.where_clause.clone();
    }
    let private = private(cont);
    let ident = cont.ident;
    let (_, ty_generics, _) = generics.split_for_impl();
    let mut where_clause = generics.clone().make_where_clause().clone();
    where_clause
        .predicates
        .push(syn::parse_quote!(#ident #ty_generics: #private::Serialize));
    let type_params: HashSet<&Ident> = generics.type_params().map(|p| &p.ident).collect();
    let mut bounded = HashSet::new();
    for field in id_fields {
        let ty = field.ty;
        if mentions(ty, &type_params) && bounded.insert(ty) {
            where_clause
                .predicates
                .push(syn::parse_quote_spanned!(ty.span()=> #ty: #private::Display));
        }
    }
    Some(where_clause)
}

/// Whether `ty` names one of `params` (a conservative token walk: `T`, `Vec<T>`, `<T as X>::Y`).
fn mentions(ty: &Type, params: &HashSet<&Ident>) -> bool {
    fn walk(tokens: TokenStream, params: &HashSet<&Ident>) -> bool {
        tokens.into_iter().any(|tt| match tt {
            TokenTree::Ident(ident) => params.contains(&ident),
            TokenTree::Group(group) => walk(group.stream(), params),
            _ => false,
        })
    }
    !params.is_empty() && walk(quote!(#ty), params)
}

/// `tokens` located at `span`, so that an error about them points there, each token keeping the
/// hygiene it had (where its names resolve).
fn relocate(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tt| {
            if let TokenTree::Group(group) = &tt {
                let mut moved = Group::new(group.delimiter(), relocate(group.stream(), span));
                moved.set_span(group.span().located_at(span));
                tt = TokenTree::Group(moved);
            }
            tt.set_span(tt.span().located_at(span));
            tt
        })
        .collect()
}

fn impl_outbox_event(cont: &Container<'_>) -> TokenStream {
    let private = private(cont);
    let ident = cont.ident;
    let aggregate = &cont.aggregate.value;
    let mut id_return = quote!(impl #private::Display + '_);
    let event_types: Vec<&String> = match &cont.data {
        Data::Struct { event_type, .. } => vec![&event_type.value],
        Data::Enum(variants) => variants.iter().map(|v| &v.event_type.value).collect(),
    };
    let (event_type, aggregate_id, id_fields) = match &cont.data {
        Data::Struct { event_type, fields } => {
            let event_type = &event_type.value;
            let field = id_field(fields);
            let member = &field.member;
            // Spanned on the field's type: if it does not implement Display, the error says so
            // there. With the return type spanned there too, rustc reports it once.
            // Located at the type, each token still resolved where it was written: `self` must
            // resolve in the impl, also when the type comes from a `macro_rules!` (the type's
            // own span resolved it in that macro's context: E0424).
            let span = field.ty.span();
            let id = relocate(quote!(#private::aggregate_id(&self.#member)), span);
            id_return = relocate(id_return, span);
            (quote!(#event_type), id, vec![field])
        }
        Data::Enum(variants) => {
            let event_types = variants.iter().map(|v| {
                let variant = v.ident;
                let event_type = &v.event_type.value;
                quote!(Self::#variant { .. } => #event_type,)
            });
            let id_fields: Vec<_> = variants.iter().map(|v| id_field(&v.fields)).collect();
            let ids = variants.iter().zip(&id_fields).map(|(v, field)| {
                let variant = v.ident;
                let member = &field.member;
                let span = Span::call_site().located_at(field.ty.span());
                let id = quote_spanned!(span=> __outbox_aggregate_id);
                quote!(Self::#variant { #member: __outbox_aggregate_id, .. } => #id,)
            });
            let event_type = quote! {
                match self {
                    #(#event_types)*
                }
            };
            // One `&dyn Display` for every arm, so that the arms agree on a type.
            let id = quote! {
                let __outbox_aggregate_id: &dyn #private::Display = match self {
                    #(#ids)*
                };
                __outbox_aggregate_id
            };
            (event_type, id, id_fields)
        }
    };
    let (impl_generics, ty_generics, _) = cont.generics.split_for_impl();
    let where_clause = where_clause(cont, &id_fields);
    quote! {
        #[automatically_derived]
        impl #impl_generics #private::OutboxEvent for #ident #ty_generics #where_clause {
            fn aggregate_type(&self) -> &'static str {
                #aggregate
            }

            fn event_type(&self) -> &'static str {
                #event_type
            }

            fn aggregate_id(&self) -> #id_return {
                #aggregate_id
            }

            fn event_types() -> &'static [&'static str] {
                &[#(#event_types),*]
            }
        }
    }
}

/// The field marked `#[outbox(aggregate_id)]`; validation made sure there is exactly one.
fn id_field<'f, 'a>(fields: &'f [Field<'a>]) -> &'f Field<'a> {
    fields
        .iter()
        .find(|f| f.aggregate_id.is_some())
        .expect("validated: one aggregate_id field")
}

/// An impl that type-checks whatever is wrong with the attributes, emitted next to their errors so
/// that code using the type as an `OutboxEvent` does not add errors of its own.
fn stub_impl(cont: &Container<'_>) -> TokenStream {
    let private = private(cont);
    let ident = cont.ident;
    let (impl_generics, ty_generics, _) = cont.generics.split_for_impl();
    let where_clause = where_clause(cont, &[]);
    quote! {
        #[automatically_derived]
        impl #impl_generics #private::OutboxEvent for #ident #ty_generics #where_clause {
            fn aggregate_type(&self) -> &'static str {
                ""
            }

            fn event_type(&self) -> &'static str {
                ""
            }

            fn aggregate_id(&self) -> impl #private::Display + '_ {
                ""
            }
        }
    }
}
