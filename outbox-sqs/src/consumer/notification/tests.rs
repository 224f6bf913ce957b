//! Tests of `notification`.

use super::*;
use aws_sdk_sqs::types::MessageSystemAttributeName;

fn attr(v: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(v)
        .build()
        .unwrap()
}

const NOTIFICATION: &str = r#"{
  "Type" : "Notification",
  "MessageId" : "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
  "TopicArn" : "arn:aws:sns:us-east-1:000000000000:orders",
  "Message" : "{\"kind\":\"credited\",\"account\":\"acc-1\",\"n\":1,\"cents\":100}",
  "Timestamp" : "2026-12-07T12:00:00.000Z",
  "SignatureVersion" : "1",
  "Signature" : "EXAMPLE",
  "MessageAttributes" : {
    "event_id" : {"Type":"String","Value":"0193a5b0-0000-7000-8000-000000000001"},
    "event_type" : {"Type":"String","Value":"account.credited"},
    "ExtendedPayloadSize" : {"Type":"Number","Value":"300000"},
    "blob" : {"Type":"Binary","Value":"AAEC"}
  }
}"#;

#[test]
fn a_notification_is_read_as_the_message_sns_was_given() {
    let m = Message::builder()
        .message_id("sqs-1")
        .receipt_handle("r-1")
        .body(NOTIFICATION)
        .attributes(MessageSystemAttributeName::ApproximateReceiveCount, "2")
        .build();
    let m = unwrapped(m);
    assert_eq!(
        m.body(),
        Some(r#"{"kind":"credited","account":"acc-1","n":1,"cents":100}"#)
    );
    let a = m.message_attributes().unwrap();
    assert_eq!(
        a["event_id"].string_value(),
        Some("0193a5b0-0000-7000-8000-000000000001")
    );
    assert_eq!(a["event_type"].string_value(), Some("account.credited"));
    assert_eq!(a["ExtendedPayloadSize"].data_type(), "Number");
    assert!(!a.contains_key("blob"));
    // SQS's own parts stay.
    assert_eq!(m.message_id(), Some("sqs-1"));
    assert_eq!(m.receipt_handle(), Some("r-1"));
    assert_eq!(super::super::envelope::receive_count(&m), 2);
}

#[test]
fn other_messages_are_left_as_they_are() {
    // A raw message whose body happens to look like a notification: its own attributes win.
    let raw = Message::builder()
        .body(NOTIFICATION)
        .message_attributes(ATTR_EVENT_ID, attr("0193a5b0-0000-7000-8000-000000000002"))
        .build();
    assert_eq!(unwrapped(raw.clone()), raw);
    for body in [
        "not json",
        "{}",
        r#"{"Type":"SubscriptionConfirmation","TopicArn":"arn:aws:sns:x","Message":"m"}"#,
        r#"{"Type":"Notification","TopicArn":"orders","Message":"m"}"#,
        r#"{"Type":"Notification","Message":"m"}"#,
        "[1,2]",
    ] {
        let m = Message::builder().body(body).build();
        assert_eq!(unwrapped(m.clone()), m, "{body}");
    }
}
