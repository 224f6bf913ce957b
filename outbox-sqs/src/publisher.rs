//! [`SqsPublisher`]: the relay's [`Publisher`] on `aws-sdk-sqs`.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchOutput;
use outbox_core::{ClaimedEvent, PublishOutcome, Publisher};
use tokio::sync::Semaphore;

use crate::batch::{Chain, plan};
use crate::breaker::{Admit, Breaker};
pub use crate::builder::SqsPublisherBuilder;
use crate::classify::{Class, classify, classify_sdk_error};
use crate::error::{Error, ErrorKind, Result};
use crate::message::{Prepared, prepare};
use crate::metrics::SqsMetrics;
use crate::routing::Router;
use crate::sdk_error::{sdk_error, timeout_error};

/// Publishes outbox events to Amazon SQS with `SendMessageBatch`. See the [crate docs](crate) for
/// the message shape, routing, batching and error handling.
///
/// Cheap to clone (the clones share the client and the in-flight limit).
#[derive(Clone)]
pub struct SqsPublisher {
    pub(crate) inner: Arc<Inner>,
}

/// What the clones of a publisher share (built by [`SqsPublisherBuilder::build`]).
pub(crate) struct Inner {
    pub(crate) client: Client,
    pub(crate) router: Router<Arc<Queue>>,
    /// Every distinct queue, in configuration order (the default last).
    pub(crate) queues: Vec<Arc<Queue>>,
    pub(crate) permits: Semaphore,
    pub(crate) max_in_flight: usize,
    /// [`SqsConfig::group_batches`](crate::SqsConfig::group_batches).
    pub(crate) group_batches: bool,
    pub(crate) call_timeout: Duration,
    pub(crate) metrics: SqsMetrics,
}

/// A queue whose circuit breaker is open (see [`SqsPublisher::unavailable_queues`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnavailableQueue {
    /// The queue's URL.
    pub url: String,
    /// How long since its first failure of this open period.
    pub unavailable_for: Duration,
    /// The last SQS error seen for it.
    pub last_error: String,
}

/// A configured queue and its circuit breaker.
#[derive(Debug)]
pub(crate) struct Queue {
    pub(crate) url: String,
    pub(crate) fifo: bool,
    pub(crate) breaker: Breaker,
}

impl fmt::Debug for SqsPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqsPublisher")
            .field("queues", &self.queue_urls())
            .field("max_in_flight", &self.inner.max_in_flight)
            .field("call_timeout", &self.inner.call_timeout)
            .finish_non_exhaustive()
    }
}

impl SqsPublisher {
    /// A builder with the [default settings](crate::SqsConfig::default).
    pub fn builder() -> SqsPublisherBuilder {
        SqsPublisherBuilder::default()
    }

    /// The URLs of every configured queue (routes first, the default queue last).
    pub fn queue_urls(&self) -> Vec<&str> {
        self.inner.queues.iter().map(|q| q.url.as_str()).collect()
    }

    /// The queues whose circuit breaker is open now: they failed as a whole — missing, access or
    /// key denied, throttled — and have not answered normally since.
    pub fn unavailable_queues(&self) -> Vec<UnavailableQueue> {
        self.inner
            .queues
            .iter()
            .filter_map(|q| {
                q.breaker
                    .broken_for()
                    .map(|(unavailable_for, last_error)| UnavailableQueue {
                        url: q.url.clone(),
                        unavailable_for,
                        last_error,
                    })
            })
            .collect()
    }

    /// The publisher's metrics in the Prometheus text format (OpenMetrics, ending in `# EOF`):
    /// `outbox_sqs_queue_unavailable{queue}`, 1 while the queue's circuit breaker is open, else 0.
    pub fn encode_metrics(&self) -> String {
        self.inner.metrics.encode()
    }

    /// The SQS client the publisher uses.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }
}

// ---- publishing -----------------------------------------------------------------------------------

/// A `SendMessageBatch` call that failed as a whole, or that the queue's open circuit breaker
/// refused.
struct CallFailure {
    class: Class,
    error: Error,
    /// The queue has been unavailable longer than the dead-letter limit.
    dead_letter: bool,
    /// Whether the call reached the network (`false`: refused by the breaker).
    called: bool,
}

/// What the calls of one chain did.
#[derive(Default)]
struct Report {
    outcomes: Vec<(usize, PublishOutcome)>,
    /// Calls tried, the breaker's refusals included.
    calls: usize,
    transient_failures: usize,
    /// Calls failed or refused because their queue is unavailable as a whole.
    unavailable_failures: usize,
    first_failure: Option<Error>,
}

