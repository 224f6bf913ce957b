//! What the consumer tests share: an event type, an effects table, a recording handler, a relay,
//! consumers on the local SQS server.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::Transaction;
use outbox_core::{CancellationToken, Relay};
use outbox_sqs::SqsPublisher;
use outbox_sqs::consumer::{Consumer, ConsumerBuilder, Delivery, Envelope, Handler, HandlerError};
use outbox_tests::sqs::TestQueue;
use outbox_tests::{RunningRelay, TestDb};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use uuid::Uuid;

/// The events of the tests: an account's credits, numbered per account from 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, outbox_core::OutboxEvent)]
#[outbox(aggregate = "account")]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AccountEvent {
    /// Credited.
    #[outbox(event_type = "account.credited")]
    Credited {
        #[outbox(aggregate_id)]
        account: String,
        n: i64,
        cents: i64,
    },
    /// Closed.
    #[outbox(event_type = "account.closed")]
    Closed {
        #[outbox(aggregate_id)]
        account: String,
        n: i64,
    },
}

impl AccountEvent {
    pub fn credited(account: &str, n: i64) -> Self {
        AccountEvent::Credited {
            account: account.to_owned(),
            n,
            cents: 100 * n,
        }
    }

    pub fn n(&self) -> i64 {
        match self {
            AccountEvent::Credited { n, .. } | AccountEvent::Closed { n, .. } => *n,
        }
    }

    pub fn account(&self) -> &str {
        match self {
            AccountEvent::Credited { account, .. } | AccountEvent::Closed { account, .. } => {
                account
            }
        }
    }
}

/// Creates the effects table: one row per application of an event (no unique key, so a double
/// application shows as two rows).
pub async fn create_effects(db: &TestDb) {
    db.connect()
        .await
        .batch_execute(
            "CREATE TABLE effects (
                 seq bigserial PRIMARY KEY,
                 event_id uuid NOT NULL,
                 account text NOT NULL,
                 n bigint NOT NULL
             )",
        )
        .await
        .expect("create the effects table");
}

/// (rows, distinct event ids) in the effects table.
pub async fn effect_counts(db: &TestDb) -> (i64, i64) {
    let row = db
        .connect()
        .await
        .query_one(
            "SELECT count(*), count(DISTINCT event_id) FROM effects",
            &[],
        )
        .await
        .expect("count effects");
    (row.get(0), row.get(1))
}

