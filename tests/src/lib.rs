//! Test support for the outbox workspace: throwaway PostgreSQL databases with the outbox schema,
//! in-process publishers that record or fail, and SQS queues on the local SQS server.
//!
//! Settings come from the environment with local defaults:
//! `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`, the server tests create
//! their databases on) and the standard AWS variables (the `sqs` module, behind the `sqs` feature).
//! A test that cannot reach a service fails with a message saying how to start it.
//! `OUTBOX_TEST_LAYOUT=partitioned` gives every [`TestDb::new`] the partitioned layout.

pub mod db;
pub mod delay_proxy;
pub mod events;
pub mod held;
pub mod interleaved;
pub mod logs;
pub mod partitions;
pub mod proxy;
pub mod publishers;
pub mod role;
pub mod running;
#[cfg(feature = "sqs")]
pub mod sqs;
mod startup_packet;

pub use db::{LAYOUT_ENV, TestDb};
pub use delay_proxy::DelayProxy;
pub use events::{TestEvent, Unserialisable, note};
pub use held::HeldAggregate;
pub use logs::LogCapture;
pub use proxy::BlackHoleProxy;
pub use publishers::{FlakyPublisher, RecordingPublisher};
pub use role::TestRole;
pub use running::{RunningRelay, eventually, set_waiting, waiting_lock_holders};

/// `cmd` without the `OUTBOX_*` variables the test run inherited (the layout under test, say): they
/// are not the spawned process's settings, and `outbox relay` warns about those it does not know.
pub fn without_outbox_env(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("OUTBOX_") {
            cmd.env_remove(name);
        }
    }
    cmd
}
