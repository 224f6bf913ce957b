//! `#[derive(OutboxEvent)]`: the metadata derived values report, and their payloads.

// What a user's crate declares, one module each: that they compile is half the test (trybuild
// built each as a crate of its own and ran it, which made it build every dependency in full
// rather than only check them for the compile-fail cases).
#[path = "derive/crate_rename.rs"]
mod crate_rename;
#[path = "derive/decode_struct_and_enum.rs"]
mod decode_struct_and_enum;
#[path = "derive/enum_variants.rs"]
mod enum_variants;
#[path = "derive/from_macro_rules.rs"]
mod from_macro_rules;
#[path = "derive/generic_struct.rs"]
mod generic_struct;
#[path = "derive/named_struct.rs"]
mod named_struct;
#[path = "derive/tuple_struct.rs"]
mod tuple_struct;

use std::fmt;

use outbox_core::OutboxEvent;
use serde::Serialize;
use serde_json::json;
use uuid::Uuid;

/// Reads the three metadata methods the way `emit` does: through the trait, as text.
fn meta<E: OutboxEvent>(event: &E) -> (&'static str, &'static str, String) {
    (
        event.aggregate_type(),
        event.event_type(),
        event.aggregate_id().to_string(),
    )
}

fn payload<E: OutboxEvent>(event: &E) -> serde_json::Value {
    serde_json::to_value(event).unwrap()
}

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "order", event_type = "order.created")]
struct OrderCreated {
    #[outbox(aggregate_id)]
    order_id: Uuid,
    total_cents: i64,
}

#[test]
fn named_struct_with_explicit_names() {
    let id = Uuid::new_v4();
    let event = OrderCreated {
        order_id: id,
        total_cents: 1250,
    };
    assert_eq!(meta(&event), ("order", "order.created", id.to_string()));
    assert_eq!(
        payload(&event),
        json!({"order_id": id.to_string(), "total_cents": 1250})
    );
}

#[test]
fn aggregate_id_borrows_the_field() {
    #[derive(Serialize, OutboxEvent)]
    struct NameChanged {
        #[outbox(aggregate_id)]
        user: String,
    }
    let event = NameChanged { user: "ada".into() };
    // No allocation: the id is the field itself, formatted on demand.
    let id = event.aggregate_id();
    assert_eq!(format!("{id:>5}|"), "  ada|");
}

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "counter")]
struct CounterIncremented(#[outbox(aggregate_id)] u64, i32);

#[test]
fn tuple_struct_with_integer_id() {
    let event = CounterIncremented(42, -1);
    assert_eq!(
        meta(&event),
        ("counter", "counter.incremented", "42".to_owned())
    );
    assert_eq!(payload(&event), json!([42, -1]));
}

/// A newtype id with its own Display.
#[derive(Serialize, Clone, Copy)]
struct CustomerId(u32);

impl fmt::Display for CustomerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cust-{:05}", self.0)
    }
}

#[derive(Serialize, OutboxEvent)]
struct CustomerAddressChanged {
    #[outbox(aggregate_id)]
    customer: CustomerId,
    city: String,
}

#[test]
fn newtype_id_and_default_names() {
    let event = CustomerAddressChanged {
        customer: CustomerId(7),
        city: "Lyon".into(),
    };
    // Defaults: aggregate is the first word of the type name, event type all of its words.
    assert_eq!(
        meta(&event),
        (
            "customer",
            "customer.address.changed",
            "cust-00007".to_owned()
        )
    );
    // A newtype struct serialises as its inner value.
    assert_eq!(payload(&event), json!({"customer": 7, "city": "Lyon"}));
}

