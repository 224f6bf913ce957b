//! What the calls of a `publish` did: an outcome per entry, from SQS's or SNS's per-entry results or from
//! a call that failed as a whole, and the counts that tell an SQS outage from a broken queue.

use std::collections::HashSet;

use outbox_core::{FailureKind, PublishFailure, PublishOutcome};

use crate::answer::BatchAnswer;
use crate::classify::{Class, call_failure_kind, classify, failure_kind, is_throttling};
use crate::error::Error;
use crate::max_message::{limit_named_in, says_too_long};
use crate::message::Prepared;
use crate::publisher::Queue;

/// A `SendMessageBatch` call that failed as a whole, or that the queue's open circuit breaker
/// refused.
pub(crate) struct CallFailure {
    pub(crate) class: Class,
    pub(crate) error: Error,
    /// The queue has been unavailable longer than the dead-letter limit.
    pub(crate) dead_letter: bool,
    /// Whether the call reached the network (`false`: refused by the breaker, or while the
    /// destination is down).
    pub(crate) called: bool,
    /// The destination does not answer (see `destination_down.rs`): its events are put back
    /// uncounted; the call counts as transient, so that a publish whose calls all failed so is
    /// an outage of the relay as a whole.
    pub(crate) down: bool,
}

/// What the calls of one chain did.
#[derive(Default)]
pub(crate) struct Report {
    pub(crate) outcomes: Vec<(usize, PublishOutcome)>,
    /// Calls tried, the breaker's refusals included.
    pub(crate) calls: usize,
    pub(crate) transient_failures: usize,
    /// Calls failed or refused because their queue is unavailable as a whole.
    pub(crate) unavailable_failures: usize,
    pub(crate) first_failure: Option<Error>,
}

impl Report {
    pub(crate) fn count(&mut self, result: &std::result::Result<BatchAnswer, CallFailure>) {
        self.calls += 1;
        if let Err(f) = result {
            match f.class {
                Class::Retry => self.transient_failures += 1,
                Class::Unavailable => self.unavailable_failures += 1,
                Class::Permanent => {}
            }
        }
    }

    pub(crate) fn merge(&mut self, other: Report) {
        self.outcomes.extend(other.outcomes);
        self.calls += other.calls;
        self.transient_failures += other.transient_failures;
        self.unavailable_failures += other.unavailable_failures;
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
    }
}

/// The outcome of an event not sent because an earlier event of its message group failed in the
/// same publish: put back without an attempt counted (it was never tried), whatever the relay's
/// ordering and however the group's events map to aggregates.
pub(crate) fn held_back(group: &str) -> PublishOutcome {
    PublishOutcome::unavailable(
        FailureKind::NotSent,
        format!("not sent: an earlier event of message group `{group}` failed in the same publish"),
    )
}

/// The outcome of an event whose queue is unavailable as a whole: put back, or dead-lettered once
/// the queue has been broken longer than the limit.
fn unavailable(failure: PublishFailure, dead_letter: bool) -> PublishOutcome {
    if dead_letter {
        PublishOutcome::Permanent(failure)
    } else {
        PublishOutcome::Unavailable(failure)
    }
}

/// The outcome of an entry refused as too long, when the limit known for its destination may be
/// stale (lowered since it was read; black-box runs: every event between the new limit and the
/// offload threshold dead-lettered with the service's refusal, retrying did not help until a
/// restart); `None` for any other refusal.
fn too_long(queue: &Queue, size: usize, code: &str, message: &str) -> Option<PublishOutcome> {
    let service = queue.service();
    if let Some(limit) = queue.limit_lowered_by(message, size) {
        // The refusal names the limit, now taken: put back once, uncounted; the next attempt
        // offloads the event, or refuses it in the relay's own words.
        return Some(PublishOutcome::unavailable(
            FailureKind::TooLarge,
            format!(
                "{service} refused the message as longer than {limit} bytes, the {}'s limit now \
                 (its MaximumMessageSize, lowered since it was read): put back to be sent within it",
                queue.kind
            ),
        ));
    }
    if limit_named_in(message).is_some() || !says_too_long(message) {
        return None;
    }
    // Too long, the limit unsaid (SNS's words): read it again; the next attempt (counted: a
    // refusal for another cause ends as a dead letter) offloads the event or refuses it without a
    // call if it is over it.
    queue.read_limit_again_soon();
    Some(PublishOutcome::retry(
        FailureKind::TooLarge,
        format!(
            "{service} refused the message as too long: {code}: {message} (the {}'s limit is read \
             again for its next attempt)",
            queue.kind
        ),
    ))
}

