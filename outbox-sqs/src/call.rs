//! One batch call to a destination: `SendMessageBatch` to a queue, `PublishBatch` to a topic.

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};

use crate::answer::BatchAnswer;
use crate::breaker::Admit;
use crate::classify::{Class, classify_sdk_error, classify_status, is_throttling};
use crate::destination::DestinationKind;
use crate::direct::DirectError;
use crate::error::{Error, ErrorKind};
use crate::message::{Entry, Prepared};
use crate::publisher::{Queue, SqsPublisher};
use crate::sdk_error::{sdk_error, service_failure, timeout_error};
use crate::settle::CallFailure;
use crate::signer::SignError;

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
                                _ => None,
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
            _ => match &self.inner.direct {
                Some(direct) => {
                    let entries = entries.iter().filter_map(|p| match &p.entry {
                        Entry::SqsJson(json) => Some(json.as_str()),
                        _ => None,
                    });
                    tokio::time::timeout(timeout, direct.send_message_batch(&queue.url, entries))
                        .await
                        .map(|r| r.map_err(|e| direct_failed(queue, &what, e)))
                }
                None => {
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
                                    _ => None,
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
            },
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
    let throttled = match &e {
        SdkError::ServiceError(ctx) => is_throttling(ctx.err().code().unwrap_or("")),
        _ => false,
    };
    whole_failure(queue, class, sdk_error(what, e), throttled)
}

/// A call that failed as a whole with `error` of `class`: counted by the destination's breaker
/// when the class says the destination is broken (`throttled`: by throttling).
fn whole_failure(queue: &Queue, class: Class, error: Error, throttled: bool) -> CallFailure {
    let dead_letter =
        class == Class::Unavailable && queue.breaker.failed(&error.to_string(), throttled);
    CallFailure {
        class,
        error,
        dead_letter,
        called: true,
    }
}

/// A direct call that failed as a whole: classified like an SDK failure (an error answer by its
/// status and code, no answer or no credentials as [`Class::Retry`]), and counted by the
/// destination's breaker when it says the destination is broken.
fn direct_failed(queue: &Queue, what: &str, e: DirectError) -> CallFailure {
    let throttled = matches!(&e, DirectError::Service { code, .. } if is_throttling(code));
    let (class, error) = direct_error(what, e);
    whole_failure(queue, class, error, throttled)
}

/// A direct call of `what` that failed as a whole, as this crate's error, and its class.
pub(crate) fn direct_error(what: &str, e: DirectError) -> (Class, Error) {
    let (class, kind, detail) = match &e {
        DirectError::Service {
            status,
            code,
            message,
        } => {
            let (kind, detail) = service_failure(code, message.as_deref().unwrap_or(""), *status);
            (classify_status(*status, code), kind, detail)
        }
        DirectError::Unreadable { .. } => (Class::Retry, ErrorKind::Service, e.to_string()),
        DirectError::Transport(_) => (Class::Retry, ErrorKind::Unavailable, e.to_string()),
        DirectError::Sign(SignError::Credentials(_)) => {
            (Class::Retry, ErrorKind::Credentials, e.to_string())
        }
        DirectError::Sign(_) => (Class::Retry, ErrorKind::Service, e.to_string()),
    };
    (
        class,
        Error::new(kind, format!("{what}: {detail}")).with_source(e),
    )
}
