//! What a route's target names: an SQS queue (URL or name) or an SNS topic (ARN).

use std::fmt;

/// The kind of a destination the publisher sends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DestinationKind {
    /// An Amazon SQS queue, sent to with `SendMessageBatch`.
    Queue,
    /// An Amazon SNS topic, published to with `PublishBatch`.
    Topic,
}

impl DestinationKind {
    /// `queue` or `topic`, as logs and metrics name it.
    pub fn as_str(self) -> &'static str {
        match self {
            DestinationKind::Queue => "queue",
            DestinationKind::Topic => "topic",
        }
    }
}

impl fmt::Display for DestinationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A route target, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A queue URL (`http://` or `https://`).
    QueueUrl(String),
    /// A queue name, resolved to its URL with `GetQueueUrl`.
    QueueName(String),
    /// An SNS topic ARN.
    Topic(String),
}

/// The longest SQS queue name (`.fifo` included).
const MAX_QUEUE_NAME_LEN: usize = 80;
/// The longest SNS topic name (`.fifo` included).
const MAX_TOPIC_NAME_LEN: usize = 256;

/// Whether `name` is a valid SQS queue name (at most 80 bytes) or SNS topic name (at most 256): ASCII
/// letters, digits, `-` and `_`, optionally followed by `.fifo` (counted in the length).
fn is_valid_name(name: &str, max_len: usize) -> bool {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    !stem.is_empty()
        && name.len() <= max_len
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Parses a route target: a queue URL, a queue name, or an SNS topic ARN
/// (`arn:<partition>:sns:<region>:<account>:<topic>`). The error says what is wrong, for a
/// configuration error that names the route.
pub(crate) fn parse_target(target: &str) -> Result<Target, String> {
    let target = target.trim();
    if let Some(rest) = target
        .strip_prefix("https://")
        .or_else(|| target.strip_prefix("http://"))
    {
        // A host, then a path ending in the queue's name: `http://` alone, or a URL without the
        // name, passed and failed only at the queue check (black-box run).
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let name = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        if !names_a_host(host) {
            return Err(format!("`{target}` is a URL without a host"));
        }
        if !is_valid_name(name, MAX_QUEUE_NAME_LEN) {
            return Err(format!(
                "`{target}` is not an SQS queue URL: it must end in the queue's name (letters, \
                 digits, `-`, `_`, at most 80), as https://sqs.REGION.amazonaws.com/ACCOUNT/NAME"
            ));
        }
        // A queue URL has no `;`, `=`, space or the like: `a=URL1;b=URL2` was taken for one URL,
        // ending in the second queue's name (black-box run).
        if let Some(c) = rest
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "-._~:/[]%".contains(*c)))
        {
            return Err(format!(
                "`{target}` is not an SQS queue URL: `{c}` has no place in one (routes are \
                 separated by `,`)"
            ));
        }
        return Ok(Target::QueueUrl(target.to_owned()));
    }
    if let Some(rest) = target.strip_prefix("arn:") {
        let parts: Vec<&str> = rest.split(':').collect();
        return match parts.as_slice() {
            [partition, "sns", region, account, topic]
                if !partition.is_empty()
                    && !region.is_empty()
                    && account.len() == 12
                    && account.chars().all(|c| c.is_ascii_digit())
                    && is_valid_name(topic, MAX_TOPIC_NAME_LEN) =>
            {
                Ok(Target::Topic(target.to_owned()))
            }
            [_, "sns", ..] => Err(format!(
                "`{target}` is not an SNS topic ARN (arn:PARTITION:sns:REGION:ACCOUNT:TOPIC, a \
                 12-digit account, a topic name of letters, digits, `-` and `_`)"
            )),
            _ => Err(format!(
                "`{target}` is an ARN but not of an SNS topic; a target is an SQS queue URL, an \
                 SQS queue name or an SNS topic ARN"
            )),
        };
    }
    if is_valid_name(target, MAX_QUEUE_NAME_LEN) {
        return Ok(Target::QueueName(target.to_owned()));
    }
    Err(format!(
        "`{target}` is neither an SQS queue URL (https://…), an SQS queue name (letters, digits, \
         `-`, `_`, at most 80) nor an SNS topic ARN (arn:aws:sns:…)"
    ))
}

