//! The AWS JSON 1.0 protocol of SQS: decoding requests, answering them, encoding errors.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::request::{
    Attributes, QueueNameInput, QueueUrlInput, SendMessageBatchInput, SendMessageInput, Text,
    check_message, md5_hex, message_size, queue_name,
};
use crate::sqs_error::SqsError;
use crate::{ACCOUNT_ID, InFlight, SentMessage, State, lock};

/// The largest message (and batch) SQS accepts: body and attributes together.
pub(crate) const MAX_MESSAGE_BYTES: usize = 1024 * 1024;
const MAX_BATCH_ENTRIES: usize = 10;
pub(crate) const MAX_ATTRIBUTES: usize = 10;
pub(crate) const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

pub(crate) type HttpResponse = Response<Full<Bytes>>;

/// Answers one HTTP request, with a `Date` header of the fixture's clock (as AWS answers).
pub(crate) async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<HttpResponse, Infallible> {
    let now = state.clock();
    let Ok(mut response) = answer(state, req, now).await;
    if let Ok(date) = hyper::header::HeaderValue::from_str(&httpdate::fmt_http_date(now)) {
        response.headers_mut().insert(hyper::header::DATE, date);
    }
    Ok(response)
}

async fn answer(
    state: Arc<State>,
    req: Request<Incoming>,
    now: std::time::SystemTime,
) -> Result<HttpResponse, Infallible> {
    let _in_flight = InFlight::enter(&state);
    let action = req
        .headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .map(|t| t.strip_prefix("AmazonSQS.").unwrap_or(t).to_owned())
        .unwrap_or_default();
    state.count_call(&action);
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return Ok(SqsError::invalid(format!("cannot read body: {e}")).response()),
    };
    if let Err(e) = crate::sigv4::check(&state, &parts, &body, now) {
        return Ok(e.response());
    }
    let latency = state.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(latency) = state.slow(&body) {
        tokio::time::sleep(latency).await;
    }
    if let Some(latency) = state.slow_action(&action) {
        tokio::time::sleep(latency).await;
    }
    while state.silenced(&body) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    if let Some(fault) = state.queue_fault(&body) {
        return Ok(crate::sqs_error::fault_response(&fault));
    }
    if let Some(fault) = state.take_call_fault(&action) {
        return Ok(crate::sqs_error::fault_response(&fault));
    }
    let result = match action.as_str() {
        "SendMessageBatch" => decode(&body).and_then(|input| send_message_batch(&state, input)),
        "SendMessage" => decode(&body)
            .and_then(|input| send_message(&state, input))
            .map(|v| v.to_string()),
        "GetQueueUrl" => decode(&body)
            .and_then(|input| get_queue_url(&state, input))
            .map(|v| v.to_string()),
        "GetQueueAttributes" => decode(&body)
            .and_then(|input| get_queue_attributes(&state, input))
            .map(|v| v.to_string()),
        "CreateQueue" => decode(&body)
            .and_then(|input| create_queue(&state, input))
            .map(|v| v.to_string()),
        "ListQueues" => Ok(list_queues(&state).to_string()),
        // The fixture records what it accepts and delivers nothing: every receive finds the queue
        // empty (at once, whatever the wait asked for).
        "ReceiveMessage" => Ok("{}".to_owned()),
        "" => Err(SqsError::new(
            400,
            "MissingAction",
            "MissingAction",
            "Missing x-amz-target header",
        )),
        other => Err(SqsError::new(
            400,
            "InvalidAction",
            "InvalidAction",
            format!("The action {other} is not valid for this endpoint (SQS test fixture)."),
        )),
    };
    if let Some(latency) = state.late(&body) {
        tokio::time::sleep(latency).await;
    }
    Ok(match result {
        Ok(value) => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", CONTENT_TYPE)
            .body(Full::new(Bytes::from(value)))
            .expect("valid response"),
        Err(e) => e.response(),
    })
}

fn decode<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, SqsError> {
    serde_json::from_slice(body).map_err(|e| {
        SqsError::new(
            400,
            "SerializationException",
            "SerializationException",
            e.to_string(),
        )
    })
}

