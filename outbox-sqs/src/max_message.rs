//! The largest message a queue or topic takes: the service's limit until the destination's own
//! `MaximumMessageSize` is read, by the start-up check or by any later call that reads its
//! attributes (the probes of `destination_down.rs` and `idle_breakers.rs`). A queue silent at
//! start-up, found back by its probe, kept SQS's 1 MiB for the rest of the process: a message
//! over its own lower limit went to SQS, to be refused there, instead of being offloaded or
//! refused without a call.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::destination::DestinationKind;
use crate::message::SQS_LIMITS;
use crate::sns::{SNS_LIMITS, SNS_MAX_TOPIC_MESSAGE_BYTES};

/// The largest message of one destination, shared by its queue and its probe.
#[derive(Debug)]
pub(crate) struct MaxMessage {
    kind: DestinationKind,
    bytes: AtomicUsize,
}

impl MaxMessage {
    /// The service's limit for a destination of `kind`, until its own is read.
    pub(crate) fn new(kind: DestinationKind) -> Self {
        let limit = match kind {
            DestinationKind::Topic => SNS_LIMITS,
            _ => SQS_LIMITS,
        };
        MaxMessage {
            kind,
            bytes: AtomicUsize::new(limit.max_message_bytes()),
        }
    }

    /// The largest message, in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Takes a `MaximumMessageSize` attribute as the destination answered it (ignored when absent
    /// or not a number), within what the service lets the attribute be: for a queue 1 KiB to
    /// SQS's limit; for a topic 1 KiB to the 1 MiB SNS allows a topic to be raised to.
    pub(crate) fn take(&self, attribute: Option<&str>) {
        let Some(bytes) = attribute.and_then(|v| v.trim().parse::<usize>().ok()) else {
            return;
        };
        match self.kind {
            DestinationKind::Topic => self.bytes.store(
                bytes.clamp(1024, SNS_MAX_TOPIC_MESSAGE_BYTES),
                Ordering::Relaxed,
            ),
            _ => {
                // SQS's own bounds for the attribute: a server answering less (a stand-in's
                // `0`) would have every message refused (review).
                let bytes = bytes.clamp(1024, SQS_LIMITS.max_message_bytes());
                self.bytes.store(bytes, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queues_limit_is_its_own_never_above_sqss() {
        let q = MaxMessage::new(DestinationKind::Queue);
        assert_eq!(q.bytes(), SQS_LIMITS.max_message_bytes());
        q.take(Some("2048"));
        assert_eq!(q.bytes(), 2048);
        q.take(Some("4096"));
        assert_eq!(q.bytes(), 4096, "raised since: the queue's own, read again");
        q.take(Some("99999999"));
        assert_eq!(q.bytes(), SQS_LIMITS.max_message_bytes());
        q.take(Some("0"));
        assert_eq!(q.bytes(), 1024, "SQS's least");
        q.take(Some("99999999"));
        q.take(Some("nonsense"));
        q.take(None);
        assert_eq!(q.bytes(), SQS_LIMITS.max_message_bytes());
    }

    #[test]
    fn a_topics_limit_is_clamped_to_what_sns_allows() {
        let t = MaxMessage::new(DestinationKind::Topic);
        assert_eq!(t.bytes(), SNS_LIMITS.max_message_bytes());
        t.take(Some("10"));
        assert_eq!(t.bytes(), 1024);
        t.take(Some("99999999"));
        assert_eq!(t.bytes(), SNS_MAX_TOPIC_MESSAGE_BYTES);
    }
}
