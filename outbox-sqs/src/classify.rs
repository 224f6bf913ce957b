//! The one place that decides what an SQS or SNS failure means for the events it hit. SNS topics
//! follow the same rules as queues, with SNS's codes (`NotFound`, `AuthorizationError`,
//! `KMS…`, `Throttled`, `InvalidParameter`) beside SQS's.
//!
//! The rule: [`Class::Permanent`] only when the *message itself* is at fault (invalid content, too
//! large, a malformed request), because the relay dead-letters it at once.
//! [`Class::Unavailable`] when the *queue* is broken as a whole — it does not exist (any more),
//! access to it or its encryption key is denied or disabled, it is throttled: its events are put
//! back for a short delay without counting an attempt, and the queue's circuit breaker opens (see
//! the [crate docs](crate#a-broken-queue-circuit-breaker)). Everything else — server errors,
//! time-outs, connection failures, and account-wide credential problems — is [`Class::Retry`]: the
//! message is fine and will go through once the cause is gone; when every call of a `publish` fails
//! that way the relay backs off as a whole (an SQS outage), which a circuit breaker per queue would
//! only turn into a dead-lettering clock for every queue at once.

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use outbox_core::FailureKind;

use crate::error::ErrorKind;

/// What a failed message or call means for its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// The failure is transient or account-wide: try again later
    /// ([`PublishOutcome::Retry`](outbox_core::PublishOutcome::Retry), or an `Err` from `publish`
    /// when every call failed so).
    Retry,
    /// The message can never be accepted: dead-letter it
    /// ([`PublishOutcome::Permanent`](outbox_core::PublishOutcome::Permanent)).
    Permanent,
    /// The queue is broken as a whole (missing, access or key denied, throttled): put its events
    /// back without counting an attempt
    /// ([`PublishOutcome::Unavailable`](outbox_core::PublishOutcome::Unavailable)) and open the
    /// queue's circuit breaker.
    Unavailable,
}

/// Throttling codes: the queue (or its key) is overloaded; backing off that queue is the cure.
const THROTTLING_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "SlowDown",
    "KmsThrottled",
    "KMS.ThrottlingException",
    // SNS's spelling of a throttled KMS key (`KMSThrottlingException` before).
    "KMSThrottling",
    "KMSThrottlingException",
    "Throttled",
];

/// Transient server codes (including those the AWS SDKs retry on).
const TRANSIENT_CODES: &[&str] = &[
    "PriorRequestNotComplete",
    "RequestTimeout",
    "RequestTimeoutException",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "Unavailable",
];

/// Codes that say one queue is broken: it does not exist, its address is wrong, or access to it is
/// denied. (`KMS.*` / `Kms*` codes — the queue's encryption key — are matched by prefix.)
const QUEUE_CODES: &[&str] = &[
    "QueueDoesNotExist",
    "NonExistentQueue",
    "QueueDeletedRecently",
    "InvalidAddress",
    "UnsupportedOperation",
    "AccessDenied",
    "AccessDeniedException",
    // SNS: the topic does not exist (any more), access to it is denied.
    "NotFound",
    "NotFoundException",
    "AuthorizationError",
    "AuthorizationErrorException",
];

/// Codes that blame the credentials or the account, the same for every queue: an outage of the
/// relay as a whole, not of one queue.
/// Each in its query-protocol spelling and, where the JSON protocol spells it differently, that
/// one too (an unknown code with a sender fault is taken to blame the message).
const ACCOUNT_CODES: &[&str] = &[
    "InvalidSecurity",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "IncompleteSignatureException",
    "MissingAuthenticationToken",
    "MissingAuthenticationTokenException",
    "NotAuthorized",
    "NotAuthorizedException",
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "RequestTimeTooSkewed",
    "InvalidSignatureException",
    "OptInRequired",
];

/// Codes by which the endpoint says it does not speak this API (a wrong `endpoint_url`, a proxy in
/// the way): nothing the message did, and nothing one queue did.
const ENDPOINT_CODES: &[&str] = &["InvalidAction", "UnknownOperationException"];

/// The code without the legacy `AWS.SimpleQueueService.` prefix of the query protocol.
pub(crate) fn normalize(code: &str) -> &str {
    code.strip_prefix("AWS.SimpleQueueService.").unwrap_or(code)
}

/// Whether `code` (as SQS reports it, with or without the `AWS.SimpleQueueService.` prefix) means
/// the queue does not exist.
pub(crate) fn is_queue_missing(code: &str) -> bool {
    matches!(normalize(code), "QueueDoesNotExist" | "NonExistentQueue")
}

/// Whether `code` (as SNS reports it) means the topic does not exist.
pub(crate) fn is_topic_missing(code: &str) -> bool {
    matches!(code, "NotFound" | "NotFoundException")
}

/// Whether `code` says the queue, topic or key throttled the call.
pub(crate) fn is_throttling(code: &str) -> bool {
    THROTTLING_CODES.contains(&normalize(code))
}

/// Whether `code` is worth another attempt of the same call at once (what the AWS SDKs' standard
/// retry mode retries): throttling and transient server codes.
pub(crate) fn is_transient_code(code: &str) -> bool {
    let code = normalize(code);
    THROTTLING_CODES.contains(&code) || TRANSIENT_CODES.contains(&code)
}

/// The code shown for an error answer that carries none (not SQS's answer, e.g. a proxy's).
pub(crate) const UNKNOWN_CODE: &str = "unknown error";

