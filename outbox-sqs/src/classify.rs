//! The one place that decides whether an SQS failure is worth retrying.
//!
//! The rule: [`Class::Permanent`] only when the *message itself* is at fault (invalid content, too
//! large, a malformed request), because the relay dead-letters it at once. Everything else —
//! throttling, server errors, time-outs, connection failures, and set-up problems such as a missing
//! queue, missing permissions or a disabled KMS key — is [`Class::Retry`]: the message is fine and
//! will go through once the cause is fixed.

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};

/// Whether a failed message should be retried or dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// The failure is transient or caused by the set-up: try again later
    /// ([`PublishOutcome::Retry`](outbox_core::PublishOutcome::Retry)).
    Retry,
    /// The message can never be accepted: dead-letter it
    /// ([`PublishOutcome::Permanent`](outbox_core::PublishOutcome::Permanent)).
    Permanent,
}

/// Throttling and transient server codes (including those the AWS SDKs retry on).
const TRANSIENT_CODES: &[&str] = &[
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
    "PriorRequestNotComplete",
    "RequestTimeout",
    "RequestTimeoutException",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "Unavailable",
    "KmsThrottled",
    "KMS.ThrottlingException",
];

/// Codes that blame the set-up (queue, credentials, permissions, encryption key), not the message.
const SETUP_CODES: &[&str] = &[
    "QueueDoesNotExist",
    "NonExistentQueue",
    "QueueDeletedRecently",
    "InvalidAddress",
    "UnsupportedOperation",
    "AccessDenied",
    "AccessDeniedException",
    "InvalidSecurity",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "OptInRequired",
];

/// The code without the legacy `AWS.SimpleQueueService.` prefix of the query protocol.
fn normalize(code: &str) -> &str {
    code.strip_prefix("AWS.SimpleQueueService.").unwrap_or(code)
}

/// Whether `code` (as SQS reports it, with or without the `AWS.SimpleQueueService.` prefix) means
/// the queue does not exist.
pub(crate) fn is_queue_missing(code: &str) -> bool {
    matches!(normalize(code), "QueueDoesNotExist" | "NonExistentQueue")
}

/// Whether `code` means the credentials are missing, invalid, expired or not allowed.
pub(crate) fn is_auth_failure(code: &str) -> bool {
    let code = normalize(code);
    SETUP_CODES.contains(&code)
        && !is_queue_missing(code)
        && !matches!(
            code,
            "QueueDeletedRecently" | "InvalidAddress" | "UnsupportedOperation"
        )
}

/// Classifies an SQS error `code` — a failed entry of a `SendMessageBatch` response, or a failed
/// call — given whether SQS blames the sender (`SenderFault`; for a whole call, a 4xx status).
///
/// 1. Throttling and transient server codes → [`Class::Retry`], whatever the fault flag says.
/// 2. Set-up codes (missing queue, credentials, permissions, `KMS.*`/`Kms*` key problems) →
///    [`Class::Retry`]: the message is fine.
/// 3. Any other sender fault (`InvalidMessageContents`, `InvalidParameterValue`,
///    `MissingParameter`, `BatchRequestTooLong`, an unknown code, …) → [`Class::Permanent`].
/// 4. Any other server-side failure → [`Class::Retry`].
pub fn classify(code: &str, sender_fault: bool) -> Class {
    let code = normalize(code);
    if TRANSIENT_CODES.contains(&code) {
        return Class::Retry;
    }
    if SETUP_CODES.contains(&code) || code.starts_with("KMS.") || code.starts_with("Kms") {
        return Class::Retry;
    }
    if sender_fault {
        Class::Permanent
    } else {
        Class::Retry
    }
}

