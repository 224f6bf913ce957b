//! The consumer: reads the order events from SQS and applies each one once, in order, to the read
//! model (`order_summaries`).
//!
//! Delivery is at-least-once: SQS may hand out a message again (a consumer that crashed between
//! its commit and its delete, a visibility time-out, a relay that published twice to a standard
//! queue). The consumer records each event id in the outbox's inbox
//! ([`outbox_core::process_once`]) in the same transaction as the effect, so a second delivery is
//! recognised and skipped. Each event also carries its order's version; the read model only moves
//! from one version to the next, which tells whether the events came in order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message};
use deadpool_postgres::{Pool, Transaction};
use orders_queries::client::Params;
use orders_queries::queries::summaries as sql;
use uuid::Uuid;

use crate::Error;
use crate::events::{
    ORDER_LINE_ADDED, ORDER_LINE_REMOVED, ORDER_PLACED, ORDER_SHIPPED, OrderLineEvent, OrderPlaced,
    OrderShipped,
};

/// The consumer's name in the inbox (`processed_events.consumer`).
pub const CONSUMER_NAME: &str = "order-summaries";

/// What the consumer did with one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// First delivery: the event was applied to the read model.
    Applied,
    /// The inbox had seen this event already: skipped.
    Duplicate,
    /// First delivery, but not the order's next version (an earlier event is late or missing): not
    /// applied. (A production consumer would park it and alert; the demo counts it.)
    OutOfOrder,
    /// An event type this consumer does not handle: acknowledged and ignored.
    Ignored,
    /// No `event_id` attribute, or a body that does not parse: acknowledged and dropped.
    Malformed,
}

/// One message received and handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The `event_id` attribute (`None` for a malformed message without one).
    pub event_id: Option<Uuid>,
    /// The `event_type` attribute.
    pub event_type: String,
    /// The `aggregate_id` attribute: the order's id.
    pub aggregate_id: String,
    /// What the consumer did.
    pub outcome: Outcome,
    /// When the message was received.
    pub received_at: Instant,
    /// Whether the consumer left the message in the queue on purpose (see
    /// [`Consumer::skip_delete_every`]), so SQS delivers it again.
    pub left_in_queue: bool,
}

/// Reads messages from one queue and applies them to the read model in `pool`'s database.
pub struct Consumer {
    sqs: Client,
    queue_url: String,
    pool: Pool,
    name: String,
    wait_seconds: i32,
    visibility_timeout_seconds: i32,
    skip_delete_every: u64,
    applied: AtomicU64,
}

impl Consumer {
    /// A consumer of `queue_url` applying events to the database of `pool`, registered in the inbox
    /// as [`CONSUMER_NAME`]. Long-polls for up to 1 s; a message is hidden from other receivers
    /// for 30 s while handled.
    pub fn new(sqs: Client, queue_url: impl Into<String>, pool: Pool) -> Self {
        Consumer {
            sqs,
            queue_url: queue_url.into(),
            pool,
            name: CONSUMER_NAME.to_owned(),
            wait_seconds: 1,
            visibility_timeout_seconds: 30,
            skip_delete_every: 0,
            applied: AtomicU64::new(0),
        }
    }

