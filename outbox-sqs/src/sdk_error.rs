//! SDK failures turned into this crate's [`Error`], with a kind and a readable message.

use std::error::Error as StdError;
use std::time::Duration;

use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};

use crate::classify::{is_auth_failure, is_queue_missing, is_topic_missing};
use crate::error::{Error, ErrorKind};

pub(crate) fn timeout_error(what: &str, timeout: Duration) -> Error {
    Error::new(
        ErrorKind::Timeout,
        format!("{what}: no answer within {} ms", timeout.as_millis()),
    )
}

fn has_credentials_error(err: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if e.downcast_ref::<CredentialsError>().is_some() {
            return true;
        }
        next = e.source();
    }
    false
}

/// "No usable AWS credentials", the provider chain's `detail`, and what the key variables say, if
/// they explain it.
pub(crate) fn no_credentials(detail: &str) -> String {
    let mut text = format!("no usable AWS credentials: {detail}");
    if let Some(hint) = key_variables_hint(|name| std::env::var(name).ok()) {
        text.push_str(" (");
        text.push_str(&hint);
        text.push(')');
    }
    text
}

/// Why the credentials in the key variables were not used, when that is the likely cause: one of
/// `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` set and the other empty or missing. The SDK then
/// skips both and looks further along its chain, and its error names only the last place it
/// looked (black-box run: an empty `AWS_SECRET_ACCESS_KEY` failed with "IMDS is disabled").
/// Both missing or both empty is no hint: credentials may well come from elsewhere.
fn key_variables_hint(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    const KEY: &str = "AWS_ACCESS_KEY_ID";
    const SECRET: &str = "AWS_SECRET_ACCESS_KEY";
    let state = |name| match var(name) {
        None => "not set",
        Some(v) if v.trim().is_empty() => "set but empty",
        Some(_) => "set",
    };
    // The SDK takes the secret from `SECRET_ACCESS_KEY` too when this one is blank.
    let secret = match (state(SECRET), state("SECRET_ACCESS_KEY")) {
        (_, "set") => "set",
        (secret, _) => secret,
    };
    match (state(KEY), secret) {
        ("set", "set") => None,
        ("set", other) => Some(format!(
            "{KEY} is set and {SECRET} is {other}: the SDK skipped the pair"
        )),
        (other, "set") => Some(format!(
            "{SECRET} is set and {KEY} is {other}: the SDK skipped the pair"
        )),
        _ => None,
    }
}

/// The kind and description of an error answer from SQS or SNS: its `code`, `message` and HTTP
/// `status`, for either transport.
pub(crate) fn service_failure(code: &str, message: &str, status: u16) -> (ErrorKind, String) {
    let kind = if is_queue_missing(code) {
        ErrorKind::QueueNotFound
    } else if is_topic_missing(code) {
        ErrorKind::TopicNotFound
    } else if is_auth_failure(code) {
        ErrorKind::Credentials
    } else {
        ErrorKind::Service
    };
    // Never the signed request a signature error quotes (it names the session token): this text
    // is logged and stored with the events as their last error. The direct transport's error, the
    // source, reads the same `{code} (HTTP {status}): {message}`, so a chain shows it once.
    let answer = answer_text(code, message, status);
    let detail = if is_queue_missing(code) {
        format!("the queue does not exist: {answer}")
    } else if is_topic_missing(code) {
        format!("the topic does not exist: {answer}")
    } else {
        answer
    };
    (kind, detail)
}

/// A service's error answer as told in messages: `{code} (HTTP {status}): {message}`, with any
/// signed request the message quotes redacted.
fn answer_text(code: &str, message: &str, status: u16) -> String {
    let message = outbox_core::redact_signed_request(message);
    format!("{code} (HTTP {status}): {message}")
}

/// An SDK failure of `what` (e.g. "SendMessageBatch to queue `…`") as this crate's error.
pub(crate) fn sdk_error<E>(what: &str, err: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let (kind, detail) = match &err {
        SdkError::ServiceError(ctx) => {
            let (code, status) = (
                ctx.err().code().unwrap_or(crate::classify::UNKNOWN_CODE),
                ctx.raw().status().as_u16(),
            );
            let message = ctx.err().message().unwrap_or("");
            let (kind, detail) = service_failure(code, message, status);
            // The SDK's own words for it are "service error": the source reads as the answer
            // the message quotes instead, so that a chain shows it once.
            let answer = Answer {
                text: answer_text(code, message, status),
                error: Box::new(err),
            };
            return Error::new(kind, format!("{what}: {detail}")).with_source(answer);
        }
        SdkError::TimeoutError(_) => (ErrorKind::Timeout, outbox_core::error_chain(&err)),
        SdkError::DispatchFailure(_) if has_credentials_error(&err) => (
            ErrorKind::Credentials,
            no_credentials(&outbox_core::error_chain(&err)),
        ),
        SdkError::DispatchFailure(_) => (
            ErrorKind::Unavailable,
            format!("cannot reach AWS: {}", outbox_core::error_chain(&err)),
        ),
        _ => (ErrorKind::Service, outbox_core::error_chain(&err)),
    };
    Error::new(kind, format!("{what}: {detail}")).with_source(err)
}

/// A service's error answer as the source of an [`Error`]: displayed as the answer, the end of
/// the chain (the SDK's error says "service error", and its own source repeats the answer); the
/// SDK's error is kept for `Debug`.
struct Answer {
    text: String,
    error: Box<dyn StdError + Send + Sync>,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answer")
            .field("text", &self.text)
            .field("error", &self.error)
            .finish()
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl StdError for Answer {}

#[cfg(test)]
mod tests;
