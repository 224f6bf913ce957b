use std::fmt::Display;

use outbox_core::OutboxEvent;
use serde::Serialize;

/// The id's type is a parameter: the impl requires it to be `Display` (and the whole type
/// `Serialize`), and keeps the user's own bounds.
#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "doc", event_type = "doc.edited")]
struct Edited<'a, Id, Body: Clone>
where
    Body: Serialize,
{
    #[outbox(aggregate_id)]
    id: Id,
    body: Body,
    by: &'a str,
}

#[derive(Serialize, OutboxEvent)]
#[outbox(aggregate = "doc", event_type = "doc.tagged")]
struct Tagged<T> {
    #[outbox(aggregate_id)]
    id: u64,
    tags: Vec<T>,
}

fn metadata<E: OutboxEvent>(event: &E) -> String {
    format!(
        "{} {} {}",
        event.aggregate_type(),
        event.event_type(),
        event.aggregate_id()
    )
}

fn id_of<Id: Display + Serialize>(id: Id) -> String {
    metadata(&Edited {
        id,
        body: vec![1],
        by: "ann",
    })
}

#[test]
fn generic_events_derive_with_their_bounds() {
    assert_eq!(id_of(12_u8), "doc doc.edited 12");
    assert_eq!(id_of("d-1"), "doc doc.edited d-1");
    assert_eq!(
        metadata(&Tagged {
            id: 4,
            tags: vec!["x"]
        }),
        "doc doc.tagged 4"
    );
    let edited = Edited {
        id: 1,
        body: (),
        by: "bo",
    };
    assert_eq!((edited.body, edited.by), ((), "bo"));
}
