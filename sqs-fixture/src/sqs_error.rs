//! The errors the fixture answers with, as SQS's JSON 1.0 protocol encodes them.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use serde_json::json;

use crate::CallFault;
use crate::protocol::{CONTENT_TYPE, HttpResponse};

/// An SQS error: the JSON `__type` code, the legacy query code the SDK reads from the
/// `x-amzn-query-error` header, the status and whose fault it is.
pub(crate) struct SqsError {
    status: u16,
    code: String,
    query_code: String,
    message: String,
}

impl SqsError {
    pub(crate) fn new(
        status: u16,
        code: &str,
        query_code: &str,
        message: impl Into<String>,
    ) -> Self {
        SqsError {
            status,
            code: code.to_owned(),
            query_code: query_code.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(
            400,
            "InvalidParameterValue",
            "InvalidParameterValue",
            message,
        )
    }

    pub(crate) fn no_queue() -> Self {
        Self::new(
            400,
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
            "The specified queue does not exist.",
        )
    }

    pub(crate) fn response(&self) -> HttpResponse {
        let fault = if self.status < 500 {
            "Sender"
        } else {
            "Receiver"
        };
        let body = json!({
            "__type": format!("com.amazonaws.sqs#{}", self.code),
            "message": self.message,
        });
        Response::builder()
            .status(StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST))
            .header("content-type", CONTENT_TYPE)
            .header("x-amzn-query-error", format!("{};{fault}", self.query_code))
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("valid response")
    }
}

/// The answer to a call that `fault` fails.
pub(crate) fn fault_response(fault: &CallFault) -> HttpResponse {
    match fault {
        CallFault::Foreign { status, body } => Response::builder()
            .status(StatusCode::from_u16(*status).unwrap_or(StatusCode::FORBIDDEN))
            .header("content-type", "text/plain")
            .body(Full::new(Bytes::from(body.clone())))
            .expect("valid response"),
        fault => SqsError::from(fault).response(),
    }
}

impl From<&CallFault> for SqsError {
    fn from(fault: &CallFault) -> Self {
        match fault {
            CallFault::InternalError => SqsError::new(
                500,
                "InternalError",
                "InternalError",
                "We encountered an internal error. Please try again. (injected)",
            ),
            CallFault::ServiceUnavailable => SqsError::new(
                503,
                "ServiceUnavailable",
                "ServiceUnavailable",
                "The request has failed due to a temporary failure of the server. (injected)",
            ),
            CallFault::Throttling => SqsError::new(
                400,
                "ThrottlingException",
                "RequestThrottled",
                "Rate exceeded (injected)",
            ),
            CallFault::Error {
                status,
                code,
                message,
            } => SqsError::new(*status, code, code, message.clone()),
            CallFault::Foreign { status, body } => SqsError::new(*status, "", "", body.clone()),
        }
    }
}
