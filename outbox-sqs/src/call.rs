//! One batch call to a destination: `SendMessageBatch` to a queue, `PublishBatch` to a topic.

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use outbox_core::FailureKind;

use crate::answer::BatchAnswer;
use crate::breaker::Admit;
use crate::classify::{
    Class, call_failure_kind, classify_sdk_error, classify_status, is_throttling,
};
use crate::destination::DestinationKind;
use crate::destination_down::WATCH_MIN_TIMEOUT;
use crate::direct::DirectError;
use crate::down::Gate;
use crate::error::{Error, ErrorKind};
use crate::message::{Entry, Prepared};
use crate::publisher::{Queue, SqsPublisher};
use crate::sdk_error::{sdk_error, service_failure, timeout_error};
use crate::settle::CallFailure;
use crate::signer::SignError;
use crate::watch::{Looks, WATCH_AFTER, WATCH_PROBE, Watched};

/// A call's answer, or how it failed as a whole.
type Answer = Result<BatchAnswer, CallFailure>;

impl SqsPublisher {
    /// One batch call, within the call timeout (the caller holds an in-flight permit). Refused
    /// without a call while the destination is down, or while its circuit breaker is open (bar
    /// its probes); watched while it runs (see [`watched`](Self::watched)).
    pub(crate) async fn call(&self, queue: &Queue, entries: &[Prepared]) -> Answer {
        if let Gate::Wait(failure) = queue.down.gate() {
            // Put back for a few seconds, as a broken queue's events are, while other destinations
            // answer: counted as transient (a publish of its events alone failing as a whole, and
            // released at once) they came back at the head of every claim and starved the
            // others (review). With every destination down, an outage of the relay as a whole:
            // it backs off without writing each event back.
            let mut refused = down_failure(failure.kind(), failure.message(), false);
            if !self.inner.queues.iter().all(|q| q.down.is_down()) {
                refused.class = Class::Unavailable;
            }
            return Err(refused);
        }
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
                down: false,
            });
        }
        let what = format!("{} to {} `{}`", queue.operation(), queue.kind, queue.url);
        let request: Pin<Box<dyn Future<Output = Answer> + Send + '_>> = match queue.kind {
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
                let what = &what;
                Box::pin(async move {
                    request
                        .send()
                        .await
                        .map(BatchAnswer::from)
                        .map_err(|e| failed(queue, what, e))
                })
            }
            _ => match &self.inner.direct {
                Some(direct) => {
                    let entries = entries.iter().filter_map(|p| match &p.entry {
                        Entry::SqsJson(json) => Some(json.as_str()),
                        _ => None,
                    });
                    let what = &what;
                    Box::pin(async move {
                        direct
                            .send_message_batch(&queue.url, entries)
                            .await
                            .map_err(|e| direct_failed(queue, what, e))
                    })
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
                    let what = &what;
                    Box::pin(async move {
                        request
                            .send()
                            .await
                            .map(BatchAnswer::from)
                            .map_err(|e| failed(queue, what, e))
                    })
                }
            },
        };
        self.watched(queue, request, &what).await
    }

    /// Runs `request` within the call timeout, watching its destination (see `watch.rs`): a call
    /// unanswered after [`WATCH_AFTER`] (a third of a time-out under 3 s) is checked with a probe,
    /// and again as often while it runs; so is a call that timed out. When the destination answers
    /// neither, nor anything else for a while (or another call found it down meanwhile), it is
    /// down: later calls wait without calling until a probe of its own answers, and this one runs
    /// on to its time-out (it was sent: its answer, however late, tells what became of its
    /// events), its events then put back uncounted. While the destination answers, however
    /// slowly, the call goes on to its time-out.
    async fn watched(
        &self,
        queue: &Queue,
        request: Pin<Box<dyn Future<Output = Answer> + Send + '_>>,
        what: &str,
    ) -> Answer {
        let timeout = self.inner.call_timeout;
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = || {
            Err(CallFailure {
                class: Class::Retry,
                error: timeout_error(what, timeout),
                dead_letter: false,
                called: true,
                down: false,
            })
        };
        if timeout < WATCH_MIN_TIMEOUT {
            // Too short a time-out to watch: it ends the call soon enough.
            return match tokio::time::timeout(timeout, request).await {
                Ok(answer) => self.answered(queue, answer, started, deadline).await,
                Err(_) => timed_out(),
            };
        }
        // The watch and its probe fit within the time-out: a time-out under 3 s cut the probe
        // short, and the watch never found anything (review).
        let silent_after = queue.down.silent_after();
        let look = WATCH_AFTER.min(timeout / 3);
        let looks = Looks {
            first: look,
            every: look,
            silent: silent_after.min(timeout.saturating_sub(WATCH_AFTER)),
        };
        let ask = |probe: Duration| {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            async move {
                if left.is_zero() {
                    // A look at the deadline: the call's time-out ends it, counted as one; a probe
                    // given no time would take a destination nothing was heard from for down
                    // (review).
                    std::future::pending::<()>().await;
                }
                queue.down.answered(probe.min(left)).await
            }
        };
        let silent = |ran: Duration| {
            format!(
                "{what}: no answer within {} ms, nor to a probe, nor to anything for {} ms",
                ran.as_millis(),
                silent_after.as_millis()
            )
        };
        let mut request = request;
        let watch = queue.down.watch(&mut request, started, looks, ask, silent);
        let (kind, error) = match tokio::time::timeout_at(deadline, watch).await {
            Err(_) => return timed_out(),
            Ok(Watched::Done(answer)) => {
                return self.answered(queue, answer, started, deadline).await;
            }
            Ok(Watched::Found(failure)) => (failure.kind(), failure.message().to_owned()),
            Ok(Watched::Silent(error)) => (FailureKind::Timeout, error),
        };
        // The destination is down now (later calls wait without calling), but this call is not
        // given up: it was sent, and may be carried out however late its answer comes. It runs
        // to its time-out, its events' answer kept; only then is it a failure of a destination
        // down. (Given up, a queue that turned from fast to answering in 4-7 s had the calls it
        // carried out sent again: 15 duplicates, black-box run.)
        match tokio::time::timeout_at(deadline, request).await {
            // Timed out by the client itself, as by the deadline: still unanswered.
            Ok(Err(failure))
                if failure.class == Class::Retry
                    && call_failure_kind(failure.error.kind()) == FailureKind::Timeout =>
            {
                Err(down_failure(kind, &error, true))
            }
            Ok(answer) => self.answered(queue, answer, started, deadline).await,
            Err(_) => Err(down_failure(kind, &error, true)),
        }
    }

    /// `answer`, of a call started at `started`: one that timed out, or failed with a refused
    /// connection or a 5xx, is followed by a probe, within the call's `deadline`; when that is
    /// not answered either, and nothing worked for a while, the destination is down.
    async fn answered(
        &self,
        queue: &Queue,
        answer: Answer,
        started: Instant,
        deadline: tokio::time::Instant,
    ) -> Answer {
        let mut failure = match answer {
            Ok(answer) => {
                queue.down.up_after(started.elapsed());
                queue.call_pace.answered_in(started.elapsed());
                self.inner.last_answer.mark();
                return Ok(answer);
            }
            Err(failure) => failure,
        };
        let kind = call_failure_kind(failure.error.kind());
        // No answer (a time-out: the SDK's own, a connect time-out), or none that works: a
        // refused connection, a 5xx or an answer that is not the service's. One such failure
        // may come from one bad host, so the destination is down only when a probe right after
        // fails too and nothing worked for a while (below). Counted per event instead, a topic
        // failing with 500s for 30 s beside a working queue had its events charged up to 5
        // attempts each (black-box run; a 17-minute 5xx incident dead-letters them).
        let no_answer = matches!(
            kind,
            FailureKind::Timeout | FailureKind::Unreachable | FailureKind::Broker
        );
        // Within the call's time-out: the publish's deadline leaves a call no more.
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if failure.class == Class::Retry
            && no_answer
            && !left.is_zero()
            && !queue.down.recovered_since(started)
            // (Asked first: no probe while the destination worked lately.)
            && !queue.down.heard_within(queue.down.silent_after())
            && !queue.down.answered(WATCH_PROBE.min(left)).await
        {
            queue.down.down(started, kind, &failure.error.to_string());
            failure.down = true;
        }
        Err(failure)
    }
}

/// The failure of a call to a destination that is down: put back uncounted.
fn down_failure(kind: FailureKind, message: &str, called: bool) -> CallFailure {
    let error_kind = match kind {
        FailureKind::Timeout => ErrorKind::Timeout,
        FailureKind::Unreachable => ErrorKind::Unavailable,
        _ => ErrorKind::Service,
    };
    CallFailure {
        class: Class::Retry,
        error: Error::new(error_kind, message.to_owned()),
        dead_letter: false,
        called,
        down: true,
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
    if class == Class::Unavailable
        && matches!(
            error.kind(),
            ErrorKind::QueueNotFound | ErrorKind::TopicNotFound
        )
    {
        queue.breaker.missing();
    }
    CallFailure {
        class,
        error,
        dead_letter,
        called: true,
        down: false,
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
