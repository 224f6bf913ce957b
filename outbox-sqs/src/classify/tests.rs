//! Tests of `classify`.

use super::*;
use aws_sdk_sqs::error::ConnectorError;
use aws_sdk_sqs::error::ErrorMetadata;
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchError;
use aws_smithy_types::body::SdkBody;

#[test]
fn failure_kinds_of_codes() {
    for (code, kind) in [
        ("ThrottlingException", FailureKind::Throttled),
        (
            "AWS.SimpleQueueService.RequestThrottled",
            FailureKind::Throttled,
        ),
        (
            "AWS.SimpleQueueService.NonExistentQueue",
            FailureKind::Destination,
        ),
        ("KMS.DisabledException", FailureKind::Destination),
        ("AccessDenied", FailureKind::Destination),
        ("ExpiredToken", FailureKind::Credentials),
        ("InternalError", FailureKind::Broker),
        ("BatchRequestTooLong", FailureKind::TooLarge),
        ("InvalidMessageContents", FailureKind::InvalidContent),
        ("InvalidParameterValue", FailureKind::InvalidContent),
        ("SomethingNew", FailureKind::Other),
    ] {
        assert_eq!(failure_kind(code), kind, "{code}");
    }
}

#[test]
fn throttling_of_a_queue_makes_it_unavailable_whatever_the_fault_flag() {
    for code in [
        "ThrottlingException",
        "RequestThrottled",
        "AWS.SimpleQueueService.RequestThrottled",
        "Throttling",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "KmsThrottled",
        "KMS.ThrottlingException",
    ] {
        assert_eq!(classify(code, true), Class::Unavailable, "{code} sender");
        assert_eq!(classify(code, false), Class::Unavailable, "{code} receiver");
    }
}

#[test]
fn transient_server_codes_retry_whatever_the_fault_flag() {
    for code in [
        "RequestTimeout",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "PriorRequestNotComplete",
    ] {
        assert_eq!(classify(code, true), Class::Retry, "{code} sender");
        assert_eq!(classify(code, false), Class::Retry, "{code} receiver");
    }
}

#[test]
fn a_missing_denied_or_unkeyed_queue_is_unavailable() {
    for code in [
        "QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
        "AWS.SimpleQueueService.QueueDeletedRecently",
        "InvalidAddress",
        "AWS.SimpleQueueService.UnsupportedOperation",
        "AccessDenied",
        "AccessDeniedException",
        "KMS.DisabledException",
        "KMS.NotFoundException",
        "KMS.InvalidStateException",
        "KMS.AccessDeniedException",
        "KmsAccessDenied",
    ] {
        assert_eq!(classify(code, true), Class::Unavailable, "{code} sender");
        assert_eq!(classify(code, false), Class::Unavailable, "{code} receiver");
    }
}

#[test]
fn sns_codes_classify_like_their_sqs_counterparts() {
    for code in [
        "NotFound",
        "AuthorizationError",
        "KMSDisabled",
        "KMSNotFound",
        "KMSAccessDenied",
        "KMSInvalidState",
        "KMSThrottling",
        "Throttled",
    ] {
        assert_eq!(classify(code, true), Class::Unavailable, "{code}");
    }
    assert_eq!(failure_kind("NotFound"), FailureKind::Destination);
    assert_eq!(failure_kind("KMSDisabled"), FailureKind::Destination);
    assert_eq!(failure_kind("Throttled"), FailureKind::Throttled);
    for code in [
        "InvalidParameter",
        "InvalidParameterValue",
        "BatchRequestTooLong",
    ] {
        assert_eq!(classify(code, true), Class::Permanent, "{code}");
    }
    assert_eq!(
        failure_kind("InvalidParameter"),
        FailureKind::InvalidContent
    );
    assert!(is_topic_missing("NotFound"));
    assert!(!is_topic_missing("QueueDoesNotExist"));
}

#[test]
fn account_wide_credential_failures_retry_because_every_queue_fails_alike() {
    for code in [
        "InvalidSecurity",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "ExpiredToken",
        "RequestExpired",
        "RequestTimeTooSkewed",
        "InvalidSignatureException",
        "OptInRequired",
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
    assert!(is_auth_failure("ExpiredToken"));
    assert!(is_auth_failure("AccessDenied"));
    assert!(!is_auth_failure("QueueDoesNotExist"));
    assert!(!is_auth_failure("InvalidParameterValue"));
    assert!(is_credentials_refused("ExpiredToken"));
    assert!(
        !is_credentials_refused("AccessDenied"),
        "one queue's policy"
    );
    assert!(!is_credentials_refused("KMS.AccessDeniedException"));
}

/// Whole-call codes in the JSON protocol's spelling (or from an endpoint that does not speak
/// SQS) blame the credentials or the endpoint, not the messages: they were taken as a
/// sender fault, each entry re-sent alone and dead-lettered.
#[test]
fn json_spellings_of_account_codes_retry() {
    for code in [
        "IncompleteSignatureException",
        "MissingAuthenticationTokenException",
        "NotAuthorized",
        "InvalidAction",
        "UnknownOperationException",
    ] {
        assert_eq!(classify(code, true), Class::Retry, "{code}");
        assert_eq!(classify_status(400, code), Class::Retry, "{code}");
    }
    // A KMS throttle is retried within the call (before, only the breaker saw it), in SQS's
    // and SNS's spellings.
    assert!(is_transient_code("KMS.ThrottlingException"));
    assert!(is_throttling("KMSThrottling"));
    assert_eq!(
        failure_kind("InvalidAction"),
        FailureKind::Other,
        "not credentials"
    );
    assert_eq!(
        classify("KMS.ThrottlingException", true),
        Class::Unavailable
    );
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
        Class::Unavailable
    );
    assert_eq!(
        classify_sdk_error(&service_error(400, "ThrottlingException")),
        Class::Unavailable
    );
    assert_eq!(
        classify_sdk_error(&service_error(
            400,
            "AWS.SimpleQueueService.NonExistentQueue"
        )),
        Class::Unavailable
    );
    assert_eq!(
        classify_sdk_error(&service_error(403, "AccessDenied")),
        Class::Unavailable
    );
    assert_eq!(
        classify_sdk_error(&service_error(400, "KMS.DisabledException")),
        Class::Unavailable
    );
    assert_eq!(
        classify_sdk_error(&service_error(403, "InvalidClientTokenId")),
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
    let timeout: SdkError<SendMessageBatchError, HttpResponse> = SdkError::timeout_error("slow");
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
