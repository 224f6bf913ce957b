//! Support for the fault suite: relay processes, a restricted database role, writers, and the
//! history check.

#![allow(dead_code, unused_imports)]

mod cluster;
pub mod commands;
mod history;
mod process;
mod queue;
mod role;
pub mod tls_cluster;
mod waits;

pub use cluster::*;
pub use history::*;
pub use process::*;
pub use queue::*;
pub use role::*;
pub use waits::*;

/// One scenario at a time: they start processes and load the machine.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
