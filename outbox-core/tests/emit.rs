//! Emit's checks: every invalid event is refused before anything is written, and the caller's
//! transaction stays usable.

use std::collections::BTreeMap;

use outbox_core::limits::{CharacterSet, MessageLimits};
use outbox_core::{Emitter, ErrorKind, OutboxEvent, Publisher, emit, emit_all};
use outbox_queries::queries::admin;
use outbox_tests::{TestDb, TestEvent, Unserialisable};
use serde::Serialize;

/// Map keys serde_json cannot write.
#[derive(Serialize)]
struct TupleKeys {
    id: String,
    map: BTreeMap<(u8, u8), u8>,
}

impl OutboxEvent for TupleKeys {
    fn aggregate_type(&self) -> &'static str {
        "order"
    }
    fn event_type(&self) -> &'static str {
        "order.tuple_keys"
    }
    fn aggregate_id(&self) -> impl std::fmt::Display + '_ {
        &self.id
    }
}

async fn count(client: &impl outbox_core::GenericClient) -> i64 {
    admin::outbox_pending_count()
        .bind(client)
        .one()
        .await
        .unwrap()
}

#[tokio::test]
async fn invalid_events_are_refused_before_insert_and_the_transaction_stays_usable() {
    let db = TestDb::new().await;
    let mut client = db.pool().get().await.unwrap();
    let tx = client.transaction().await.unwrap();

    let unserialisable = Unserialisable::new("o-1");
    let e = emit(&tx, &unserialisable).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Serialize, "{e}");
    assert!(
        std::error::Error::source(&e).is_some(),
        "the serde error is the source"
    );

    let e = emit(
        &tx,
        &TupleKeys {
            id: "o-1".into(),
            map: [((1, 2), 3)].into(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Serialize);

    let e = emit(&tx, &TestEvent::new("", 1)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EmptyAggregateId);
    // Blank is missing too (it would make every such event one aggregate).
    let e = emit(&tx, &TestEvent::new(" \t\u{3000}", 1))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EmptyAggregateId, "{e}");
    assert!(e.to_string().contains("blank aggregate id"), "{e}");

    let e = emit(&tx, &TestEvent::new("o-1", 1).note("nul \u{0} inside"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidText);
    assert!(e.to_string().contains("NUL"), "{e}");

    let e = emit(
        &tx,
        &TestEvent::new("o-1", 1).note("not a character: \u{FFFF}"),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidText);

    let e = emit(&tx, &TestEvent::new("bad\u{7}id", 1))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidText);
    assert!(e.to_string().contains("aggregate_id"), "{e}");

    // An aggregate key too long for the per-aggregate indexes: refused, typed, not retryable (it
    // failed the insert: "index row size 3232 exceeds btree version 4 maximum 2704", aborting the
    // transaction, as a retryable database error). Random text: PostgreSQL cannot compress it.
    let random = |bytes: usize| -> String {
        std::iter::repeat_with(|| uuid::Uuid::new_v4().simple().to_string())
            .flat_map(|u| u.chars().collect::<Vec<_>>())
            .take(bytes)
            .collect()
    };
    let e = emit(&tx, &TestEvent::new(random(3200), 1))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
    assert!(!e.is_retryable());
    assert!(e.to_string().contains("aggregate_id"), "{e}");

    let big = "x".repeat(1024 * 1024);
    let e = emit(&tx, &TestEvent::new("o-1", 1).note(big))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge);
    assert!(e.to_string().contains("1048576"), "{e}");

    // A batch with one bad event writes none.
    let batch = [TestEvent::new("o-1", 1), TestEvent::new("", 2)];
    let e = emit_all(&tx, &batch).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EmptyAggregateId);
    assert!(
        e.to_string().contains("event 1 of the batch"),
        "which one: {e}"
    );

    // Nothing was written, and the transaction still works: the caller may go on and commit.
    assert_eq!(count(&tx).await, 0);
    // The longest key accepted fits the indexes.
    let longest =
        outbox_core::MAX_AGGREGATE_KEY_BYTES - TestEvent::new("o", 1).aggregate_type().len();
    emit(&tx, &TestEvent::new(random(longest), 1))
        .await
        .unwrap();
    tx.execute("DELETE FROM outbox_events", &[]).await.unwrap();
    let ok = emit(
        &tx,
        &TestEvent::new("o-1", 1).note("control chars are escaped in JSON: \u{1}"),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(count(&client).await, 1);
    assert!(
        admin::get_outbox_event()
            .bind(&client, &ok)
            .opt()
            .await
            .unwrap()
            .is_some()
    );
}

