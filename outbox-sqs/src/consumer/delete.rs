//! Acknowledging handled messages: receipt handles are gathered into `DeleteMessageBatch` calls of
//! up to 10, sent as soon as a batch is full or a few milliseconds after its first handle.

use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use super::metrics::ConsumerMetrics;

/// The most entries SQS takes in one `DeleteMessageBatch`.
const MAX_ENTRIES: usize = 10;
/// How long a handle may wait for others to share its call.
const LINGER: Duration = Duration::from_millis(5);

/// The delete batcher: a task fed by [`delete`](Deleter::delete), flushed by
/// [`close`](Deleter::close).
pub(crate) struct Deleter {
    sender: mpsc::UnboundedSender<String>,
    task: JoinHandle<()>,
}

impl Deleter {
    /// Starts the batcher; each call may take at most `call_timeout`.
    pub(crate) fn start(
        client: Client,
        queue_url: String,
        metrics: ConsumerMetrics,
        call_timeout: Duration,
    ) -> Deleter {
        let (sender, receiver) = mpsc::unbounded_channel();
        let task = tokio::spawn(batch_loop(
            client,
            queue_url,
            metrics,
            call_timeout,
            receiver,
        ));
        Deleter { sender, task }
    }

    /// Deletes the message of `receipt_handle` (soon, in a batch).
    pub(crate) fn delete(&self, receipt_handle: String) {
        // The receiver lives until `close`; a send after it is impossible by construction.
        let _ = self.sender.send(receipt_handle);
    }

    /// Sends what is left and waits for every call to finish (each within the call time-out).
    pub(crate) async fn close(self) {
        drop(self.sender);
        let _ = self.task.await;
    }
}

async fn batch_loop(
    client: Client,
    queue_url: String,
    metrics: ConsumerMetrics,
    call_timeout: Duration,
    mut receiver: mpsc::UnboundedReceiver<String>,
) {
    let mut calls = JoinSet::new();
    while let Some(first) = receiver.recv().await {
        let mut handles = vec![first];
        let deadline = tokio::time::Instant::now() + LINGER;
        while handles.len() < MAX_ENTRIES {
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(handle)) => handles.push(handle),
                Ok(None) | Err(_) => break,
            }
        }
        calls.spawn(delete_batch(
            client.clone(),
            queue_url.clone(),
            metrics.clone(),
            call_timeout,
            handles,
        ));
        // Reap finished calls so the set does not grow.
        while calls.try_join_next().is_some() {}
    }
    while calls.join_next().await.is_some() {}
}

/// One `DeleteMessageBatch`. A failed delete (or one that does not answer within `call_timeout`)
/// is logged and counted: the message comes back after its visibility time-out and the inbox
/// recognises it as a duplicate.
async fn delete_batch(
    client: Client,
    queue_url: String,
    metrics: ConsumerMetrics,
    call_timeout: Duration,
    handles: Vec<String>,
) {
    let entries: Vec<DeleteMessageBatchRequestEntry> = handles
        .into_iter()
        .enumerate()
        .filter_map(|(i, handle)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(handle)
                .build()
                .ok()
        })
        .collect();
    let n = entries.len();
    let call = client
        .delete_message_batch()
        .queue_url(&queue_url)
        .set_entries(Some(entries))
        .send();
    let result = tokio::time::timeout(call_timeout, call)
        .await
        .map_err(|_| format!("no answer within {call_timeout:?}").into());
    match result
        .and_then(|r| r.map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>))
    {
        Ok(out) => {
            for failed in out.failed() {
                metrics.on_failure("delete");
                tracing::warn!(
                    queue = %queue_url,
                    code = failed.code(),
                    message = failed.message().unwrap_or_default(),
                    "DeleteMessageBatch failed an entry; the message will be delivered again \
                     and skipped as a duplicate"
                );
            }
        }
        Err(e) => {
            for _ in 0..n {
                metrics.on_failure("delete");
            }
            tracing::warn!(
                queue = %queue_url,
                error = %outbox_core::error_chain(&*e),
                // Unanswered, SQS may have deleted them all the same (a black-box run counted 2
                // redeliveries after this said 9).
                "DeleteMessageBatch failed; {n} messages may be delivered again (and skipped as \
                 duplicates)"
            );
        }
    }
}
