// This file was generated with `cornucopia`. Do not modify.

pub mod orders;
pub mod shipments;
pub mod summaries;
