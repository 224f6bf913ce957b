//! SQS's AWS JSON 1.0 wire format for `SendMessageBatch`, as the direct transport writes and reads
//! it: each entry's JSON written once, straight from the claimed event's fields (the payload's
//! text is escaped into `MessageBody`, never parsed), the request assembled from those entries,
//! and the answer and error bodies read back.

use serde::Deserialize;

use crate::answer::{BatchAnswer, FailedEntry};
use crate::message::Parts;

/// The `X-Amz-Target` of `SendMessageBatch`.
pub(crate) const SEND_MESSAGE_BATCH_TARGET: &str = "AmazonSQS.SendMessageBatch";

/// The `X-Amz-Target` of `GetQueueAttributes`.
pub(crate) const GET_QUEUE_ATTRIBUTES_TARGET: &str = "AmazonSQS.GetQueueAttributes";

/// The content type of the AWS JSON 1.0 protocol.
pub(crate) const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// What each byte becomes in a JSON string: 0 as is, else the letter of its escape (`u` for
/// `\u00XX`).
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// Appends `s` as a JSON string (quoted and escaped).
fn push_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape = ESCAPE[usize::from(b)];
        if escape == 0 {
            continue;
        }
        // `i` is at an ASCII byte: a character boundary.
        out.push_str(&s[start..i]);
        out.push('\\');
        out.push(char::from(escape));
        if escape == b'u' {
            out.push_str("00");
            out.push(char::from(crate::message::HEX[usize::from(b >> 4)]));
            out.push(char::from(crate::message::HEX[usize::from(b & 0xf)]));
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// The JSON object of one `SendMessageBatch` entry.
pub(crate) fn entry_json(parts: &Parts<'_>) -> String {
    let attrs: usize = parts
        .attributes
        .iter()
        .map(|(n, t, v)| n.len() + t.len() + v.len() + 48)
        .sum();
    // Room for the escapes of a typical JSON payload (its quotes) as well.
    let body = parts.body.len();
    let mut out = String::with_capacity(body + body / 8 + attrs + 160);
    out.push_str("{\"Id\":");
    push_str(&mut out, parts.id);
    out.push_str(",\"MessageBody\":");
    push_str(&mut out, parts.body);
    out.push_str(",\"MessageAttributes\":{");
    for (i, (name, data_type, value)) in parts.attributes.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_str(&mut out, name);
        out.push_str(":{\"DataType\":");
        push_str(&mut out, data_type);
        out.push_str(",\"StringValue\":");
        push_str(&mut out, value);
        out.push('}');
    }
    out.push('}');
    if let Some(group) = &parts.group {
        out.push_str(",\"MessageGroupId\":");
        push_str(&mut out, group);
        out.push_str(",\"MessageDeduplicationId\":");
        push_str(&mut out, parts.event_id);
    }
    out.push('}');
    out
}

/// The body of a `SendMessageBatch` call to `queue_url` with these entries (each from
/// [`entry_json`]).
pub(crate) fn request_body<'a>(queue_url: &str, entries: impl Iterator<Item = &'a str>) -> Vec<u8> {
    let entries: Vec<&str> = entries.collect();
    let len: usize = entries.iter().map(|e| e.len() + 1).sum();
    let mut out = String::with_capacity(len + queue_url.len() + 32);
    out.push_str("{\"QueueUrl\":");
    push_str(&mut out, queue_url);
    out.push_str(",\"Entries\":[");
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(entry);
    }
    out.push_str("]}");
    out.into_bytes()
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Answer {
    #[serde(default)]
    successful: Vec<Accepted>,
    #[serde(default)]
    failed: Vec<Failed>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Accepted {
    id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Failed {
    id: String,
    #[serde(default)]
    sender_fault: bool,
    code: String,
    #[serde(default)]
    message: Option<String>,
}

/// Reads a `SendMessageBatch` answer. `Err` says why it is not one.
pub(crate) fn parse_answer(body: &[u8]) -> Result<BatchAnswer, String> {
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|e| format!("unreadable SendMessageBatch answer: {e}"))?;
    Ok(BatchAnswer {
        successful: answer.successful.into_iter().map(|s| s.id).collect(),
        failed: answer
            .failed
            .into_iter()
            .map(|f| FailedEntry {
                id: f.id,
                code: f.code,
                message: f.message,
                sender_fault: f.sender_fault,
            })
            .collect(),
    })
}

/// The attributes of a `GetQueueAttributes` answer (`{"Attributes": {name: value}}`; none when the
/// queue has none of those asked for).
pub(crate) fn parse_attributes(
    body: &[u8],
) -> Result<std::collections::HashMap<String, String>, String> {
    #[derive(Deserialize)]
    struct Attributes {
        #[serde(rename = "Attributes", default)]
        attributes: std::collections::HashMap<String, String>,
    }
    serde_json::from_slice::<Attributes>(body)
        .map(|a| a.attributes)
        .map_err(|e| format!("unreadable GetQueueAttributes answer: {e}"))
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "__type", default)]
    kind: Option<String>,
    #[serde(default, alias = "Message")]
    message: Option<String>,
}

