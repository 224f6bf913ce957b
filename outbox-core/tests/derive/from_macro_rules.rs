//! Events declared by a `macro_rules!`: the field's type comes from the macro's input, and the
//! generated code must still resolve `self` and its bindings where the impl is written (it failed:
//! E0424 "expected value, found module `self`", E0425 on the enum's binding).

use outbox_core::OutboxEvent;
use serde::Serialize;

macro_rules! event {
    ($name:ident, $id:ty) => {
        #[derive(Serialize, OutboxEvent)]
        #[outbox(aggregate = "order")]
        struct $name {
            #[outbox(aggregate_id)]
            id: $id,
        }
    };
}

macro_rules! events {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        enum $name {
            #[outbox(event_type = "payment.taken")]
            Taken(#[outbox(aggregate_id)] u64),
            #[outbox(event_type = "payment.refunded")]
            Refunded {
                #[outbox(aggregate_id)]
                id: u64,
            },
        }
    };
}

event!(OrderPlaced, u64);
events!(
    #[derive(Serialize, OutboxEvent)]
    #[outbox(aggregate = "payment")]
    Payment
);

#[test]
fn events_declared_by_a_macro_derive() {
    let placed = OrderPlaced { id: 7 };
    assert_eq!(placed.aggregate_id().to_string(), "7");
    assert_eq!(placed.event_type(), "order.placed");
    assert_eq!(Payment::Taken(3).aggregate_id().to_string(), "3");
    assert_eq!(Payment::Refunded { id: 4 }.event_type(), "payment.refunded");
}
