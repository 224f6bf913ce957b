//! Changing how long received messages stay hidden: the retry back-off after a failure, releasing
//! messages at once, and the heartbeat that keeps a slow handler's messages hidden.

use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry;

use super::config::{ConsumerConfig, secs};
use super::metrics::ConsumerMetrics;

/// The retry delay after the `receive_count`-th delivery failed:
/// `retry_initial × 2^(receive_count − 1)`, at most `retry_max`.
pub(crate) fn retry_delay(config: &ConsumerConfig, receive_count: u32) -> Duration {
    let doublings = receive_count.saturating_sub(1).min(30);
    config
        .retry_initial
        .saturating_mul(1u32 << doublings)
        .min(config.retry_max)
}

/// Hides the messages of `receipts` for `hidden` from now (0: visible at once). Failures are
/// logged and counted; the message then reappears when its current time-out ends.
pub(crate) async fn change(
    client: &Client,
    queue_url: &str,
    metrics: &ConsumerMetrics,
    receipts: &[String],
    hidden: Duration,
) {
    for chunk in receipts.chunks(10) {
        let entries: Vec<_> = chunk
            .iter()
            .enumerate()
            .filter_map(|(i, handle)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(handle)
                    .visibility_timeout(secs(hidden, 0))
                    .build()
                    .ok()
            })
            .collect();
        let result = client
            .change_message_visibility_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await;
        match result {
            Ok(out) => {
                for failed in out.failed() {
                    metrics.on_failure("visibility");
                    tracing::warn!(
                        queue = %queue_url,
                        code = failed.code(),
                        message = failed.message().unwrap_or_default(),
                        "ChangeMessageVisibilityBatch failed an entry"
                    );
                }
            }
            Err(e) => {
                metrics.on_failure("visibility");
                tracing::warn!(
                    queue = %queue_url,
                    error = %outbox_core::error_chain(&e),
                    "ChangeMessageVisibilityBatch failed"
                );
            }
        }
    }
}

/// Every third of the visibility time-out, hides the messages still in `pending` for another
/// whole time-out. Runs until dropped.
pub(crate) async fn heartbeat(
    client: &Client,
    queue_url: &str,
    metrics: &ConsumerMetrics,
    visibility_timeout: Duration,
    pending: &Mutex<Vec<String>>,
) {
    let every = (visibility_timeout / 3).max(Duration::from_millis(300));
    loop {
        tokio::time::sleep(every).await;
        let receipts = match pending.lock() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        if !receipts.is_empty() {
            change(client, queue_url, metrics, &receipts, visibility_timeout).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_per_receive_up_to_the_maximum() {
        let mut c = ConsumerConfig::new("c");
        c.retry_initial = Duration::from_secs(1);
        c.retry_max = Duration::from_secs(60);
        let delays: Vec<u64> = (0..10).map(|n| retry_delay(&c, n).as_secs()).collect();
        assert_eq!(delays, [1, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(retry_delay(&c, u32::MAX), Duration::from_secs(60));
    }
}
