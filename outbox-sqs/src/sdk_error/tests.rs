//! Tests of `sdk_error`.

use super::*;
use aws_sdk_sqs::error::ErrorMetadata;
use aws_sdk_sqs::operation::receive_message::ReceiveMessageError;
use aws_smithy_types::body::SdkBody;

/// A missing queue's error says so once, with the service's answer, and not the SDK's "service
/// error" after it (a black-box run read `… The specified queue does not exist.: service error`).
#[test]
fn a_service_answer_is_told_once() {
    let raw = HttpResponse::new(400.try_into().unwrap(), SdkBody::empty());
    let meta = ErrorMetadata::builder()
        .code("AWS.SimpleQueueService.NonExistentQueue")
        .message("The specified queue does not exist.")
        .build();
    let err = SdkError::service_error(ReceiveMessageError::generic(meta), raw);
    let e = sdk_error("ReceiveMessage from queue `q`", err);
    assert_eq!(e.kind(), ErrorKind::QueueNotFound);
    assert_eq!(
        e.to_string(),
        "SQS queue not found: ReceiveMessage from queue `q`: the queue does not exist: \
         AWS.SimpleQueueService.NonExistentQueue (HTTP 400): The specified queue does not exist."
    );
    // The chain as logged says it once too; the SDK's error is kept for `Debug`.
    assert_eq!(outbox_core::error_chain(&e), e.to_string());
    assert!(format!("{e:?}").contains("ServiceError"), "{e:?}");
}