impl Report {
    fn count(&mut self, result: &std::result::Result<SendMessageBatchOutput, CallFailure>) {
        self.calls += 1;
        if let Err(f) = result {
            match f.class {
                Class::Retry => self.transient_failures += 1,
                Class::Unavailable => self.unavailable_failures += 1,
                Class::Permanent => {}
            }
        }
    }

    fn merge(&mut self, other: Report) {
        self.outcomes.extend(other.outcomes);
        self.calls += other.calls;
        self.transient_failures += other.transient_failures;
        self.unavailable_failures += other.unavailable_failures;
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
    }
}

impl SqsPublisher {
    async fn publish_events(
        &self,
        events: &[ClaimedEvent],
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Vec<PublishOutcome>> {
        let mut outcomes: Vec<Option<PublishOutcome>> = vec![None; events.len()];

        // Route and build the messages, per queue, in `seq` order.
        let mut order: Vec<usize> = (0..events.len()).collect();
        order.sort_by_key(|&i| events[i].seq);
        let mut per_queue: Vec<(Arc<Queue>, Vec<Prepared>)> = Vec::new();
        for i in order {
            let event = &events[i];
            let Some(queue) = self.inner.router.route(&event.event_type) else {
                outcomes[i] = Some(PublishOutcome::Permanent(format!(
                    "no SQS route for event type `{}`",
                    event.event_type
                )));
                continue;
            };
            match prepare(i, event, queue.fifo) {
                Err(reason) => outcomes[i] = Some(PublishOutcome::Permanent(reason)),
                Ok(prepared) => match per_queue.iter_mut().find(|(q, _)| Arc::ptr_eq(q, queue)) {
                    Some((_, list)) => list.push(prepared),
                    None => per_queue.push((queue.clone(), vec![prepared])),
                },
            }
        }

        let chains = per_queue.into_iter().flat_map(|(queue, items)| {
            plan(items, queue.fifo)
                .into_iter()
                .map(move |chain| (queue.clone(), chain))
        });
        let reports = futures::future::join_all(
            chains.map(|(queue, chain)| self.run_chain(events, queue, chain, deadline)),
        )
        .await;
        let mut total = Report::default();
        for report in reports {
            total.merge(report);
        }

        // SQS down as a whole (every call failed transiently, bar those to unavailable queues): the
        // relay backs off without counting an attempt. Calls failed only by unavailable queues get
        // their `Unavailable` outcomes instead, so the healthy queues' events keep flowing.
        if total.transient_failures > 0
            && total.transient_failures + total.unavailable_failures == total.calls
        {
            let first = total.first_failure.unwrap_or_else(|| {
                Error::new(ErrorKind::Service, "every SendMessageBatch call failed")
            });
            let n = total.calls;
            tracing::warn!(calls = n, error = %first, "every SQS call of this publish failed");
            return Err(first.context(format!(
                "all {n} SendMessageBatch call(s) of this publish failed; the first"
            )));
        }
        for (i, outcome) in total.outcomes {
            outcomes[i] = Some(outcome);
        }
        Ok(outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    PublishOutcome::Retry("the SQS publisher lost track of this event".into())
                })
            })
            .collect())
    }

    /// Sends a chain's batches one after the other; on a FIFO queue, a message whose group had a
    /// failure earlier in the chain is not sent (so that it cannot overtake the failed one).
    ///
    /// A batch that could not be answered before `deadline` (a call timeout from now would pass
    /// it) is not sent: its events are put back without an attempt, and what was sent is kept.
    async fn run_chain(
        &self,
        events: &[ClaimedEvent],
        queue: Arc<Queue>,
        chain: Chain<Prepared>,
        deadline: Option<tokio::time::Instant>,
    ) -> Report {
        let mut report = Report::default();
        let mut failed_groups: HashSet<String> = HashSet::new();
        for batch in chain {
            // The in-flight limit, taken before the deadline check so that a batch waiting for a
            // slot is judged by when it would really be sent (and held for its re-sends).
            let _permit = self.inner.permits.acquire().await.ok();
            let late = deadline.is_some_and(|d| {
                tokio::time::Instant::now()
                    .checked_add(self.inner.call_timeout)
                    .is_none_or(|answered_by| answered_by > d)
            });
            if late {
                for p in batch {
                    report.outcomes.push((
                        p.index,
                        PublishOutcome::Unavailable(
                            "not sent: the relay's publish deadline would pass first".into(),
                        ),
                    ));
                }
                continue;
            }
            let mut send = Vec::with_capacity(batch.len());
            for p in batch {
                match &p.group {
                    Some(group) if failed_groups.contains(group) => {
                        report.outcomes.push((p.index, held_back(&queue, group)));
                    }
                    _ => send.push(p),
                }
            }
            if send.is_empty() {
                continue;
            }
            self.send_batch(events, &queue, send, &mut report, &mut failed_groups)
                .await;
        }
        report
    }

    /// Sends one batch and records an outcome per entry. A batch refused as a whole for its
    /// content is re-sent one entry per call (each rebuilt from its event: the first call took the
    /// entries), so that only the culprit is dead-lettered.
    async fn send_batch(
        &self,
        events: &[ClaimedEvent],
        queue: &Queue,
        mut entries: Vec<Prepared>,
        report: &mut Report,
        failed_groups: &mut HashSet<String>,
    ) {
        let result = self.call(queue, &mut entries).await;
        report.count(&result);
        match result {
            Err(failure) if failure.class == Class::Permanent && entries.len() > 1 => {
                tracing::warn!(
                    queue = %queue.url, entries = entries.len(), error = %failure.error,
                    "SQS refused a whole batch; sending its entries one by one"
                );
                for p in entries {
                    if let Some(group) = p.group.as_ref().filter(|g| failed_groups.contains(*g)) {
                        report.outcomes.push((p.index, held_back(queue, group)));
                        continue;
                    }
                    // Built before, so it builds again (same event, same queue).
                    let rebuilt = match events.get(p.index) {
                        Some(event) => prepare(p.index, event, queue.fifo),
                        None => Err("the SQS publisher lost track of this event".to_owned()),
                    };
                    let p = match rebuilt {
                        Ok(p) => p,
                        Err(reason) => {
                            report
                                .outcomes
                                .push((p.index, PublishOutcome::Permanent(reason)));
                            continue;
                        }
                    };
                    let mut single = vec![p];
                    let result = self.call(queue, &mut single).await;
                    report.count(&result);
                    settle(queue, result, single, report, failed_groups);
                }
            }
            result => settle(queue, result, entries, report, failed_groups),
        }
    }

    /// One `SendMessageBatch` call, within the call timeout (the caller holds an in-flight
    /// permit). Moves the entries into the request (no copy of the bodies).
    async fn call(
        &self,
        queue: &Queue,
        entries: &mut [Prepared],
    ) -> std::result::Result<SendMessageBatchOutput, CallFailure> {
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
        let request = self
            .inner
            .client
            .send_message_batch()
            .queue_url(&queue.url)
            .set_entries(Some(
                entries.iter_mut().filter_map(|p| p.entry.take()).collect(),
            ));
        let what = || format!("SendMessageBatch to queue `{}`", queue.url);
        match tokio::time::timeout(self.inner.call_timeout, request.send()).await {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(e)) => {
                let what = what();
                let class = classify_sdk_error(&e);
                let error = sdk_error(&what, e);
                let dead_letter =
                    class == Class::Unavailable && queue.breaker.failed(&error.to_string());
                Err(CallFailure {
                    class,
                    error,
                    dead_letter,
                    called: true,
                })
            }
            Err(_) => Err(CallFailure {
                class: Class::Retry,
                error: timeout_error(&what(), self.inner.call_timeout),
                dead_letter: false,
                called: true,
            }),
        }
    }
}

