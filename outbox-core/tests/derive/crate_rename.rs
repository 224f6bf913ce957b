//! The crate under another name, as after `outbox = { package = "outbox-core" }` in Cargo.toml.
extern crate outbox_core as renamed;

use renamed::OutboxEvent;
use serde::Serialize;

mod inner {
    // Or re-exported from a module.
    pub use ::outbox_core as outbox;
}

#[derive(Serialize, OutboxEvent)]
#[outbox(crate = "renamed", aggregate = "user")]
struct UserRegistered {
    #[outbox(aggregate_id)]
    id: u64,
}

#[derive(Serialize, OutboxEvent)]
#[outbox(crate = "crate::crate_rename::inner::outbox")]
enum UserEvent {
    Renamed(#[outbox(aggregate_id)] u64),
}

#[test]
fn a_renamed_or_re_exported_crate_is_found_by_its_path() {
    let registered = UserRegistered { id: 1 };
    assert_eq!(registered.event_type(), "user.registered");
    assert_eq!(registered.aggregate_id().to_string(), "1");
    let renamed = UserEvent::Renamed(2);
    assert_eq!(renamed.aggregate_type(), "user");
    assert_eq!(renamed.event_type(), "user.renamed");
}
