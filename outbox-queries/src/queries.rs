// This file was generated with `cornucopia`. Do not modify.

pub mod admin;
pub mod emit;
pub mod inbox;
pub mod listen;
pub mod migrate;
pub mod partition;
pub mod relay;