#[test]
fn default_event_type_splits_acronyms_and_drops_event_suffix() {
    #[derive(Serialize, OutboxEvent)]
    struct HTTPRequestSent {
        #[outbox(aggregate_id)]
        id: u8,
    }
    #[derive(Serialize, OutboxEvent)]
    struct InvoiceV2PaidEvent {
        #[outbox(aggregate_id)]
        id: u8,
    }
    #[derive(Serialize, OutboxEvent)]
    #[allow(non_camel_case_types)]
    struct r#Payment_Failed {
        #[outbox(aggregate_id)]
        id: u8,
    }
    #[derive(Serialize, OutboxEvent)]
    struct Heartbeat {
        #[outbox(aggregate_id)]
        id: u8,
    }
    // A run of capitals is one word; its last capital starts the next word before a lowercase.
    let e = HTTPRequestSent { id: 1 };
    assert_eq!(
        (e.aggregate_type(), e.event_type()),
        ("http", "http.request.sent")
    );
    // Digits stay with the word before them; a last word `Event` is dropped.
    let e = InvoiceV2PaidEvent { id: 1 };
    assert_eq!(
        (e.aggregate_type(), e.event_type()),
        ("invoice", "invoice.v2.paid")
    );
    // `r#` is ignored and `_` separates words.
    let e = Payment_Failed { id: 1 };
    assert_eq!(
        (e.aggregate_type(), e.event_type()),
        ("payment", "payment.failed")
    );
    let e = Heartbeat { id: 1 };
    assert_eq!(
        (e.aggregate_type(), e.event_type()),
        ("heartbeat", "heartbeat")
    );
}

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "order")]
enum OrderEvent {
    /// Default event type: `order.placed`.
    Placed {
        #[outbox(aggregate_id)]
        order_id: Uuid,
        lines: u32,
    },
    #[outbox(event_type = "order.shipped.v2")]
    Shipped {
        carrier: String,
        #[outbox(aggregate_id)]
        order_id: Uuid,
    },
    /// A tuple variant.
    Cancelled(#[outbox(aggregate_id)] Uuid, String),
    /// A newtype variant.
    Archived(#[outbox(aggregate_id)] Uuid),
}

#[test]
fn enum_metadata_per_variant() {
    let id = Uuid::new_v4();
    let placed = OrderEvent::Placed {
        order_id: id,
        lines: 3,
    };
    let shipped = OrderEvent::Shipped {
        carrier: "DHL".into(),
        order_id: id,
    };
    let cancelled = OrderEvent::Cancelled(id, "changed my mind".into());
    let archived = OrderEvent::Archived(id);
    assert_eq!(meta(&placed), ("order", "order.placed", id.to_string()));
    assert_eq!(
        meta(&shipped),
        ("order", "order.shipped.v2", id.to_string())
    );
    assert_eq!(
        meta(&cancelled),
        ("order", "order.cancelled", id.to_string())
    );
    assert_eq!(meta(&archived), ("order", "order.archived", id.to_string()));
}

#[test]
fn enum_payload_is_externally_tagged() {
    let id = Uuid::new_v4();
    assert_eq!(
        payload(&OrderEvent::Shipped {
            carrier: "DHL".into(),
            order_id: id
        }),
        json!({"Shipped": {"carrier": "DHL", "order_id": id.to_string()}})
    );
    assert_eq!(
        payload(&OrderEvent::Cancelled(id, "late".into())),
        json!({"Cancelled": [id.to_string(), "late"]})
    );
    assert_eq!(
        payload(&OrderEvent::Archived(id)),
        json!({"Archived": id.to_string()})
    );
}

/// Serde's own attributes shape the payload; the outbox metadata does not change.
#[derive(Serialize, OutboxEvent)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ShoppingCartEvents {
    ItemAdded {
        #[outbox(aggregate_id)]
        cart: u64,
        sku: String,
    },
    CheckedOut {
        #[outbox(aggregate_id)]
        cart: u64,
    },
}

#[test]
fn enum_default_names_and_internally_tagged_payload() {
    let added = ShoppingCartEvents::ItemAdded {
        cart: 9,
        sku: "A-1".into(),
    };
    let out = ShoppingCartEvents::CheckedOut { cart: 9 };
    // Default aggregate: the enum's name without `Events`, snake_case; default event type: the
    // aggregate, a dot, and the variant's words joined with dots.
    assert_eq!(
        meta(&added),
        ("shopping_cart", "shopping_cart.item.added", "9".to_owned())
    );
    assert_eq!(
        meta(&out),
        ("shopping_cart", "shopping_cart.checked.out", "9".to_owned())
    );
    assert_eq!(
        payload(&added),
        json!({"type": "item_added", "cart": 9, "sku": "A-1"})
    );
    assert_eq!(payload(&out), json!({"type": "checked_out", "cart": 9}));
}

#[test]
fn enum_default_event_type_uses_the_given_aggregate() {
    #[derive(Serialize, OutboxEvent)]
    #[outbox(aggregate = "billing")]
    enum InvoiceEvent {
        Paid(#[outbox(aggregate_id)] u32),
        PartiallyRefunded {
            #[outbox(aggregate_id)]
            invoice: u32,
            cents: u64,
        },
    }
    let paid = InvoiceEvent::Paid(1);
    assert_eq!(meta(&paid), ("billing", "billing.paid", "1".to_owned()));
    let refunded = InvoiceEvent::PartiallyRefunded {
        invoice: 2,
        cents: 5,
    };
    assert_eq!(
        meta(&refunded),
        ("billing", "billing.partially.refunded", "2".to_owned())
    );
    assert_eq!(
        payload(&refunded),
        json!({"PartiallyRefunded": {"invoice": 2, "cents": 5}})
    );
}

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "tenant/account", event_type = "account:renamed")]
struct Renamed<'a, T, const N: usize>
where
    T: Clone,
{
    #[outbox(aggregate_id)]
    id: T,
    names: Vec<&'a str>,
    #[serde(skip)]
    width: [(); N],
}

