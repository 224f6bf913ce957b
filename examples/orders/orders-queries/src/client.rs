// This file was generated with `cornucopia`. Do not modify.

pub(crate) mod async_;
pub use async_::*;