/// Records the outcome of every entry of a call.
pub(crate) fn settle(
    queue: &Queue,
    result: std::result::Result<BatchAnswer, CallFailure>,
    entries: Vec<Prepared>,
    report: &mut Report,
    failed_groups: &mut HashSet<String>,
) {
    let mut record = |p: &Prepared, outcome: PublishOutcome| {
        if outcome != PublishOutcome::Published {
            if let Some(group) = &p.group {
                failed_groups.insert(group.clone());
            }
        }
        report.outcomes.push((p.index, outcome));
    };
    match result {
        Ok(output) => {
            // A call carries at most ten entries: scanning the answer's lists beats hashing them.
            let accepted = |id: &str| output.successful.iter().any(|s| s == id);
            let failed = |id: &str| output.failed.iter().find(|f| f.id == id);
            // An entry failed for its queue's sake (e.g. a KMS key) opens the breaker; any other
            // answer shows the queue working.
            let queue_failure = output
                .failed
                .iter()
                .find(|f| classify(&f.code, f.sender_fault) == Class::Unavailable);
            let dead_letter = match queue_failure {
                Some(f) => queue.breaker.failed(
                    &format!(
                        "{} to {} `{}`: {}: {}",
                        queue.operation(),
                        queue.kind,
                        queue.url,
                        f.code,
                        f.message.as_deref().unwrap_or("")
                    ),
                    is_throttling(&f.code),
                ),
                None => {
                    queue.breaker.succeeded();
                    false
                }
            };
            for p in &entries {
                let id = p.id();
                let outcome = if accepted(id) {
                    PublishOutcome::Published
                } else if let Some(f) = failed(id) {
                    let (code, message) = (f.code.as_str(), f.message.as_deref().unwrap_or(""));
                    let service = queue.service();
                    // The outcome carries code and message: the relay logs it (the first few
                    // of a batch; a dead letter; put-backs once a minute), the breaker its
                    // opening. A warning here too was one per entry and per probe.
                    tracing::debug!(
                        destination = %queue.url, kind = %queue.kind, event_id = %p.event_id, code,
                        sender_fault = f.sender_fault, message, "{service} failed a message"
                    );
                    let kind = failure_kind(code);
                    if let Some(outcome) = too_long(queue, p.size, code, message) {
                        outcome
                    } else {
                        match classify(code, f.sender_fault) {
                            Class::Permanent => PublishOutcome::permanent(
                                kind,
                                format!("{service} rejected the message: {code}: {message}"),
                            ),
                            Class::Retry => PublishOutcome::retry(
                                kind,
                                format!("{service} did not accept the message: {code}: {message}"),
                            ),
                            Class::Unavailable => unavailable(
                                PublishFailure::new(
                                    kind,
                                    format!(
                                        "{service} {} `{}` unavailable: {code}: {message}",
                                        queue.kind, queue.url
                                    ),
                                ),
                                dead_letter,
                            ),
                        }
                    }
                } else {
                    PublishOutcome::retry(
                        FailureKind::Other,
                        format!("{} did not report on this message", queue.service()),
                    )
                };
                record(p, outcome);
            }
        }
        Err(failure) => {
            // A refusal by the open breaker was logged when it opened. A transient failure is
            // logged by whoever gets the outcomes: the relay, per event when some calls of the
            // publish worked, once per outage when none did (a warning per call made hundreds a
            // minute while SQS was down). So is a destination unavailable (the breaker's opening
            // and closing, the relay's put-back lines once a minute): a warning per call was one
            // per probe of a deleted queue, every few seconds for as long as it was gone.
            if failure.called && failure.class != Class::Permanent {
                tracing::debug!(
                    destination = %queue.url, kind = %queue.kind, entries = entries.len(),
                    error = %failure.error, "{} failed", queue.operation()
                );
            } else if failure.called {
                tracing::warn!(
                    destination = %queue.url, kind = %queue.kind, entries = entries.len(),
                    error = %failure.error, "{} failed", queue.operation()
                );
            }
            let reason = PublishFailure::new(
                call_failure_kind(failure.error.kind()),
                failure.error.to_string(),
            );
            for p in &entries {
                let outcome = match failure.class {
                    Class::Retry if failure.down => PublishOutcome::Unavailable(reason.clone()),
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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use aws_sdk_sns::operation::publish_batch::PublishBatchOutput;
    use aws_sdk_sns::types::BatchResultErrorEntry;
    use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome};

    use super::{Report, settle};
    use crate::answer::BatchAnswer;
    use crate::message::prepare;
    use crate::publisher::Queue;

    /// What a topic's refusal of one 2 KB message with `message` makes of it.
    fn refused(topic: &Queue, message: &str) -> PublishOutcome {
        let event = ClaimedEvent::for_test(
            uuid::Uuid::new_v4(),
            1,
            "order",
            "o-1",
            "order.created",
            format!("\"{}\"", "x".repeat(2000)),
            "{}",
            0,
        );
        let entry = prepare(0, &event, topic, None, true).unwrap();
        let output = PublishBatchOutput::builder()
            .failed(
                BatchResultErrorEntry::builder()
                    .id("0")
                    .code("InvalidParameter")
                    .message(message)
                    .sender_fault(true)
                    .build()
                    .unwrap(),
            )
            .build();
        let mut report = Report::default();
        let answer = BatchAnswer::from(output);
        settle(
            topic,
            Ok(answer),
            vec![entry],
            &mut report,
            &mut HashSet::new(),
        );
        report.outcomes.remove(0).1
    }

    /// A topic lowered since its limit was read: SNS's refusal names the new limit (taken, the
    /// event put back uncounted) or not (SNS's usual words: the limit is read again and the
    /// attempt counts: black-box run, dead-lettered with SNS's refusal before); any other
    /// refusal is what it was.
    #[tokio::test]
    async fn a_refusal_as_too_long_takes_the_limit_or_has_it_read_again() {
        let topic = Queue::topic_for_test();
        match refused(&topic, "Invalid parameter: Message too long") {
            PublishOutcome::Retry(f) => {
                assert_eq!(f.kind(), FailureKind::TooLarge);
                assert!(
                    f.message().contains("the topic's limit is read again"),
                    "{f}"
                );
            }
            other => panic!("expected a counted retry, got {other:?}"),
        }
        assert_eq!(topic.limits().max_message_bytes(), 262_144, "until read");
        assert!(matches!(
            refused(&topic, "Invalid parameter: Subject"),
            PublishOutcome::Permanent(_)
        ));
        match refused(
            &topic,
            "Invalid parameter: Message too long. Message must be shorter than 1024 bytes.",
        ) {
            PublishOutcome::Unavailable(f) => assert_eq!(f.kind(), FailureKind::TooLarge),
            other => panic!("expected it put back uncounted, got {other:?}"),
        }
        assert_eq!(topic.limits().max_message_bytes(), 1024);
    }
}