/// `emit` measures the body the relay sends — PostgreSQL's jsonb text of the payload, longer than
/// serde_json's compact text — so an event it accepts is never too large for the broker (it used
/// to check the compact text: 400 000 zeros were 800 001 bytes there and 1 200 000 as sent).
#[tokio::test]
async fn the_size_check_measures_the_body_as_the_relay_sends_it() {
    let db = TestDb::new().await;
    let client = db.connect().await;
    let payloads = [
        serde_json::json!({"order_id": "o-1", "n": 1, "note": "a:b, c"}),
        serde_json::json!([
            1e300,
            1.5e-7,
            -2.5e3,
            0.1,
            123456789.0,
            5e-324,
            1.7976931348623157e308
        ]),
        serde_json::json!({"nested": {"a": [true, null, {"b": "\"q\", \\ \n"}]}, "é": "ü"}),
        serde_json::json!(vec![0; 1000]),
    ];
    for p in payloads {
        let compact = serde_json::to_string(&p).unwrap();
        let sent: i32 = client
            .query_one("SELECT octet_length($1::text::jsonb::text)", &[&compact])
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            outbox_core::message::body_len(&compact),
            sent as usize,
            "{compact}"
        );
    }
    // An event whose compact JSON fits 1 MiB but whose sent body does not is refused.
    #[derive(serde::Serialize, outbox_core::OutboxEvent)]
    #[outbox(aggregate = "doc", event_type = "doc.uploaded")]
    struct DocUploaded {
        #[outbox(aggregate_id)]
        id: u64,
        bytes: Vec<u8>,
    }
    let doc = DocUploaded {
        id: 1,
        bytes: vec![0; 400_000],
    };
    assert!(serde_json::to_string(&doc).unwrap().len() < 1024 * 1024);
    let e = emit(&client, &doc).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
}

#[tokio::test]
async fn the_size_limit_counts_attributes_and_can_be_lowered() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    // Find the note length at which the message is exactly 1 MiB.
    let overhead = {
        let json = serde_json::to_string(&TestEvent::new("o-1", 1)).unwrap();
        let sent = outbox_core::message::body_len(&json);
        outbox_core::message::message_size(sent, "order.test", "order", "o-1", None)
    };
    let fits = 1024 * 1024 - overhead;
    emit(&client, &TestEvent::new("o-1", 1).note("y".repeat(fits)))
        .await
        .unwrap();
    let e = emit(
        &client,
        &TestEvent::new("o-1", 1).note("y".repeat(fits + 1)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge);

    let small = Emitter::with_max_message_bytes(1000).unwrap();
    let e = small
        .emit(&client, &TestEvent::new("o-1", 1).note("z".repeat(1000)))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge);
    small
        .emit(&client, &TestEvent::new("o-1", 1).note("z".repeat(100)))
        .await
        .unwrap();
    assert_eq!(
        Emitter::with_max_message_bytes(2 * 1024 * 1024)
            .unwrap_err()
            .kind(),
        ErrorKind::Config
    );
    assert_eq!(count(&client).await, 2);
}

/// A broker with SNS's size limit and any character but NUL.
struct SmallBroker;

impl Publisher for SmallBroker {
    type Error = std::io::Error;

    async fn publish(
        &self,
        events: &[outbox_core::ClaimedEvent],
    ) -> Result<Vec<outbox_core::PublishOutcome>, Self::Error> {
        Ok(vec![outbox_core::PublishOutcome::Published; events.len()])
    }

    fn limits(&self) -> MessageLimits {
        MessageLimits::new("SmallBroker", 256 * 1024, CharacterSet::Unicode)
    }
}

