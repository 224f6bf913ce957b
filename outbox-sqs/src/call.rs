//! One batch call to a destination: `SendMessageBatch` to a queue, `PublishBatch` to a topic.

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};

use crate::answer::BatchAnswer;
use crate::breaker::Admit;
use crate::classify::{Class, classify_sdk_error};
use crate::destination::DestinationKind;
use crate::error::{Error, ErrorKind};
use crate::message::{Entry, Prepared};
use crate::publisher::{Queue, SqsPublisher};
use crate::sdk_error::{sdk_error, timeout_error};
use crate::settle::CallFailure;

impl SqsPublisher {
    /// One batch call, within the call timeout (the caller holds an in-flight permit). Refused
    /// without a call while the destination's circuit breaker is open (bar its probes).
    pub(crate) async fn call(
        &self,
        queue: &Queue,
        entries: &[Prepared],
    ) -> Result<BatchAnswer, CallFailure> {
        if let Admit::Refuse {
            reason,
            dead_letter,
        } = queue.breaker.admit()
        {
            return Err(CallFailure {
                class: Class::Unavailable,
                error: Error::new(ErrorKind::QueueUnavailable, reason),
                dead_letter,
                called: false,
            });
        }
        let what = format!("{} to {} `{}`", queue.operation(), queue.kind, queue.url);
        let timeout = self.inner.call_timeout;
        let answer = match queue.kind {
            DestinationKind::Topic => {
                let request = self
                    .inner
                    .sns
                    .publish_batch()
                    .topic_arn(&queue.url)
                    .set_publish_batch_request_entries(Some(
                        entries
                            .iter()
                            .filter_map(|p| match &p.entry {
                                Entry::Sns(e) => Some(e.clone()),
                                Entry::Sqs(_) => None,
                            })
                            .collect(),
                    ));
                tokio::time::timeout(timeout, request.send())
                    .await
                    .map(|r| {
                        r.map(BatchAnswer::from)
                            .map_err(|e| failed(queue, &what, e))
                    })
            }
            _ => {
                let request = self
                    .inner
                    .client
                    .send_message_batch()
                    .queue_url(&queue.url)
                    .set_entries(Some(
                        entries
                            .iter()
                            .filter_map(|p| match &p.entry {
                                Entry::Sqs(e) => Some(e.clone()),
                                Entry::Sns(_) => None,
                            })
                            .collect(),
                    ));
                tokio::time::timeout(timeout, request.send())
                    .await
                    .map(|r| {
                        r.map(BatchAnswer::from)
                            .map_err(|e| failed(queue, &what, e))
                    })
            }
        };
        answer.unwrap_or_else(|_| {
            Err(CallFailure {
                class: Class::Retry,
                error: timeout_error(&what, timeout),
                dead_letter: false,
                called: true,
            })
        })
    }
}

/// A call that failed as a whole: classified, and counted by the destination's breaker when it
/// says the destination is broken.
fn failed<E>(queue: &Queue, what: &str, e: SdkError<E, HttpResponse>) -> CallFailure
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let class = classify_sdk_error(&e);
    let error = sdk_error(what, e);
    let dead_letter = class == Class::Unavailable && queue.breaker.failed(&error.to_string());
    CallFailure {
        class,
        error,
        dead_letter,
        called: true,
    }
}
