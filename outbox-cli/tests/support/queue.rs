//! Reading a queue to the end.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::history::Delivery;

/// Reads every message of `queue` (receive 10, delete them in one batch call) until `expected`
/// distinct event ids arrived, the queue stays empty for `quiet`, or `timeout` passes. Returns the
/// deliveries in receive order.
pub async fn drain_queue(
    client: &aws_sdk_sqs::Client,
    queue_url: &str,
    expected: usize,
    quiet: Duration,
    timeout: Duration,
) -> Vec<Delivery> {
    use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
    let start = Instant::now();
    let mut last_message = Instant::now();
    let mut out = Vec::new();
    let mut distinct = HashSet::new();
    while start.elapsed() < timeout {
        let resp = client
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .message_attribute_names("All")
            .send()
            .await
            .expect("ReceiveMessage");
        let messages = resp.messages();
        if messages.is_empty() {
            if distinct.len() >= expected && last_message.elapsed() >= quiet {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        last_message = Instant::now();
        let mut entries = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let id = m
                .message_attributes()
                .and_then(|a| a.get("event_id"))
                .and_then(|v| v.string_value())
                .expect("event_id attribute")
                .to_string();
            distinct.insert(id.clone());
            out.push(Delivery::from_message(&id, m.body().unwrap_or_default()));
            entries.push(
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap())
                    .build()
                    .unwrap(),
            );
        }
        client
            .delete_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("DeleteMessageBatch");
    }
    out
}
