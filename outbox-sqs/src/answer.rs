//! The answer to a batch call, the same for SQS's `SendMessageBatch` and SNS's `PublishBatch`:
//! which entries were accepted and which failed, with the service's code.

use aws_sdk_sns::operation::publish_batch::PublishBatchOutput;
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchOutput;

/// One failed entry of a batch call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FailedEntry {
    /// The entry's `Id`.
    pub(crate) id: String,
    /// The service's error code.
    pub(crate) code: String,
    /// The service's message.
    pub(crate) message: Option<String>,
    /// Whether the service blames the sender.
    pub(crate) sender_fault: bool,
}

/// The per-entry results of a batch call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BatchAnswer {
    /// The `Id`s of the accepted entries.
    pub(crate) successful: Vec<String>,
    /// The failed entries.
    pub(crate) failed: Vec<FailedEntry>,
}

impl From<SendMessageBatchOutput> for BatchAnswer {
    fn from(output: SendMessageBatchOutput) -> Self {
        BatchAnswer {
            successful: output
                .successful()
                .iter()
                .map(|s| s.id().to_owned())
                .collect(),
            failed: output
                .failed()
                .iter()
                .map(|f| FailedEntry {
                    id: f.id().to_owned(),
                    code: f.code().to_owned(),
                    message: f.message().map(str::to_owned),
                    sender_fault: f.sender_fault(),
                })
                .collect(),
        }
    }
}

impl From<PublishBatchOutput> for BatchAnswer {
    fn from(output: PublishBatchOutput) -> Self {
        BatchAnswer {
            successful: output
                .successful()
                .iter()
                .filter_map(|s| s.id().map(str::to_owned))
                .collect(),
            failed: output
                .failed()
                .iter()
                .map(|f| FailedEntry {
                    id: f.id().to_owned(),
                    code: f.code().to_owned(),
                    message: f.message().map(str::to_owned),
                    sender_fault: f.sender_fault(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sns::types::{BatchResultErrorEntry, PublishBatchResultEntry};

    #[test]
    fn publish_batch_output_maps_entry_by_entry() {
        let output = PublishBatchOutput::builder()
            .successful(
                PublishBatchResultEntry::builder()
                    .id("0")
                    .message_id("m0")
                    .build(),
            )
            .successful(
                PublishBatchResultEntry::builder()
                    .id("2")
                    .message_id("m2")
                    .build(),
            )
            .failed(
                BatchResultErrorEntry::builder()
                    .id("1")
                    .code("InvalidParameter")
                    .message("Message too long")
                    .sender_fault(true)
                    .build()
                    .unwrap(),
            )
            .build();
        let answer = BatchAnswer::from(output);
        assert_eq!(answer.successful, vec!["0".to_owned(), "2".to_owned()]);
        assert_eq!(
            answer.failed,
            vec![FailedEntry {
                id: "1".into(),
                code: "InvalidParameter".into(),
                message: Some("Message too long".into()),
                sender_fault: true,
            }]
        );
    }

    /// A `PublishBatch` answer with one success, one permanent and one transient failure, and one
    /// entry it does not mention: each outcome lands on its own event, whatever the order of the
    /// answer's lists.
    #[test]
    fn partial_publish_batch_failures_map_to_the_right_events() {
        use std::collections::HashSet;

        use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome};

        use crate::message::prepare;
        use crate::publisher::Queue;
        use crate::settle::{Report, settle};

        let topic = Queue::topic_for_test();
        let events: Vec<ClaimedEvent> = (0..4)
            .map(|i| {
                ClaimedEvent::for_test(
                    uuid::Uuid::new_v4(),
                    i + 1,
                    "order",
                    &format!("o-{i}"),
                    "order.created",
                    format!("{{\"n\": {i}}}"),
                    "{}",
                    0,
                )
            })
            .collect();
        // Entries at positions 7..11 of the publish call: the `Id`s are "7" to "10".
        let entries: Vec<_> = events
            .iter()
            .enumerate()
            .map(|(i, e)| prepare(i + 7, e, &topic, None, true).unwrap())
            .collect();
        let output = PublishBatchOutput::builder()
            .failed(
                BatchResultErrorEntry::builder()
                    .id("10")
                    .code("InternalError")
                    .sender_fault(false)
                    .build()
                    .unwrap(),
            )
            .successful(PublishBatchResultEntry::builder().id("8").build())
            .failed(
                BatchResultErrorEntry::builder()
                    .id("7")
                    .code("InvalidParameter")
                    .message("Invalid parameter: Message")
                    .sender_fault(true)
                    .build()
                    .unwrap(),
            )
            .build();
        let mut report = Report::default();
        settle(
            &topic,
            Ok(BatchAnswer::from(output)),
            entries,
            &mut report,
            &mut HashSet::new(),
        );
        let mut outcomes = report.outcomes;
        outcomes.sort_by_key(|(i, _)| *i);
        let kinds: Vec<(usize, &str, Option<FailureKind>)> = outcomes
            .iter()
            .map(|(i, o)| {
                let variant = match o {
                    PublishOutcome::Published => "published",
                    PublishOutcome::Retry(_) => "retry",
                    PublishOutcome::Permanent(_) => "permanent",
                    PublishOutcome::Unavailable(_) => "unavailable",
                };
                (*i, variant, o.failure().map(|f| f.kind()))
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                (7, "permanent", Some(FailureKind::InvalidContent)),
                (8, "published", None),
                (9, "retry", Some(FailureKind::Other)),
                (10, "retry", Some(FailureKind::Broker)),
            ]
        );
        let reason = outcomes[0].1.error().unwrap();
        assert!(
            reason.starts_with("SNS rejected the message: InvalidParameter"),
            "{reason}"
        );
        assert!(
            outcomes[2]
                .1
                .error()
                .unwrap()
                .contains("SNS did not report")
        );
        // Entry failures of the message's own making leave the topic's breaker closed.
        assert!(!topic.breaker.is_open());
    }
}