fn held_back(queue: &Queue, group: &str) -> PublishOutcome {
    let reason =
        format!("not sent: an earlier event of message group `{group}` failed in the same publish");
    // Held back because the queue broke: no attempt is counted for it either.
    if queue.breaker.is_open() {
        PublishOutcome::Unavailable(reason)
    } else {
        PublishOutcome::Retry(reason)
    }
}

/// The outcome of an event whose queue is unavailable as a whole: put back, or dead-lettered once
/// the queue has been broken longer than the limit.
fn unavailable(reason: String, dead_letter: bool) -> PublishOutcome {
    if dead_letter {
        PublishOutcome::Permanent(reason)
    } else {
        PublishOutcome::Unavailable(reason)
    }
}

/// Records the outcome of every entry of a call.
fn settle(
    queue: &Queue,
    result: std::result::Result<SendMessageBatchOutput, CallFailure>,
    entries: Vec<Prepared>,
    report: &mut Report,
    failed_groups: &mut HashSet<String>,
) {
    let mut record = |p: &Prepared, outcome: PublishOutcome| {
        if let Some(group) = &p.group {
            if outcome != PublishOutcome::Published {
                failed_groups.insert(group.clone());
            } else if failed_groups.contains(group) {
                // SQS failed an earlier entry of this group in the same call and accepted this one.
                tracing::error!(
                    queue = %queue.url, event_id = %p.event_id,
                    "SQS accepted a message after an earlier one of its group failed in the same \
                     batch: that group's order is broken"
                );
            }
        }
        report.outcomes.push((p.index, outcome));
    };
    match result {
        Ok(output) => {
            // Entry ids are the events' indexes in the `publish` call.
            let accepted: HashSet<usize> = output
                .successful()
                .iter()
                .filter_map(|s| s.id().parse().ok())
                .collect();
            let failed: HashMap<usize, _> = output
                .failed()
                .iter()
                .filter_map(|f| Some((f.id().parse().ok()?, f)))
                .collect();
            // An entry failed for its queue's sake (e.g. a KMS key) opens the breaker; any other
            // answer shows the queue working.
            let queue_failure = output
                .failed()
                .iter()
                .find(|f| classify(f.code(), f.sender_fault()) == Class::Unavailable);
            let dead_letter = match queue_failure {
                Some(f) => queue.breaker.failed(&format!(
                    "SendMessageBatch to queue `{}`: {}: {}",
                    queue.url,
                    f.code(),
                    f.message().unwrap_or("")
                )),
                None => {
                    queue.breaker.succeeded();
                    false
                }
            };
            for p in &entries {
                let id = p.index;
                let outcome = if accepted.contains(&id) {
                    PublishOutcome::Published
                } else if let Some(f) = failed.get(&id) {
                    let (code, message) = (f.code(), f.message().unwrap_or(""));
                    tracing::warn!(
                        queue = %queue.url, event_id = %p.event_id, code, sender_fault = f.sender_fault(),
                        message, "SQS failed a message"
                    );
                    match classify(code, f.sender_fault()) {
                        Class::Permanent => PublishOutcome::Permanent(format!(
                            "SQS rejected the message: {code}: {message}"
                        )),
                        Class::Retry => PublishOutcome::Retry(format!(
                            "SQS did not accept the message: {code}: {message}"
                        )),
                        Class::Unavailable => unavailable(
                            format!("SQS queue `{}` unavailable: {code}: {message}", queue.url),
                            dead_letter,
                        ),
                    }
                } else {
                    PublishOutcome::Retry("SQS did not report on this message".into())
                };
                record(p, outcome);
            }
        }
        Err(failure) => {
            // A refusal by the open breaker was logged when it opened.
            if failure.called {
                tracing::warn!(
                    queue = %queue.url, entries = entries.len(), error = %failure.error,
                    "SendMessageBatch failed"
                );
            }
            let reason = failure.error.to_string();
            for p in &entries {
                let outcome = match failure.class {
                    Class::Retry => PublishOutcome::Retry(reason.clone()),
                    Class::Permanent => PublishOutcome::Permanent(reason.clone()),
                    Class::Unavailable => unavailable(reason.clone(), failure.dead_letter),
                };
                record(p, outcome);
            }
            if failure.class == Class::Retry && report.first_failure.is_none() {
                report.first_failure = Some(failure.error);
            }
        }
    }
}