#[tokio::test]
async fn an_emitter_for_a_publisher_checks_that_publishers_limits() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let emitter = Emitter::for_publisher(&SmallBroker);
    assert_eq!(emitter.limits(), SmallBroker.limits());

    // 300 KiB: fine for the default limits, too large for this broker, named in the error.
    let big = TestEvent::new("o-1", 1).note("b".repeat(300 * 1024));
    let e = emitter.emit(&client, &big).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge);
    assert!(
        e.to_string()
            .contains("SmallBroker accepts at most 262144 bytes"),
        "{e}"
    );
    assert_eq!(count(&client).await, 0, "nothing written");
    emit(&client, &big).await.unwrap();

    // A control character: refused by the default (XML) limits, accepted by this broker's.
    let bell = TestEvent::new("o-\u{7}", 1);
    let e = emit(&client, &bell).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidText);
    assert!(e.to_string().contains("aggregate_id holds U+0007"), "{e}");
    emitter.emit(&client, &bell).await.unwrap();
    assert_eq!(count(&client).await, 2);
}

#[tokio::test]
async fn emit_works_on_plain_tokio_postgres_clients_and_transactions() {
    let db = TestDb::new().await;
    let mut client = db.connect().await;
    emit(&client, &TestEvent::new("o-1", 1)).await.unwrap();
    let tx = client.transaction().await.unwrap();
    emit(&tx, &TestEvent::new("o-1", 2)).await.unwrap();
    emit_all(&tx, &[TestEvent::new("o-1", 3)]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(count(&client).await, 3);
}

#[tokio::test]
async fn unordered_emit_works_on_plain_tokio_postgres_clients_and_transactions() {
    let db = TestDb::new().await;
    let mut client = db.connect().await;
    let unordered = Emitter::new().per_aggregate_order(false);
    let first = unordered
        .emit(&client, &TestEvent::new("o-1", 1))
        .await
        .unwrap();
    let tx = client.transaction().await.unwrap();
    let events = [TestEvent::new("o-1", 2), TestEvent::new("o-2", 1)];
    let ids = unordered.emit_all(&tx, &events).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ids.len(), 2);
    assert!(first != ids[0] && ids[0] != ids[1]);
    assert_eq!(count(&client).await, 3);
}

#[tokio::test]
async fn the_trace_context_is_stored_in_metadata() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let id = outbox_core::trace::with_traceparent(tp, emit(&client, &TestEvent::new("o-1", 1)))
        .await
        .unwrap();
    let row = admin::get_outbox_event()
        .bind(&client, &id)
        .one()
        .await
        .unwrap();
    assert_eq!(row.metadata, serde_json::json!({ "traceparent": tp }));
}

/// A database error that no retry changes is not retryable; a deadlock is (a black-box run: a
/// role without INSERT got a "retryable" 42501, and a retry loop built on `is_retryable` spins
/// for ever). The SQLSTATE is readable without downcasting to tokio-postgres' types.
#[tokio::test]
async fn database_errors_are_retryable_by_their_sqlstate() {
    let db = TestDb::new().await;
    let client = db.connect().await;
    client
        .batch_execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               RAISE EXCEPTION 'refused' USING ERRCODE = current_setting('test.errcode');
             END $$;
             CREATE TRIGGER refuse BEFORE INSERT ON outbox_events
               FOR EACH ROW EXECUTE FUNCTION refuse();",
        )
        .await
        .unwrap();
    for (code, retryable) in [
        ("40P01", true),  // deadlock detected
        ("40001", true),  // serialisation failure
        ("57P01", true),  // the server shutting down
        ("53300", true),  // too many connections
        ("28P01", true),  // a password refused (being rotated)
        ("42501", false), // permission denied
        ("42P01", false), // a table missing
        ("23505", false), // a unique key taken
        ("22003", false), // a number out of range
    ] {
        client
            .execute("SELECT set_config('test.errcode', $1, false)", &[&code])
            .await
            .unwrap();
        let e = emit(&client, &TestEvent::new("o-1", 1)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Database, "{e}");
        assert_eq!(e.sqlstate(), Some(code), "{e}");
        assert_eq!(e.is_retryable(), retryable, "{code}: {e}");
    }
    // Refused before the database: no SQLSTATE, and final by its kind.
    let e = emit(&client, &TestEvent::new("", 1)).await.unwrap_err();
    assert_eq!(e.sqlstate(), None);
    assert!(!e.is_retryable());
}