/// Classifies a failed SDK call.
///
/// An error response is classified by its HTTP status and code: 5xx → [`Class::Retry`]; otherwise
/// [`classify`]`(code, sender_fault = true)`. Every failure without an error response — time-out,
/// connection or credentials failure (dispatch), an unreadable response, a request that could not
/// be built — is [`Class::Retry`].
pub fn classify_sdk_error<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> Class {
    match err {
        SdkError::ServiceError(ctx) => {
            if ctx.raw().status().is_server_error() {
                Class::Retry
            } else {
                classify(ctx.err().code().unwrap_or(""), true)
            }
        }
        _ => Class::Retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sqs::error::ConnectorError;
    use aws_sdk_sqs::error::ErrorMetadata;
    use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchError;
    use aws_smithy_types::body::SdkBody;

    #[test]
    fn throttling_and_server_codes_retry_whatever_the_fault_flag() {
        for code in [
            "ThrottlingException",
            "RequestThrottled",
            "AWS.SimpleQueueService.RequestThrottled",
            "Throttling",
            "TooManyRequestsException",
            "RequestTimeout",
            "InternalError",
            "InternalFailure",
            "ServiceUnavailable",
            "KmsThrottled",
            "KMS.ThrottlingException",
        ] {
            assert_eq!(classify(code, true), Class::Retry, "{code} sender");
            assert_eq!(classify(code, false), Class::Retry, "{code} receiver");
        }
    }

    #[test]
    fn setup_codes_retry_because_the_message_is_fine() {
        for code in [
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
            "AWS.SimpleQueueService.QueueDeletedRecently",
            "InvalidAddress",
            "AWS.SimpleQueueService.UnsupportedOperation",
            "AccessDenied",
            "InvalidSecurity",
            "InvalidClientTokenId",
            "SignatureDoesNotMatch",
            "ExpiredToken",
            "KMS.DisabledException",
            "KMS.NotFoundException",
            "KmsAccessDenied",
        ] {
            assert_eq!(classify(code, true), Class::Retry, "{code}");
        }
    }

    #[test]
    fn content_errors_blamed_on_the_sender_are_permanent() {
        for code in [
            "InvalidMessageContents",
            "InvalidParameterValue",
            "MissingParameter",
            "MessageTooLong",
            "InvalidAttributeName",
            "InvalidAttributeValue",
            "AWS.SimpleQueueService.BatchRequestTooLong",
            "AWS.SimpleQueueService.InvalidBatchEntryId",
            "SomethingNew",
            "",
        ] {
            assert_eq!(classify(code, true), Class::Permanent, "{code}");
        }
    }

    #[test]
    fn unknown_server_side_failures_retry() {
        for code in ["SomethingNew", "InvalidParameterValue", ""] {
            assert_eq!(classify(code, false), Class::Retry, "{code}");
        }
    }

    #[test]
    fn helpers_recognise_missing_queues_and_auth_failures() {
        assert!(is_queue_missing("AWS.SimpleQueueService.NonExistentQueue"));
        assert!(is_queue_missing("QueueDoesNotExist"));
        assert!(!is_queue_missing("AccessDenied"));
        assert!(is_auth_failure("InvalidClientTokenId"));
        assert!(is_auth_failure("AccessDenied"));
        assert!(!is_auth_failure("QueueDoesNotExist"));
        assert!(!is_auth_failure("InvalidParameterValue"));
    }

    fn service_error(status: u16, code: &str) -> SdkError<SendMessageBatchError, HttpResponse> {
        let raw = HttpResponse::new(status.try_into().unwrap(), SdkBody::empty());
        let err = SendMessageBatchError::generic(ErrorMetadata::builder().code(code).build());
        SdkError::service_error(err, raw)
    }

    #[test]
    fn sdk_errors_by_status_code_and_variant() {
        assert_eq!(
            classify_sdk_error(&service_error(500, "InternalError")),
            Class::Retry
        );
        assert_eq!(
            classify_sdk_error(&service_error(503, "Whatever")),
            Class::Retry
        );
        assert_eq!(
            classify_sdk_error(&service_error(400, "RequestThrottled")),
            Class::Retry
        );
        assert_eq!(
            classify_sdk_error(&service_error(400, "ThrottlingException")),
            Class::Retry
        );
        assert_eq!(
            classify_sdk_error(&service_error(
                400,
                "AWS.SimpleQueueService.NonExistentQueue"
            )),
            Class::Retry
        );
        assert_eq!(
            classify_sdk_error(&service_error(403, "AccessDenied")),
            Class::Retry
        );
        assert_eq!(
            classify_sdk_error(&service_error(400, "InvalidParameterValue")),
            Class::Permanent
        );
        assert_eq!(
            classify_sdk_error(&service_error(
                400,
                "AWS.SimpleQueueService.BatchRequestTooLong"
            )),
            Class::Permanent
        );

        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let dispatch: SdkError<SendMessageBatchError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::io(io.into()));
        assert_eq!(classify_sdk_error(&dispatch), Class::Retry);
        let timeout: SdkError<SendMessageBatchError, HttpResponse> =
            SdkError::timeout_error("slow");
        assert_eq!(classify_sdk_error(&timeout), Class::Retry);
        let construction: SdkError<SendMessageBatchError, HttpResponse> =
            SdkError::construction_failure("bad input");
        assert_eq!(classify_sdk_error(&construction), Class::Retry);
        let response: SdkError<SendMessageBatchError, HttpResponse> = SdkError::response_error(
            "garbled",
            HttpResponse::new(200u16.try_into().unwrap(), SdkBody::empty()),
        );
        assert_eq!(classify_sdk_error(&response), Class::Retry);
    }
}
