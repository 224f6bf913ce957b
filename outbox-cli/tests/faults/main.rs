//! The fault suite: real `outbox relay` processes against real PostgreSQL and an SQS server
//! (fauxqs, or the fault fixture where a scenario injects faults). Each scenario writes at least
//! 10 000 events over many aggregates, injects one fault, checks the whole history and prints one
//! line of figures: every committed event delivered at least once, nothing rolled back delivered,
//! per-aggregate order never violated, duplicates counted.

#[path = "../support/mod.rs"]
mod support;

mod concurrency;
mod crash;
mod data;
mod outages;
mod queues;

use std::str::FromStr;
use std::time::{Duration, Instant};

use outbox_core::{ErrorKind, emit, emit_all};
use outbox_queries::queries::admin;
use outbox_sqs_fixture::{CallFault, EntryFault, SqsFixture};
use outbox_tests::sqs::TestQueue;
use outbox_tests::{TestDb, TestEvent, Unserialisable};
use support::*;

const EVENTS: u64 = 10_000;

fn fixture_deliveries(fx: &SqsFixture) -> Vec<Delivery> {
    fx.messages()
        .iter()
        .map(|m| Delivery::from_message(&m.attributes["event_id"], &m.body))
        .collect()
}

/// A fresh database in the layout `OUTBOX_TEST_LAYOUT` names, checked to have it: the suite runs a
/// second time on the partitioned layout (`scripts/test`) and must not silently test the plain one.
async fn fault_db() -> TestDb {
    let db = TestDb::new().await;
    assert_env_layout(&db.connect().await).await;
    db
}

/// Panics unless the database `client` is connected to has the layout `OUTBOX_TEST_LAYOUT` names.
async fn assert_env_layout(client: &tokio_postgres::Client) {
    let have = outbox_core::partition::layout(client)
        .await
        .expect("read the database's layout");
    assert_eq!(
        have,
        outbox_tests::db::layout_from_env(),
        "the fault suite's database must have the layout {} names",
        outbox_tests::LAYOUT_ENV
    );
}

fn rand_u64() -> u64 {
    (uuid::Uuid::new_v4().as_u128() >> 64) as u64
}