#[derive(Serialize, OutboxEvent)]
enum GenericEvent<I> {
    Happened {
        #[outbox(aggregate_id)]
        id: I,
    },
    Undone(#[outbox(aggregate_id)] I),
}

#[test]
fn generic_types() {
    let event = Renamed {
        id: 5_u16,
        names: vec!["a", "b"],
        width: [(); 2],
    };
    assert_eq!(
        meta(&event),
        ("tenant/account", "account:renamed", "5".to_owned())
    );
    assert_eq!(payload(&event), json!({"id": 5, "names": ["a", "b"]}));
    assert_eq!(event.width.len(), 2);

    let happened = GenericEvent::Happened { id: CustomerId(3) };
    assert_eq!(
        meta(&happened),
        ("generic", "generic.happened", "cust-00003".to_owned())
    );
    let undone = GenericEvent::Undone("x");
    assert_eq!(meta(&undone), ("generic", "generic.undone", "x".to_owned()));
    assert_eq!(payload(&undone), json!({"Undone": "x"}));
}

mod reexport {
    pub use outbox_core as core_again;
}

#[derive(Serialize, OutboxEvent)]
#[outbox(crate = "crate::reexport::core_again", aggregate = "thing")]
struct ThingMade {
    #[outbox(aggregate_id)]
    id: i32,
}

#[test]
fn crate_path_attribute() {
    assert_eq!(
        meta(&ThingMade { id: -4 }),
        ("thing", "thing.made", "-4".to_owned())
    );
}

mod decode {
    use outbox_core::{DecodeEvent, ErrorKind, OutboxEvent};
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize, OutboxEvent)]
    #[outbox(aggregate = "invoice", event_type = "invoice.paid")]
    struct InvoicePaid {
        #[outbox(aggregate_id)]
        invoice: String,
        cents: i64,
    }

    /// Serde's default (externally tagged) representation.
    #[derive(Debug, PartialEq, Serialize, Deserialize, OutboxEvent)]
    #[outbox(aggregate = "cart")]
    enum CartEvent {
        ItemAdded {
            #[outbox(aggregate_id)]
            cart: u64,
            sku: String,
        },
        Emptied(#[outbox(aggregate_id)] u64),
    }

    #[test]
    fn what_emit_writes_decodes_back_by_event_type() {
        let paid = InvoicePaid {
            invoice: "inv-1".into(),
            cents: 990,
        };
        let body = serde_json::to_string(&paid).unwrap();
        assert_eq!(InvoicePaid::decode(paid.event_type(), &body).unwrap(), paid);
        for event in [
            CartEvent::ItemAdded {
                cart: 4,
                sku: "SKU-1".into(),
            },
            CartEvent::Emptied(4),
        ] {
            let body = serde_json::to_string(&event).unwrap();
            assert_eq!(CartEvent::decode(event.event_type(), &body).unwrap(), event);
        }
        assert_eq!(
            CartEvent::event_types(),
            ["cart.item.added", "cart.emptied"]
        );
    }

    #[test]
    fn unknown_types_bad_bodies_and_mismatches_are_typed_errors() {
        let e = InvoicePaid::decode("invoice.voided", "{}").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnknownEventType);
        assert!(e.to_string().contains("invoice.voided"), "{e}");
        let e = InvoicePaid::decode("invoice.paid", r#"{"invoice":"x"}"#).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Decode);
        let e = InvoicePaid::decode("invoice.paid", "not json").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Decode);
        // The body says `Emptied`, the attribute says `cart.item.added`: refused, not guessed.
        let body = serde_json::to_string(&CartEvent::Emptied(1)).unwrap();
        let e = CartEvent::decode("cart.item.added", &body).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Decode);
        assert!(e.to_string().contains("cart.emptied"), "{e}");
        assert!(!e.kind().is_retryable());
    }

    /// A field the type needs, missing inside an internally tagged enum (serde reports no
    /// position there): named, so that a schema mismatch is told from junk (a black-box run read
    /// only "line 0, column 0").
    #[test]
    fn a_missing_field_is_named_inside_a_tagged_enum() {
        #[derive(Debug, Serialize, Deserialize, OutboxEvent)]
        #[serde(tag = "kind")]
        #[outbox(aggregate = "acct")]
        enum Acct {
            Step {
                #[outbox(aggregate_id)]
                acct: String,
                amount: i64,
            },
        }
        let body = r#"{"kind":"Step","acct":"x","seq":4111}"#;
        let e = Acct::decode("acct.step", body).unwrap_err();
        assert!(e.to_string().contains("missing field `amount`"), "{e}");
        assert!(!e.to_string().contains("4111"), "{e}");
        assert_eq!(e.kind(), ErrorKind::Decode);
        assert!(e.to_string().contains("missing field `"), "{e}");
        assert!(!e.to_string().contains("line 0"), "{e}");
    }
}