fn to_sent(
    action: &'static str,
    queue_url: &str,
    entry_id: Option<String>,
    body: Text<'_>,
    attributes: Attributes<'_>,
    group_id: Option<Text<'_>>,
    dedup_id: Option<Text<'_>>,
) -> SentMessage {
    let mut values = BTreeMap::new();
    let mut types = BTreeMap::new();
    for (name, a) in attributes {
        values.insert(
            name.clone().into_owned(),
            a.string_value
                .or(a.binary_value)
                .map(Cow::into_owned)
                .unwrap_or_default(),
        );
        types.insert(name.into_owned(), a.data_type.into_owned());
    }
    SentMessage {
        queue_url: queue_url.to_owned(),
        queue_name: queue_name(queue_url).to_owned(),
        message_id: String::new(),
        body: body.into_owned(),
        attributes: values,
        attribute_types: types,
        group_id: group_id.map(Cow::into_owned),
        dedup_id: dedup_id.map(Cow::into_owned),
        action,
        entry_id,
    }
}

/// The queue's FIFO flag and its `MaximumMessageSize`, or `QueueDoesNotExist`.
fn queue_shape(state: &State, url: &str) -> Result<(bool, usize), SqsError> {
    lock(&state.queues)
        .get(queue_name(url))
        .map(|q| (q.fifo, q.max_message_bytes))
        .ok_or_else(SqsError::no_queue)
}

fn next_sequence(state: &State, url: &str) -> String {
    let mut queues = lock(&state.queues);
    let q = queues.get_mut(queue_name(url)).expect("queue checked");
    q.sequence += 1;
    format!("{:020}", q.sequence)
}

fn send_message_batch(state: &State, input: SendMessageBatchInput<'_>) -> Result<String, SqsError> {
    let (fifo, max_bytes) = queue_shape(state, &input.queue_url)?;
    let entries = input.entries;
    if entries.is_empty() {
        return Err(SqsError::new(
            400,
            "EmptyBatchRequest",
            "AWS.SimpleQueueService.EmptyBatchRequest",
            "There should be at least one SendMessageBatchRequestEntry in the request.",
        ));
    }
    if entries.len() > MAX_BATCH_ENTRIES {
        return Err(SqsError::new(
            400,
            "TooManyEntriesInBatchRequest",
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            format!(
                "Maximum number of entries per request are {MAX_BATCH_ENTRIES}. You have sent {}.",
                entries.len()
            ),
        ));
    }
    for (i, e) in entries.iter().enumerate() {
        let valid = !e.id.is_empty()
            && e.id.len() <= 80
            && e.id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(SqsError::new(
                400,
                "InvalidBatchEntryId",
                "AWS.SimpleQueueService.InvalidBatchEntryId",
                "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.",
            ));
        }
        if entries[..i].iter().any(|o| o.id == e.id) {
            return Err(SqsError::new(
                400,
                "BatchEntryIdsNotDistinct",
                "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
                format!("Id {} repeated.", e.id),
            ));
        }
    }
    let total: usize = entries
        .iter()
        .map(|e| message_size(&e.message_body, &e.message_attributes))
        .sum();
    if total > MAX_MESSAGE_BYTES {
        return Err(SqsError::new(
            400,
            "BatchRequestTooLong",
            "AWS.SimpleQueueService.BatchRequestTooLong",
            format!(
                "Batch requests cannot be longer than {MAX_MESSAGE_BYTES} bytes. You have sent {total} bytes."
            ),
        ));
    }

    // Messages are built (copied out of the request) only for what needs them: recording, or a
    // rule that fails entries by their content. The benchmarks switch both off.
    let keep = state.keeps_messages();
    let mut successful = Vec::with_capacity(entries.len());
    let mut failed = Vec::new();
    let mut accepted = Vec::with_capacity(if keep { entries.len() } else { 0 });
    let mut count = 0;
    for e in entries {
        if let Err((code, message)) = check_message(
            &e.message_body,
            &e.message_attributes,
            e.message_group_id.as_deref(),
            fifo,
            max_bytes,
        ) {
            failed.push(BatchFailed::new(e.id, true, code.to_owned(), message));
            continue;
        }
        let md5 = md5_hex(&e.message_body);
        let message_id = if keep {
            let mut sent = to_sent(
                "SendMessageBatch",
                &input.queue_url,
                Some(e.id.to_string()),
                e.message_body,
                e.message_attributes,
                e.message_group_id,
                e.message_deduplication_id,
            );
            if let Some(fault) = state.entry_fault(&sent) {
                failed.push(BatchFailed::new(
                    e.id,
                    fault.sender_fault,
                    fault.code,
                    fault.message,
                ));
                continue;
            }
            sent.message_id = state.new_message_id();
            let id = sent.message_id.clone();
            accepted.push(sent);
            id
        } else {
            count += 1;
            state.new_message_id()
        };
        successful.push(BatchOk {
            id: e.id,
            message_id,
            md5_of_message_body: md5,
            sequence_number: fifo.then(|| next_sequence(state, &input.queue_url)),
        });
    }
    state.count_accepted(count);
    state.record(accepted);
    serialize(&BatchAnswer { successful, failed })
}

