//! Issue 18, goal 2: what each event costs the database to write. Time-ordered ids, no `seq`
//! index, room on each page for the mark (migration V5, an in-place upgrade), and the
//! acknowledgement that deletes instead of marking when nothing is to be kept.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::{Relay, emit, emit_all};
use outbox_tests::{RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually};
use uuid::Uuid;

/// The Unix milliseconds in a UUIDv7's first 48 bits.
fn unix_ms(id: Uuid) -> u64 {
    let (secs, nanos) = id
        .get_timestamp()
        .expect("a UUIDv7 carries a timestamp")
        .to_unix();
    secs * 1000 + u64::from(nanos) / 1_000_000
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_millis() as u64
}

#[tokio::test]
async fn ids_are_uuidv7_from_emit_and_from_the_column_default() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let mut ids = vec![emit(&client, &TestEvent::new("a", 1)).await.unwrap()];
    ids.extend(
        emit_all(&client, &[TestEvent::new("a", 2), TestEvent::new("b", 1)])
            .await
            .unwrap(),
    );
    ids.push(emit(&client, &TestEvent::new("a", 3)).await.unwrap());
    for id in &ids {
        assert_eq!(id.get_version_num(), 7, "{id} is not a UUIDv7");
        assert!(now_ms().abs_diff(unix_ms(*id)) < 60_000, "{id}: not now");
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, ids, "ids of one emitter grow in the order of emits");

    // A row written by hand gets a UUIDv7 from the column default.
    let raw = old_rows(&client, "raw", 1).await[0];
    assert_eq!(raw.get_version_num(), 7, "{raw}");
    assert_eq!(raw.get_variant(), uuid::Variant::RFC4122, "{raw}");
    assert!(now_ms().abs_diff(unix_ms(raw)) < 60_000, "{raw}: not now");
}

/// Facts about `outbox_events` an upgrade must change or keep.
#[derive(Debug, PartialEq)]
struct Shape {
    /// Indexes on `seq` alone over all rows (the plain table's UNIQUE constraint, the partitioned
    /// layout's index and its partitions').
    seq_indexes: i64,
    /// Tables (plain, or partitions) with room left on each page for the mark.
    fillfactor_60: i64,
}

/// `published` holds exactly `expected`, and the events of each aggregate in `expected`'s order
/// (the relay keeps order per aggregate, not across them).
fn assert_published(published: &[Uuid], expected: &[(&str, Uuid)]) {
    let mut got = published.to_vec();
    got.sort();
    let mut want: Vec<Uuid> = expected.iter().map(|(_, id)| *id).collect();
    want.sort();
    assert_eq!(got, want, "each event published once");
    let position = |id: &Uuid| published.iter().position(|p| p == id);
    for pair in expected.windows(2) {
        if pair[0].0 == pair[1].0 {
            assert!(
                position(&pair[0].1) < position(&pair[1].1),
                "{} published before {} in aggregate {}",
                pair[1].1,
                pair[0].1,
                pair[0].0
            );
        }
    }
}

async fn shape(client: &tokio_postgres::Client) -> Shape {
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
                      WHERE t.relname LIKE 'outbox_events%' AND t.relname NOT LIKE '%legacy%'
                        AND i.indpred IS NULL AND i.indnatts = 1
                        AND (SELECT attname FROM pg_attribute
                              WHERE attrelid = t.oid AND attnum = i.indkey[0]) = 'seq'),
                    (SELECT count(*) FROM pg_class
                      WHERE relname LIKE 'outbox_events%' AND relkind = 'r'
                        AND reloptions @> ARRAY['fillfactor=60'])",
            &[],
        )
        .await
        .unwrap();
    Shape {
        seq_indexes: row.get(0),
        fillfactor_60: row.get(1),
    }
}