/// Classifies a call that failed as a whole with an error answer: HTTP `status` (5xx, or an
/// answer without an error code → [`Class::Retry`]) and `code` (otherwise
/// [`classify`]`(code, sender_fault = true)`).
pub(crate) fn classify_status(status: u16, code: &str) -> Class {
    if status >= 500 || code.is_empty() || code == UNKNOWN_CODE {
        // A server fault, or an answer without SQS's error code (e.g. a proxy's 403 page): no
        // proof that the entries are at fault, so nothing is dead-lettered for it.
        Class::Retry
    } else {
        classify(code, true)
    }
}

/// Whether `code` means the credentials are missing, invalid, expired or not allowed.
pub(crate) fn is_auth_failure(code: &str) -> bool {
    let code = normalize(code);
    ACCOUNT_CODES.contains(&code) || matches!(code, "AccessDenied" | "AccessDeniedException")
}

/// Whether `code` says the credentials themselves (or the request's time) were refused: worth
/// fetching them again. Not an access denied, which is one queue's policy or key more often than
/// the credentials, nor a wrong endpoint.
pub(crate) fn is_credentials_refused(code: &str) -> bool {
    ACCOUNT_CODES.contains(&normalize(code))
}

/// Classifies an SQS error `code` — a failed entry of a `SendMessageBatch` response, or a failed
/// call — given whether SQS blames the sender (`SenderFault`; for a whole call, a 4xx status).
///
/// 1. Throttling codes, missing-queue and access-denied codes, `KMS.*`/`Kms*` key problems →
///    [`Class::Unavailable`], whatever the fault flag says: the queue is broken, the message is
///    fine.
/// 2. Transient server codes and account-wide credential codes (invalid, expired, unsigned) →
///    [`Class::Retry`].
/// 3. Any other sender fault (`InvalidMessageContents`, `InvalidParameterValue`,
///    `MissingParameter`, `BatchRequestTooLong`, an unknown code, …) → [`Class::Permanent`].
/// 4. Any other server-side failure → [`Class::Retry`].
pub fn classify(code: &str, sender_fault: bool) -> Class {
    let code = normalize(code);
    if THROTTLING_CODES.contains(&code)
        || QUEUE_CODES.contains(&code)
        || code.starts_with("KMS")
        || code.starts_with("Kms")
    {
        return Class::Unavailable;
    }
    if TRANSIENT_CODES.contains(&code)
        || ACCOUNT_CODES.contains(&code)
        || ENDPOINT_CODES.contains(&code)
    {
        return Class::Retry;
    }
    if sender_fault {
        Class::Permanent
    } else {
        Class::Retry
    }
}

/// What kind of failure an SQS error `code` is, for the
/// [`PublishFailure`](outbox_core::PublishFailure) of the events it hit: throttling codes →
/// [`FailureKind::Throttled`], missing, denied or unkeyed queues → [`FailureKind::Destination`],
/// credential codes → [`FailureKind::Credentials`], transient server codes →
/// [`FailureKind::Broker`], `…TooLong` → [`FailureKind::TooLarge`], other invalid-content codes →
/// [`FailureKind::InvalidContent`], anything else → [`FailureKind::Other`].
pub fn failure_kind(code: &str) -> FailureKind {
    let code = normalize(code);
    if THROTTLING_CODES.contains(&code) {
        FailureKind::Throttled
    } else if QUEUE_CODES.contains(&code) || code.starts_with("KMS") || code.starts_with("Kms") {
        FailureKind::Destination
    } else if ACCOUNT_CODES.contains(&code) {
        FailureKind::Credentials
    } else if TRANSIENT_CODES.contains(&code) {
        FailureKind::Broker
    } else if ENDPOINT_CODES.contains(&code) {
        FailureKind::Other
    } else if code.ends_with("TooLong") {
        FailureKind::TooLarge
    } else if code.starts_with("Invalid") || code == "MissingParameter" {
        FailureKind::InvalidContent
    } else {
        FailureKind::Other
    }
}

/// The failure kind of a call that failed as a whole with this crate's error `kind`.
pub(crate) fn call_failure_kind(kind: ErrorKind) -> FailureKind {
    match kind {
        ErrorKind::Timeout => FailureKind::Timeout,
        ErrorKind::Unavailable => FailureKind::Unreachable,
        ErrorKind::Credentials => FailureKind::Credentials,
        ErrorKind::QueueNotFound | ErrorKind::TopicNotFound | ErrorKind::QueueUnavailable => {
            FailureKind::Destination
        }
        ErrorKind::BucketNotFound => FailureKind::Other,
        ErrorKind::Service => FailureKind::Broker,
        ErrorKind::Config => FailureKind::Other,
    }
}

/// Classifies a failed SDK call.
///
/// An error response is classified by its HTTP status and code: 5xx, or no error code (an answer
/// that is not SQS's, e.g. a proxy's 403 page) → [`Class::Retry`]; otherwise
/// [`classify`]`(code, sender_fault = true)`. Every failure without an error response — time-out,
/// connection or credentials failure (dispatch), an unreadable response, a request that could not
/// be built — is [`Class::Retry`]: SQS's endpoint is shared by every queue, so such failures are an
/// outage of SQS, not of one queue.
pub fn classify_sdk_error<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> Class {
    match err {
        SdkError::ServiceError(ctx) => {
            classify_status(ctx.raw().status().as_u16(), ctx.err().code().unwrap_or(""))
        }
        _ => Class::Retry,
    }
}

#[cfg(test)]
mod tests;
