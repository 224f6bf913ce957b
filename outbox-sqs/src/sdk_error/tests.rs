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

/// One key variable set and the other empty or missing is said when credentials fail (an empty
/// `AWS_SECRET_ACCESS_KEY` failed with the chain's last word, "IMDS is disabled": black-box run);
/// both set, both missing or both empty says nothing (credentials may come from elsewhere).
#[test]
fn a_half_set_key_pair_is_named() {
    let hint = |pairs: &[(&str, &str)]| {
        key_variables_hint(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    };
    assert_eq!(
        hint(&[("AWS_ACCESS_KEY_ID", "AKIA"), ("AWS_SECRET_ACCESS_KEY", "")]).as_deref(),
        Some(
            "AWS_ACCESS_KEY_ID is set and AWS_SECRET_ACCESS_KEY is set but empty: the SDK skipped the pair"
        )
    );
    assert_eq!(
        hint(&[("AWS_SECRET_ACCESS_KEY", "s")]).as_deref(),
        Some(
            "AWS_SECRET_ACCESS_KEY is set and AWS_ACCESS_KEY_ID is not set: the SDK skipped the pair"
        )
    );
    assert_eq!(
        hint(&[
            ("AWS_ACCESS_KEY_ID", "AKIA"),
            ("AWS_SECRET_ACCESS_KEY", "s")
        ]),
        None
    );
    assert_eq!(hint(&[]), None);
    assert_eq!(
        hint(&[("AWS_ACCESS_KEY_ID", "AKIA"), ("SECRET_ACCESS_KEY", "s")]),
        None,
        "the SDK's other name for the secret"
    );
    assert_eq!(
        hint(&[("AWS_ACCESS_KEY_ID", ""), ("AWS_SECRET_ACCESS_KEY", " ")]),
        None
    );
}
