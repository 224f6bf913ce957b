//! The crate's one error type.

use std::borrow::Cow;
use std::fmt;

/// What went wrong, as a category a caller can match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A setting is invalid (reported by [`SqsPublisherBuilder::build`](crate::SqsPublisherBuilder::build)
    /// or [`SqsConfig::from_env`](crate::SqsConfig::from_env)).
    Config,
    /// No usable AWS credentials were found, or SQS refused them (invalid, expired, not allowed).
    Credentials,
    /// A configured queue does not exist.
    QueueNotFound,
    /// A configured SNS topic does not exist.
    TopicNotFound,
    /// The S3 bucket configured for offloading large payloads does not exist.
    BucketNotFound,
    /// SQS, SNS or S3 answered with an error (throttling, a server error, …).
    Service,
    /// SQS, SNS or S3 could not be reached (connection refused, DNS, TLS, I/O).
    Unavailable,
    /// A call did not finish within the configured call timeout.
    Timeout,
    /// A queue's or topic's circuit breaker is open (it recently failed as a whole): the call was
    /// not made.
    QueueUnavailable,
}

impl ErrorKind {
    /// Whether an operation that failed with this kind may succeed when tried again unchanged.
    ///
    /// Configuration, credentials and missing queues, topics or buckets need an operator; SQS,
    /// SNS and S3 errors, unreachability and time-outs are worth another try.
    pub fn is_retryable(self) -> bool {
        match self {
            ErrorKind::Config
            | ErrorKind::Credentials
            | ErrorKind::QueueNotFound
            | ErrorKind::TopicNotFound
            | ErrorKind::BucketNotFound => false,
            ErrorKind::Service
            | ErrorKind::Unavailable
            | ErrorKind::Timeout
            | ErrorKind::QueueUnavailable => true,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Config => "invalid configuration",
            ErrorKind::Credentials => "AWS credentials problem",
            ErrorKind::QueueNotFound => "SQS queue not found",
            ErrorKind::TopicNotFound => "SNS topic not found",
            ErrorKind::BucketNotFound => "S3 offload bucket not found",
            ErrorKind::Service => "AWS service error",
            ErrorKind::Unavailable => "AWS unreachable",
            ErrorKind::Timeout => "AWS call timed out",
            ErrorKind::QueueUnavailable => "destination unavailable",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl outbox_core::error::Kind for ErrorKind {
    fn is_retryable(self) -> bool {
        ErrorKind::is_retryable(self)
    }
}

/// The error of every fallible operation in this crate: the outbox's one error skeleton
/// ([`outbox_core::error::Error`]) with this crate's [`ErrorKind`] — a kind, a message, and the
/// underlying error as [`source`](std::error::Error::source) where there is one.
pub type Error = outbox_core::error::Error<ErrorKind>;

/// An [`ErrorKind::Config`] error.
pub(crate) fn config_error(message: impl Into<Cow<'static, str>>) -> Error {
    Error::new(ErrorKind::Config, message)
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A panic's message, when it is a string.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn display_has_kind_and_message_and_source_is_kept() {
        let e = Error::new(ErrorKind::QueueNotFound, "queue `q` does not exist")
            .with_source(std::io::Error::other("boom"));
        assert_eq!(
            e.to_string(),
            "SQS queue not found: queue `q` does not exist: boom"
        );
        assert_eq!(e.source().unwrap().to_string(), "boom");
        assert!(!e.is_retryable());
        assert!(ErrorKind::Timeout.is_retryable());
        let e = e.context("check");
        assert_eq!(
            e.to_string(),
            "SQS queue not found: check: queue `q` does not exist: boom"
        );
    }
}