/// Each account's `n`s in the order they were applied.
pub async fn applied_order(db: &TestDb) -> Vec<(String, Vec<i64>)> {
    let rows = db
        .connect()
        .await
        .query(
            "SELECT account, array_agg(n ORDER BY seq) FROM effects GROUP BY account ORDER BY account",
            &[],
        )
        .await
        .expect("read effects");
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// Emits `per_account` credits for each of `accounts` accounts (`acc-0`, `acc-1`, …), one
/// transaction per event, interleaving the accounts; returns the event ids.
pub async fn emit_credits(db: &TestDb, accounts: usize, per_account: i64) -> Vec<Uuid> {
    let mut client = db.pool().get().await.expect("pool");
    let mut ids = Vec::new();
    for n in 1..=per_account {
        for a in 0..accounts {
            let tx = client.transaction().await.expect("begin");
            let id = outbox_core::emit(&tx, &AccountEvent::credited(&format!("acc-{a}"), n))
                .await
                .expect("emit");
            tx.commit().await.expect("commit");
            ids.push(id);
        }
    }
    ids
}

/// A relay publishing every event to `queue`.
pub async fn start_relay(db: &TestDb, queue: &TestQueue) -> RunningRelay {
    let publisher = SqsPublisher::builder()
        .sdk_config(outbox_tests::sqs::sdk_config().await)
        .default_queue(queue.url())
        .build()
        .await
        .expect("publisher");
    let relay = Relay::builder(db.pool().clone(), publisher)
        .listen(db.config().clone())
        .build()
        .expect("relay");
    RunningRelay::start(&relay)
}

/// A consumer builder for `queue` on the local SQS server: short polls and time-outs for tests.
pub async fn consumer(db: &TestDb, queue: &TestQueue, name: &str) -> ConsumerBuilder {
    consumer_on(db.pool().clone(), queue, name).await
}

/// [`consumer`] on another pool (one through a proxy, say).
pub async fn consumer_on(
    pool: deadpool_postgres::Pool,
    queue: &TestQueue,
    name: &str,
) -> ConsumerBuilder {
    Consumer::builder(pool, queue.url())
        .sdk_config(outbox_tests::sqs::sdk_config().await)
        .name(name)
        .wait(Duration::from_secs(1))
        .visibility_timeout(Duration::from_secs(2))
        .retry_backoff(Duration::from_millis(100), Duration::from_secs(1))
}

/// Writes each event to the effects table; fails the first delivery of the events `fail_first`
/// picks; waits on `gate` (when set) after writing, before returning.
#[derive(Default)]
pub struct Recorder {
    pub calls: AtomicU64,
    pub fail_first: Option<fn(&AccountEvent) -> bool>,
    pub delay: Option<Duration>,
    /// Sleeps 0–39 ms (picked by the event id) after writing: handlers finish out of start order.
    pub jitter: bool,
    /// Notified when a call starts.
    pub started: tokio::sync::Notify,
    /// When set, a call that wrote its effect waits here (forever, if never notified).
    pub gate: Option<tokio::sync::Notify>,
    /// Envelopes seen, in call order.
    pub envelopes: Mutex<Vec<Envelope>>,
}

impl Handler<AccountEvent> for Recorder {
    async fn handle(
        &self,
        event: AccountEvent,
        envelope: &Envelope,
        tx: &Transaction<'_>,
    ) -> Result<(), HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.started.notify_one();
        self.envelopes.lock().unwrap().push(envelope.clone());
        tx.execute(
            "INSERT INTO effects (event_id, account, n) VALUES ($1, $2, $3)",
            &[&envelope.event_id, &event.account(), &event.n()],
        )
        .await?;
        if self.jitter {
            let ms = u64::from(envelope.event_id.as_bytes()[0]) % 40;
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        if let Some(gate) = &self.gate {
            gate.notified().await;
        }
        if envelope.receive_count == 1 && self.fail_first.is_some_and(|pick| pick(&event)) {
            return Err("injected failure on the first delivery".into());
        }
        Ok(())
    }
}

/// A consumer running on a task.
pub struct Running {
    pub stop: CancellationToken,
    pub task: JoinHandle<Result<(), outbox_sqs::Error>>,
    pub consumer: Consumer,
}

impl Running {
    pub fn start<H: Handler<AccountEvent>>(consumer: Consumer, handler: H) -> Running {
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (consumer, stop) = (consumer.clone(), stop.clone());
            async move { consumer.run::<AccountEvent, _>(stop, handler).await }
        });
        Running {
            stop,
            task,
            consumer,
        }
    }

    pub async fn stop(self) -> Consumer {
        self.stop.cancel();
        self.task
            .await
            .expect("the consumer task")
            .expect("the consumer returns cleanly");
        self.consumer
    }
}

/// Collects the deliveries an observer sees.
#[derive(Clone, Default)]
pub struct Seen(pub Arc<Mutex<Vec<Delivery>>>);

impl Seen {
    pub fn observer(&self) -> impl Fn(&Delivery) + Send + Sync + 'static {
        let seen = self.0.clone();
        move |d| seen.lock().unwrap().push(d.clone())
    }

    /// The highest receive count of the deliveries seen (0 when none).
    pub fn most_receive_count(&self) -> u32 {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|d| d.envelope.as_ref().map(|e| e.receive_count))
            .max()
            .unwrap_or(0)
    }

    pub fn left_in_queue(&self) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|d| d.left_in_queue)
            .count()
    }

    pub fn event_ids(&self) -> HashSet<Uuid> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|d| d.envelope.as_ref().map(|e| e.event_id))
            .collect()
    }
}

/// Sends a credit of `account` to `queue` directly, shaped as the relay would send it (body and
/// attributes); returns its event id.
pub async fn send_credit(queue: &TestQueue, account: &str, n: i64) -> Uuid {
    let attr = |v: &str| {
        aws_sdk_sqs::types::MessageAttributeValue::builder()
            .data_type("String")
            .string_value(v)
            .build()
            .unwrap()
    };
    let id = Uuid::now_v7();
    let body = serde_json::to_string(&AccountEvent::credited(account, n)).unwrap();
    queue
        .client()
        .send_message()
        .queue_url(queue.url())
        .message_body(body)
        .message_attributes("event_id", attr(&id.to_string()))
        .message_attributes("event_type", attr("account.credited"))
        .message_attributes("aggregate_type", attr("account"))
        .message_attributes("aggregate_id", attr(account))
        .send()
        .await
        .unwrap();
    id
}