/// Whether `host` (an http(s) URL's authority, up to its path) names a host: its port aside
/// (`http://:80/…` has none; an IPv6 address is in brackets), and without whitespace.
pub(crate) fn names_a_host(host: &str) -> bool {
    let name = if host.starts_with('[') {
        host
    } else {
        host.split(':').next().unwrap_or("")
    };
    !name.is_empty() && !host.contains(char::is_whitespace)
}

/// Whether a queue URL or topic ARN names a FIFO queue or topic.
pub(crate) fn is_fifo(address: &str) -> bool {
    address.trim_end_matches('/').ends_with(".fifo")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_urls_names_and_topic_arns() {
        assert_eq!(
            parse_target(" https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo "),
            Ok(Target::QueueUrl(
                "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo".into()
            ))
        );
        assert_eq!(
            parse_target("http://127.0.0.1:4566/000000000000/q"),
            Ok(Target::QueueUrl(
                "http://127.0.0.1:4566/000000000000/q".into()
            ))
        );
        assert_eq!(
            parse_target("http://[::1]:4566/000000000000/q"),
            Ok(Target::QueueUrl("http://[::1]:4566/000000000000/q".into()))
        );
        assert_eq!(
            parse_target("payments_v2-x.fifo"),
            Ok(Target::QueueName("payments_v2-x.fifo".into()))
        );
        for arn in [
            "arn:aws:sns:eu-west-1:123456789012:orders",
            "arn:aws:sns:eu-west-1:123456789012:orders.fifo",
            "arn:aws-cn:sns:cn-north-1:123456789012:o_1-2",
        ] {
            assert_eq!(parse_target(arn), Ok(Target::Topic(arn.into())), "{arn}");
        }
        assert!(is_fifo("arn:aws:sns:eu-west-1:123456789012:orders.fifo"));
        assert!(is_fifo("https://sqs.x/1/q.fifo/"));
        assert!(!is_fifo("arn:aws:sns:eu-west-1:123456789012:orders"));
    }

    #[test]
    fn anything_else_is_refused_with_a_reason() {
        for (bad, says) in [
            (
                "arn:aws:sqs:eu-west-1:123456789012:orders",
                "not of an SNS topic",
            ),
            ("arn:aws:sns:eu-west-1:123456789012", "not an SNS topic ARN"),
            ("arn:aws:sns:eu-west-1:1234:orders", "not an SNS topic ARN"),
            (
                "arn:aws:sns:eu-west-1:123456789012:bad name",
                "not an SNS topic ARN",
            ),
            (
                "arn:aws:sns:eu-west-1:123456789012:orders:sub-id",
                "not an SNS topic ARN",
            ),
            ("http://", "without a host"),
            ("https:///000000000000/q", "without a host"),
            ("http://:80/000000000000/q", "without a host"),
            (
                "https://sqs.eu-west-1.amazonaws.com",
                "must end in the queue's name",
            ),
            (
                "https://sqs.eu-west-1.amazonaws.com/1/bad name",
                "must end in the queue's name",
            ),
            (
                "http://h:4566/000000000000/q1;b=http://h:4566/000000000000/q2",
                "`;` has no place in one",
            ),
            ("orders queue", "neither"),
            ("sqs.eu-west-1.amazonaws.com/1/q", "neither"),
            (".fifo", "neither"),
            ("", "neither"),
        ] {
            let e = parse_target(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(parse_target(&"q".repeat(81)).is_err());
        assert!(parse_target(&"q".repeat(80)).is_ok());
        // Topic names go to 256 (a 100-character topic was refused by the queues' 80).
        let topic = |n: usize| format!("arn:aws:sns:eu-west-1:123456789012:{}", "t".repeat(n));
        assert!(parse_target(&topic(100)).is_ok());
        assert!(parse_target(&topic(256)).is_ok());
        assert!(parse_target(&topic(257)).is_err());
    }
}
