//! Why a publisher could not publish an event: the reason a failed
//! [`PublishOutcome`](crate::PublishOutcome) carries.

use std::fmt;
use std::time::Duration;

/// What kind of failure a publisher reports for one event. The outcome's variant
/// ([`Retry`](crate::PublishOutcome::Retry), [`Permanent`](crate::PublishOutcome::Permanent),
/// [`Unavailable`](crate::PublishOutcome::Unavailable)) decides what the relay does; the kind says
/// why, for logs, metrics and callers that match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The broker throttled the request.
    Throttled,
    /// The broker failed on its side (a 5xx, an internal error).
    Broker,
    /// The call did not finish in time.
    Timeout,
    /// The broker could not be reached (connection, DNS, TLS).
    Unreachable,
    /// Credentials are missing or were refused.
    Credentials,
    /// The broker refuses the message's content (characters, attributes, format).
    InvalidContent,
    /// The message is larger than the broker accepts.
    TooLarge,
    /// No destination is configured for the event's type.
    NoRoute,
    /// The destination is unavailable as a whole: deleted, access denied, disabled.
    Destination,
    /// The event was not sent: the batch's deadline came first, or an earlier event of its
    /// aggregate failed in the same call.
    NotSent,
    /// The publisher is still preparing the event (an upload of its payload runs on): put back
    /// briefly, for the next claim to send it. Not an outage.
    InProgress,
    /// The publisher panicked while publishing the event.
    Panic,
    /// Any other failure.
    Other,
}

impl FailureKind {
    /// A short name, as logs and the `reason` label of metrics use it: `throttled`, `broker`,
    /// `timeout`, `unreachable`, `credentials`, `invalid_content`, `too_large`, `no_route`,
    /// `destination`, `not_sent`, `in_progress`, `panic`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Throttled => "throttled",
            FailureKind::Broker => "broker",
            FailureKind::Timeout => "timeout",
            FailureKind::Unreachable => "unreachable",
            FailureKind::Credentials => "credentials",
            FailureKind::InvalidContent => "invalid_content",
            FailureKind::TooLarge => "too_large",
            FailureKind::NoRoute => "no_route",
            FailureKind::Destination => "destination",
            FailureKind::NotSent => "not_sent",
            FailureKind::InProgress => "in_progress",
            FailureKind::Panic => "panic",
            FailureKind::Other => "other",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why one event was not published: a [`kind`](PublishFailure::kind) and the broker's or the
/// publisher's message (never the payload). Its `Display` is the message; the relay stores it as
/// the event's `last_error`.
///
/// ```
/// use outbox_core::{FailureKind, PublishFailure, PublishOutcome};
///
/// let outcome = PublishOutcome::permanent(FailureKind::TooLarge, "the message is 2 MiB");
/// let failure = outcome.failure().unwrap();
/// assert_eq!(failure.kind(), FailureKind::TooLarge);
/// assert_eq!(failure.to_string(), "the message is 2 MiB");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PublishFailure {
    kind: FailureKind,
    message: String,
    put_back: Option<Duration>,
}

impl PublishFailure {
    /// A failure of `kind` with `message`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        PublishFailure {
            kind,
            message: message.into(),
            put_back: None,
        }
    }

    /// This failure, for an [`Unavailable`](crate::PublishOutcome::Unavailable) outcome: put the
    /// event back for `delay` instead of
    /// [`UNAVAILABLE_RETRY_DELAY`](crate::UNAVAILABLE_RETRY_DELAY) (e.g. shorter, when the
    /// publisher expects to send it soon), within [`MIN_PUT_BACK`](crate::MIN_PUT_BACK) and
    /// [`MAX_PUT_BACK`](crate::MAX_PUT_BACK). The
    /// other outcomes ignore it: a counted attempt backs
    /// off by the relay's retry policy.
    ///
    /// ```
    /// use std::time::Duration;
    /// use outbox_core::{FailureKind, PublishFailure, PublishOutcome};
    ///
    /// let failure = PublishFailure::new(FailureKind::InProgress, "its payload is still uploading")
    ///     .with_put_back(Duration::from_secs(1));
    /// assert_eq!(failure.put_back(), Some(Duration::from_secs(1)));
    /// let outcome = PublishOutcome::Unavailable(failure);
    /// ```
    pub fn with_put_back(mut self, delay: Duration) -> Self {
        self.put_back = Some(delay);
        self
    }

    /// How long an event put back with this failure waits, when the publisher said (see
    /// [`with_put_back`](Self::with_put_back)).
    pub fn put_back(&self) -> Option<Duration> {
        self.put_back
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for PublishFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
