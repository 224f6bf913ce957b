//! The largest message a queue or topic takes: the service's limit until the destination's own
//! `MaximumMessageSize` is read, by the start-up check or by any later call that reads its
//! attributes (the probes of `destination_down.rs` and `idle_breakers.rs`). A queue silent at
//! start-up, found back by its probe, kept SQS's 1 MiB for the rest of the process: a message
//! over its own lower limit went to SQS, to be refused there, instead of being offloaded or
//! refused without a call.
//!
//! A limit lower than the service's is read again before a message over it is refused, at most
//! every [`READ_AGAIN_AFTER`] (`limit_again.rs`): a queue raised from 1 KiB to 256 KiB still had
//! its retried dead letters refused at 1 KiB until the relay restarted (black-box run).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::destination::DestinationKind;
use crate::message::SQS_LIMITS;
use crate::sns::{SNS_LIMITS, SNS_MAX_TOPIC_MESSAGE_BYTES};

/// How long a destination's own limit, lower than its service's, is taken as read before a
/// message over it has it read again.
pub(crate) const READ_AGAIN_AFTER: Duration = Duration::from_secs(5);

/// The largest message of one destination, shared by its queue and its probe.
#[derive(Debug)]
pub(crate) struct MaxMessage {
    kind: DestinationKind,
    bytes: AtomicUsize,
    /// When the limit was last read, or a read of it began.
    read_at: Mutex<Option<Instant>>,
}

impl MaxMessage {
    /// The service's limit for a destination of `kind`, until its own is read.
    pub(crate) fn new(kind: DestinationKind) -> Self {
        let max = MaxMessage {
            kind,
            bytes: AtomicUsize::new(0),
            read_at: Mutex::new(None),
        };
        max.bytes.store(max.default_bytes(), Ordering::Relaxed);
        max
    }

    /// Whether the limit is the destination's own, not its service's default.
    pub(crate) fn is_own(&self) -> bool {
        self.bytes() != self.default_bytes()
    }

    /// The service's default for a destination of this kind.
    fn default_bytes(&self) -> usize {
        match self.kind {
            DestinationKind::Topic => SNS_LIMITS.max_message_bytes(),
            _ => SQS_LIMITS.max_message_bytes(),
        }
    }

    /// Whether the limit is below the most the destination could be set to take: a message over
    /// it may fit once the limit is read again.
    pub(crate) fn lowered(&self) -> bool {
        self.bytes() < self.service_max()
    }

    /// The most a destination of this kind can be set to take.
    fn service_max(&self) -> usize {
        match self.kind {
            DestinationKind::Topic => SNS_MAX_TOPIC_MESSAGE_BYTES,
            _ => SQS_LIMITS.max_message_bytes(),
        }
    }

    /// Whether a message of `size` bytes, over the destination's own lower limit, is worth
    /// reading the limit again for (the last read began [`READ_AGAIN_AFTER`] ago or more, or
    /// never was); if so, the read is taken as begun now, so that one caller reads it.
    pub(crate) fn read_again_for(&self, size: usize) -> bool {
        if size <= self.bytes() || !self.lowered() {
            return false;
        }
        let mut read_at = self.read_at.lock().unwrap_or_else(PoisonError::into_inner);
        if read_at.is_some_and(|at| at.elapsed() < READ_AGAIN_AFTER) {
            return false;
        }
        *read_at = Some(Instant::now());
        true
    }

    /// Takes `bytes`, the limit a destination's refusal named, when it is lower than the one
    /// known (the attribute lowered since it was read); whether it was.
    pub(crate) fn lowered_to(&self, bytes: usize) -> bool {
        let before = self.bytes();
        if bytes >= before {
            return false;
        }
        self.take(Some(&bytes.to_string()));
        self.bytes() < before
    }

    /// Whether the limit is worth reading again now, whatever it is (a refusal of a message as
    /// too long that names no limit): at most every [`READ_AGAIN_AFTER`]; if so, the read is taken
    /// as begun now.
    pub(crate) fn read_again_now(&self) -> bool {
        let mut read_at = self.read_at.lock().unwrap_or_else(PoisonError::into_inner);
        if read_at.is_some_and(|at| at.elapsed() < READ_AGAIN_AFTER) {
            return false;
        }
        *read_at = Some(Instant::now());
        true
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
        *self.read_at.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
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

/// Whether a refusal says the message is too long ("Invalid parameter: Message too long", as SNS
/// words it, with or without the limit).
pub(crate) fn says_too_long(refusal: &str) -> bool {
    refusal.to_ascii_lowercase().contains("too long") || limit_named_in(refusal).is_some()
}

/// The limit a refusal of a message as too long names, in SQS's and SNS's words ("… Message must
/// be shorter than 262144 bytes.").
pub(crate) fn limit_named_in(refusal: &str) -> Option<usize> {
    let rest = refusal.split("shorter than ").nth(1)?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if !rest[digits..].starts_with(" bytes") {
        return None;
    }
    rest[..digits].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_limit_and_a_lower_one_is_taken() {
        assert_eq!(
            limit_named_in(
                "One or more parameters are invalid. Reason: Message must be shorter than 2048 bytes."
            ),
            Some(2048)
        );
        assert_eq!(
            limit_named_in(
                "Invalid parameter: Message too long. Message must be shorter than 262144 bytes."
            ),
            Some(262_144)
        );
        for other in [
            "Message too long",
            "shorter than bytes",
            "shorter than 12 kB",
            "",
        ] {
            assert_eq!(limit_named_in(other), None, "{other}");
        }
        assert!(says_too_long("Invalid parameter: Message too long"));
        assert!(says_too_long(
            "Reason: Message must be shorter than 2048 bytes."
        ));
        assert!(!says_too_long("Invalid parameter: Subject"));
        let q = MaxMessage::new(DestinationKind::Queue);
        assert!(q.lowered_to(2048));
        assert_eq!(q.bytes(), 2048);
        assert!(!q.lowered_to(2048), "known already: no second put-back");
        assert!(!q.lowered_to(4096), "a higher one is read, not guessed");
        assert!(q.lowered_to(10), "within SQS's bounds");
        assert_eq!(q.bytes(), 1024);
        assert!(!q.lowered_to(10));
    }

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
    fn a_lower_limit_is_read_again_for_a_larger_message_at_most_every_few_seconds() {
        let q = MaxMessage::new(DestinationKind::Queue);
        assert!(
            !q.read_again_for(300_000),
            "SQS's own limit: nothing to read"
        );
        q.take(Some("1024"));
        assert!(!q.read_again_for(1024), "within the limit");
        assert!(!q.read_again_for(2048), "just read");
        *q.read_at.lock().unwrap() = Some(Instant::now() - READ_AGAIN_AFTER);
        assert!(q.read_again_for(2048));
        assert!(!q.read_again_for(2048), "one caller reads it");
        let t = MaxMessage::new(DestinationKind::Topic);
        assert!(
            t.read_again_for(300_000),
            "a topic may be raised past SNS's default"
        );
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