/// An error answer's code and message: the legacy query code of the `x-amzn-query-error` header
/// when present (`AWS.SimpleQueueService.NonExistentQueue;Sender`, what the SDK reports), else
/// the `__type` of the body without its namespace (`com.amazonaws.sqs#QueueDoesNotExist`).
pub(crate) fn parse_error(query_error: Option<&str>, body: &[u8]) -> (String, Option<String>) {
    let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
    // Never the signed request a signature error quotes (it names the session token).
    let message = parsed
        .as_ref()
        .and_then(|b| b.message.as_deref())
        .map(|m| outbox_core::redact_signed_request(m).into_owned());
    let from_header = query_error
        .and_then(|h| h.split(';').next())
        .map(str::trim)
        .filter(|c| !c.is_empty());
    let from_body = parsed.as_ref().and_then(|b| b.kind.as_deref()).map(|t| {
        let t = t.rsplit('#').next().unwrap_or(t);
        t.split(':').next().unwrap_or(t).trim()
    });
    let code = from_header
        .or(from_body.filter(|c| !c.is_empty()))
        .unwrap_or(crate::classify::UNKNOWN_CODE);
    (code.to_owned(), message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(body: &'a str, group: Option<&str>) -> Parts<'a> {
        Parts {
            id: "3",
            event_id: "0190-ab",
            body,
            attributes: &[
                ("event_type", "String", "order.\"created\""),
                ("n", "Number", "7"),
            ],
            group: group.map(str::to_owned),
        }
    }

    #[test]
    fn an_entry_is_the_json_the_sdk_would_send() {
        let body = "{\"a\":\"x\\\"y\",\"ctl\":\"\u{1}\u{1f}\",\"nl\":\"\n\",\"ws\":\"\t\r\\\\\",\"ü\":\"😀\"}";
        let json = entry_json(&parts(body, Some("order:1")));
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "Id": "3",
                "MessageBody": body,
                "MessageAttributes": {
                    "event_type": {"DataType": "String", "StringValue": "order.\"created\""},
                    "n": {"DataType": "Number", "StringValue": "7"}
                },
                "MessageGroupId": "order:1",
                "MessageDeduplicationId": "0190-ab"
            })
        );
        // The payload is a string, byte for byte, not a nested document.
        assert_eq!(value["MessageBody"].as_str(), Some(body));
        let standard: serde_json::Value =
            serde_json::from_str(&entry_json(&parts("{}", None))).unwrap();
        assert!(standard.get("MessageGroupId").is_none());
        assert!(standard.get("MessageDeduplicationId").is_none());
    }

    #[test]
    fn a_request_holds_the_queue_and_every_entry_in_order() {
        let a = entry_json(&parts("1", None));
        let b = entry_json(&parts("2", None));
        let body = request_body("http://q/\"x\"", [a.as_str(), b.as_str()].into_iter());
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["QueueUrl"], "http://q/\"x\"");
        assert_eq!(value["Entries"][0]["MessageBody"], "1");
        assert_eq!(value["Entries"][1]["MessageBody"], "2");
    }

    #[test]
    fn answers_and_errors_are_read() {
        let answer = parse_answer(
            br#"{"Successful":[{"Id":"0","MessageId":"m","MD5OfMessageBody":"x"}],
                 "Failed":[{"Id":"1","SenderFault":true,"Code":"InvalidParameterValue","Message":"bad"},
                           {"Id":"2","Code":"InternalError"}]}"#,
        )
        .unwrap();
        assert_eq!(answer.successful, vec!["0".to_owned()]);
        assert_eq!(answer.failed.len(), 2);
        assert!(answer.failed[0].sender_fault);
        assert_eq!(answer.failed[0].message.as_deref(), Some("bad"));
        assert!(!answer.failed[1].sender_fault);
        assert_eq!(parse_answer(b"{}").unwrap(), BatchAnswer::default());
        assert!(parse_answer(b"<html>").unwrap_err().contains("unreadable"));

        let body = br#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"gone"}"#;
        assert_eq!(
            parse_error(Some("AWS.SimpleQueueService.NonExistentQueue;Sender"), body),
            (
                "AWS.SimpleQueueService.NonExistentQueue".into(),
                Some("gone".into())
            )
        );
        assert_eq!(
            parse_error(None, body),
            ("QueueDoesNotExist".into(), Some("gone".into()))
        );
        assert_eq!(
            parse_error(
                None,
                br#"{"__type":"ThrottlingException:http://x","Message":"slow"}"#
            ),
            ("ThrottlingException".into(), Some("slow".into()))
        );
        assert_eq!(parse_error(None, b"oops"), ("unknown error".into(), None));
    }
}