/// `SendMessageBatch`'s answer.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct BatchAnswer<'a> {
    successful: Vec<BatchOk<'a>>,
    failed: Vec<BatchFailed<'a>>,
}

/// An entry SQS accepted.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct BatchOk<'a> {
    id: Text<'a>,
    message_id: String,
    #[serde(rename = "MD5OfMessageBody")]
    md5_of_message_body: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    sequence_number: Option<String>,
}

/// An entry SQS refused.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct BatchFailed<'a> {
    id: Text<'a>,
    sender_fault: bool,
    code: String,
    message: String,
}

impl<'a> BatchFailed<'a> {
    fn new(id: Text<'a>, sender_fault: bool, code: String, message: String) -> Self {
        BatchFailed {
            id,
            sender_fault,
            code,
            message,
        }
    }
}

fn serialize(answer: &impl Serialize) -> Result<String, SqsError> {
    serde_json::to_string(answer)
        .map_err(|e| SqsError::new(500, "InternalError", "InternalError", e.to_string()))
}

fn send_message(state: &State, input: SendMessageInput<'_>) -> Result<Value, SqsError> {
    let (fifo, max_bytes) = queue_shape(state, &input.queue_url)?;
    check_message(
        &input.message_body,
        &input.message_attributes,
        input.message_group_id.as_deref(),
        fifo,
        max_bytes,
    )
    .map_err(|(code, message)| SqsError::new(400, code, code, message))?;
    let mut sent = to_sent(
        "SendMessage",
        &input.queue_url,
        None,
        input.message_body,
        input.message_attributes,
        input.message_group_id,
        input.message_deduplication_id,
    );
    if let Some(fault) = state.entry_fault(&sent) {
        let status = if fault.sender_fault { 400 } else { 500 };
        return Err(SqsError::new(
            status,
            &fault.code,
            &fault.code,
            fault.message,
        ));
    }
    sent.message_id = state.new_message_id();
    let mut ok = json!({"MessageId": sent.message_id, "MD5OfMessageBody": md5_hex(&sent.body)});
    if fifo {
        ok["SequenceNumber"] = Value::String(next_sequence(state, &input.queue_url));
    }
    state.record(vec![sent]);
    Ok(ok)
}

fn get_queue_url(state: &State, input: QueueNameInput) -> Result<Value, SqsError> {
    let queues = lock(&state.queues);
    let queue = queues
        .get(&input.queue_name)
        .ok_or_else(SqsError::no_queue)?;
    Ok(json!({"QueueUrl": queue.url}))
}

fn get_queue_attributes(state: &State, input: QueueUrlInput) -> Result<Value, SqsError> {
    let name = queue_name(&input.queue_url);
    let (fifo, max_message_bytes) = lock(&state.queues)
        .get(name)
        .map(|q| (q.fifo, q.max_message_bytes))
        .ok_or_else(SqsError::no_queue)?;
    let mut attributes = json!({
        "QueueArn": format!("arn:aws:sqs:us-east-1:{ACCOUNT_ID}:{name}"),
        "MaximumMessageSize": max_message_bytes.to_string(),
        "ApproximateNumberOfMessages": "0",
    });
    if fifo {
        attributes["FifoQueue"] = Value::String("true".into());
        attributes["ContentBasedDeduplication"] = Value::String("false".into());
    }
    Ok(json!({"Attributes": attributes}))
}

fn create_queue(state: &State, input: QueueNameInput) -> Result<Value, SqsError> {
    let name = &input.queue_name;
    let valid = !name.is_empty()
        && name.len() <= 80
        && name
            .trim_end_matches(".fifo")
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid {
        return Err(SqsError::invalid(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
        ));
    }
    let wants_fifo = input
        .attributes
        .get("FifoQueue")
        .is_some_and(|v| v == "true");
    if wants_fifo != name.ends_with(".fifo") {
        return Err(SqsError::invalid(
            "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.",
        ));
    }
    Ok(json!({"QueueUrl": state.create_queue(name)}))
}

fn list_queues(state: &State) -> Value {
    let mut urls: Vec<String> = lock(&state.queues)
        .values()
        .map(|q| q.url.clone())
        .collect();
    urls.sort();
    json!({"QueueUrls": urls})
}
