//! The error context: every stage records its errors here instead of stopping at the first one,
//! so the user sees all of them from one build.

use std::cell::RefCell;
use std::fmt::Display;
use std::thread;

use quote::ToTokens;

/// Collects the errors found while parsing, validating and expanding one derive input.
///
/// Must be consumed with [`Ctxt::check`]; dropping it unchecked is a bug in the macro and panics.
pub struct Ctxt {
    /// `None` once checked.
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    /// An empty context.
    pub fn new() -> Self {
        Ctxt {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// Records an error spanning the tokens of `obj`.
    pub fn error_spanned_by<A: ToTokens, T: Display>(&self, obj: A, msg: T) {
        self.syn_error(syn::Error::new_spanned(obj.into_token_stream(), msg));
    }

    /// Records an error at `span`.
    pub fn error_at<T: Display>(&self, span: proc_macro2::Span, msg: T) {
        self.syn_error(syn::Error::new(span, msg));
    }

    /// Records an error produced by syn.
    pub fn syn_error(&self, err: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("Ctxt used after check")
            .push(err);
    }

    /// Consumes the context: `Err` with every recorded error combined into one, in the order they
    /// were recorded.
    pub fn check(self) -> syn::Result<()> {
        let mut errors = self
            .errors
            .borrow_mut()
            .take()
            .expect("Ctxt checked twice")
            .into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !thread::panicking() && self.errors.borrow().is_some() {
            panic!("forgot to check for errors");
        }
    }
}