/// Writes `n` pending events by hand (ids from the column default), as every release before V5
/// wrote them.
async fn old_rows(client: &tokio_postgres::Client, aggregate: &str, n: i64) -> Vec<Uuid> {
    client
        .query(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
             SELECT 'test', $1, 'test.happened', jsonb_build_object('n', g)
               FROM generate_series(1, $2::bigint) g RETURNING id",
            &[&aggregate, &n],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The file holding `outbox_events`: it changes when the table is rewritten.
async fn filenode(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one("SELECT pg_relation_filenode('outbox_events')::bigint", &[])
        .await
        .unwrap()
        .get(0)
}

/// Drains the outbox with a relay and returns the ids in publishing order.
async fn drain(db: &TestDb, expected: usize) -> Vec<Uuid> {
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .poll_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    assert!(
        eventually(Duration::from_secs(20), async || publisher.ids().len()
            >= expected)
        .await,
        "published {} of {expected}",
        publisher.ids().len()
    );
    running.stop().await;
    publisher.ids()
}

#[tokio::test]
async fn v5_upgrades_a_plain_table_in_place_keeping_its_rows() {
    let db = TestDb::empty().await;
    let mut client = db.connect().await;
    outbox_core::migrate_up_to(&mut client, 4).await.unwrap();
    assert_eq!(
        shape(&client).await,
        Shape {
            seq_indexes: 1,
            fillfactor_60: 0
        }
    );
    let old = old_rows(&client, "a", 5).await;
    assert!(old.iter().all(|id| id.get_version_num() == 4));
    let before = filenode(&client).await;

    let report = outbox_core::migrate_up_to(&mut client, 5).await.unwrap();
    assert_eq!(report.applied, vec!["V5__write_amplification".to_string()]);
    assert_eq!(filenode(&client).await, before, "no table rewrite");
    assert_eq!(
        shape(&client).await,
        Shape {
            seq_indexes: 0,
            fillfactor_60: 1
        }
    );

    let new = old_rows(&client, "a", 1).await[0];
    assert_eq!(
        new.get_version_num(),
        7,
        "the column default is a UUIDv7 now"
    );
    let emitted = emit(&client, &TestEvent::new("a", 6)).await.unwrap();
    assert_eq!(emitted.get_version_num(), 7);
    let mut expected: Vec<(&str, Uuid)> = old.iter().map(|id| ("a", *id)).collect();
    expected.push(("a", new));
    expected.push(("emitted", emitted));
    assert_published(&drain(&db, 7).await, &expected);
}

#[tokio::test]
async fn v5_upgrades_a_partitioned_table_and_later_conversions_use_the_new_shape() {
    // A table partitioned by a release before V5.
    let db = TestDb::empty().await;
    let mut client = db.connect().await;
    outbox_core::migrate_up_to(&mut client, 4).await.unwrap();
    client
        .batch_execute("SELECT outbox_partitions_convert('hourly', 3)")
        .await
        .unwrap();
    let old = old_rows(&client, "p", 4).await;
    assert!(shape(&client).await.seq_indexes > 0);

    outbox_core::migrate(&mut client).await.unwrap();
    let after = shape(&client).await;
    assert_eq!(after.seq_indexes, 0, "the seq index is gone");
    let partitions: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox_events'::regclass",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(after.fillfactor_60, partitions, "every partition has room");
    let new = old_rows(&client, "p", 1).await[0];
    assert_eq!(
        new.get_version_num(),
        7,
        "the column default is a UUIDv7 now"
    );
    let mut expected: Vec<(&str, Uuid)> = old.iter().map(|id| ("p", *id)).collect();
    expected.push(("p", new));
    assert_published(&drain(&db, 5).await, &expected);

    // A plain table converted after V5: the conversion knows there is no seq_key any more.
    let plain = TestDb::plain().await;
    let mut client = plain.connect().await;
    let first = emit(&client, &TestEvent::new("q", 1)).await.unwrap();
    outbox_core::partition::migrate_partitioned(
        &mut client,
        outbox_core::partition::Granularity::Hourly,
        None,
    )
    .await
    .unwrap();
    let after = shape(&client).await;
    assert_eq!(after.seq_indexes, 0);
    assert!(after.fillfactor_60 > 0);
    let raw = old_rows(&client, "raw", 1).await[0];
    assert_eq!(
        raw.get_version_num(),
        7,
        "the partitioned default is a UUIDv7"
    );
    assert_published(&drain(&plain, 2).await, &[("emitted", first), ("raw", raw)]);
}

#[tokio::test]
async fn a_zero_retention_deletes_each_event_as_it_is_acknowledged() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    let kept = emit(&client, &TestEvent::new("k", 1)).await.unwrap();
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .poll_interval(Duration::from_millis(100))
        .retention(Some(Duration::ZERO))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let ids = emit_all(
        &client,
        &[
            TestEvent::new("d", 1),
            TestEvent::new("d", 2),
            TestEvent::new("e", 1),
        ],
    )
    .await
    .unwrap();
    assert!(eventually(Duration::from_secs(10), async || publisher.ids().len() == 4).await);
    running.stop().await;
    assert_published(
        &publisher.ids(),
        &[("k", kept), ("d", ids[0]), ("d", ids[1]), ("e", ids[2])],
    );
    let left: i64 = client
        .query_one("SELECT count(*) FROM outbox_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "published rows are deleted, not marked");
}