    /// How long one [`poll`](Self::poll) waits for messages (whole seconds, at most 20).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait_seconds = i32::try_from(wait.as_secs().min(20)).unwrap_or(20);
        self
    }

    /// Fault injection: every `n`th applied message is not deleted after its transaction committed
    /// — as if the consumer had crashed right there — and is made visible again at once, so SQS
    /// delivers it a second time and the inbox has to recognise it. 0 (the default) turns it off.
    pub fn skip_delete_every(mut self, n: u64) -> Self {
        self.skip_delete_every = n;
        self
    }

    /// Receives up to 10 messages (waiting up to the [wait](Self::wait) time), handles them in one
    /// transaction, commits, then deletes them from the queue. Returns what it did with each, in
    /// the order received; empty when no message came.
    ///
    /// On an error nothing is deleted: the messages come back after the visibility time-out, and
    /// whatever was committed is recognised by the inbox.
    pub async fn poll(&self) -> Result<Vec<Delivery>, Error> {
        let received = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(self.wait_seconds)
            .visibility_timeout(self.visibility_timeout_seconds)
            .message_attribute_names("All")
            .send()
            .await?;
        let messages = received.messages();
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let received_at = Instant::now();

        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let mut deliveries = Vec::with_capacity(messages.len());
        for message in messages {
            deliveries.push(self.handle(&tx, message, received_at).await?);
        }
        tx.commit().await?;

        // Acknowledge: delete what was handled (or leave some in the queue, when injecting faults).
        let mut entries = Vec::with_capacity(messages.len());
        let mut left = Vec::new();
        for (i, (message, delivery)) in messages.iter().zip(&mut deliveries).enumerate() {
            let Some(handle) = message.receipt_handle() else {
                continue;
            };
            if delivery.outcome == Outcome::Applied && self.skip_this_delete() {
                delivery.left_in_queue = true;
                left.push(handle.to_owned());
                continue;
            }
            entries.push(
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(handle)
                    .build()?,
            );
        }
        if !entries.is_empty() {
            // Entries SQS fails to delete come back later: the inbox recognises them then.
            self.sqs
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await?;
        }
        for handle in left {
            self.sqs
                .change_message_visibility()
                .queue_url(&self.queue_url)
                .receipt_handle(handle)
                .visibility_timeout(0)
                .send()
                .await?;
        }
        Ok(deliveries)
    }

    fn skip_this_delete(&self) -> bool {
        let n = self.skip_delete_every;
        n > 0 && self.applied.fetch_add(1, Ordering::Relaxed) % n == n - 1
    }

    /// Handles one message inside `tx`.
    async fn handle(
        &self,
        tx: &Transaction<'_>,
        message: &Message,
        received_at: Instant,
    ) -> Result<Delivery, Error> {
        let attribute = |name: &str| {
            message
                .message_attributes()
                .and_then(|a| a.get(name))
                .and_then(|v| v.string_value())
                .unwrap_or_default()
                .to_owned()
        };
        let event_type = attribute("event_type");
        let aggregate_id = attribute("aggregate_id");
        let event_id = Uuid::parse_str(&attribute("event_id")).ok();
        let mut delivery = Delivery {
            event_id,
            event_type,
            aggregate_id,
            outcome: Outcome::Malformed,
            received_at,
            left_in_queue: false,
        };
        let Some(event_id) = event_id else {
            return Ok(delivery);
        };
        if !outbox_core::process_once(tx, &self.name, event_id).await? {
            delivery.outcome = Outcome::Duplicate;
            return Ok(delivery);
        }
        delivery.outcome = apply(tx, &delivery.event_type, message.body().unwrap_or_default())
            .await?
            .unwrap_or(Outcome::Malformed);
        Ok(delivery)
    }
}

/// Applies one event to the read model; `None` when the body does not parse.
async fn apply(
    tx: &Transaction<'_>,
    event_type: &str,
    body: &str,
) -> Result<Option<Outcome>, Error> {
    let in_order = |row: Option<Uuid>| {
        Some(match row {
            Some(_) => Outcome::Applied,
            None => Outcome::OutOfOrder,
        })
    };
    match event_type {
        ORDER_PLACED => {
            let Ok(e) = serde_json::from_str::<OrderPlaced>(body) else {
                return Ok(None);
            };
            let line_count = i32::try_from(e.lines.len())?;
            let row = sql::insert_summary()
                .params(
                    tx,
                    &sql::InsertSummaryParams {
                        order_id: e.order_id,
                        customer: &e.customer,
                        line_count,
                        total_cents: e.total_cents,
                        version: e.version,
                    },
                )
                .opt()
                .await?;
            Ok(in_order(row))
        }
        ORDER_LINE_ADDED | ORDER_LINE_REMOVED => {
            let Ok(e) = serde_json::from_str::<OrderLineEvent>(body) else {
                return Ok(None);
            };
            let (order_id, version, line_delta, amount_cents) = match &e {
                OrderLineEvent::Added {
                    order_id,
                    version,
                    line,
                } => (*order_id, *version, 1, line.amount_cents()),
                OrderLineEvent::Removed {
                    order_id,
                    version,
                    line,
                } => (*order_id, *version, -1, -line.amount_cents()),
            };
            let row = sql::apply_line_change()
                .params(
                    tx,
                    &sql::ApplyLineChangeParams {
                        line_delta,
                        amount_cents,
                        version,
                        order_id,
                    },
                )
                .opt()
                .await?;
            Ok(in_order(row))
        }
        ORDER_SHIPPED => {
            let Ok(e) = serde_json::from_str::<OrderShipped>(body) else {
                return Ok(None);
            };
            let row = sql::apply_shipped()
                .bind(tx, &e.version, &e.order_id)
                .opt()
                .await?;
            Ok(in_order(row))
        }
        _ => Ok(Some(Outcome::Ignored)),
    }
}

/// Orders whose summary is missing or differs from the order: 0 once every event was applied
/// exactly once and in order.
pub async fn count_stale_summaries(pool: &Pool) -> Result<i64, Error> {
    let client = pool.get().await?;
    Ok(sql::count_stale_summaries().bind(&client).one().await?)
}

/// The read model's row for `order_id`, if any.
pub async fn find_summary(pool: &Pool, order_id: Uuid) -> Result<Option<sql::FindSummary>, Error> {
    let client = pool.get().await?;
    Ok(sql::find_summary().bind(&client, &order_id).opt().await?)
}