impl Publisher for SqsPublisher {
    type Error = Error;

    fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Error>> + Send {
        self.publish_events(events, None)
    }

    fn publish_within(
        &self,
        events: &[ClaimedEvent],
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Error>> + Send {
        self.publish_events(events, Some(deadline))
    }

    /// One call timeout per round of `SendMessageBatch` calls (10 entries each, `max_in_flight`
    /// at a time).
    fn min_publish_timeout(&self, events: usize) -> Duration {
        let calls = events.div_ceil(10).max(1);
        let rounds = calls.div_ceil(self.inner.max_in_flight.max(1));
        self.inner
            .call_timeout
            .saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX))
    }

    fn check(&self) -> impl Future<Output = Result<(), Error>> + Send {
        self.check_queues()
    }

    /// With [`group_batches`](crate::SqsConfig::group_batches) on and only FIFO queues: an
    /// aggregate's events share a message group, go out in `seq` order in one `SendMessageBatch`
    /// (or in batches sent one after the other), and once one fails, its group's later batches in
    /// the call are held back. The relay then publishes a whole batch in one call. Otherwise it
    /// publishes one wave per position in the aggregates.
    fn keeps_aggregate_order(&self) -> bool {
        self.inner.group_batches && self.inner.queues.iter().all(|q| q.fifo)
    }
}
