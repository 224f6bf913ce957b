//! How the publisher sends `SendMessageBatch`: its own lean HTTP path, or the AWS SDK's client.

use std::fmt;
use std::str::FromStr;

/// How [`SqsPublisher`](crate::SqsPublisher) sends `SendMessageBatch` to SQS queues (SNS topics
/// and S3 always go through the AWS SDK).
///
/// Both read the same AWS configuration — credentials from the default chain (or the given
/// [`SdkConfig`](aws_config::SdkConfig)'s provider), region, endpoint (`AWS_ENDPOINT_URL_SQS`,
/// `AWS_ENDPOINT_URL`, or AWS's regional, FIPS or dual-stack endpoint) and attempts per call —
/// and produce the same messages, outcomes and errors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SqsTransport {
    /// The default: the request's JSON written straight from the claimed events, signed with
    /// SigV4 (`aws-sigv4`), sent over one pooled HTTP/1.1 client; the SDK's standard retry mode
    /// (attempts, exponential backoff with jitter, and its retry quota: when most calls fail,
    /// they are no longer retried) for server errors, throttling and lost connections; the
    /// configuration's connect timeout (3.1 s by default, as the SDK's) and
    /// attempt timeout. About 0.4× the SDK's CPU per event (see `BENCHMARKS.md`).
    ///
    /// It brings its own HTTP client (rustls with the system's root certificates): an HTTP client
    /// set on the [`SdkConfig`](aws_config::SdkConfig) — a proxy, a private CA — is not used by
    /// it; choose [`Sdk`](SqsTransport::Sdk) for that. The start-up check reads each queue's
    /// attributes through it, so such a set-up fails there, not at the first publish.
    #[default]
    Direct,
    /// `aws-sdk-sqs`'s client, with its interceptors, retry strategy and HTTP client. Used
    /// whatever this setting says when the builder is given a
    /// [`client`](crate::SqsPublisherBuilder::client), so that the client's own configuration
    /// applies.
    Sdk,
}

impl SqsTransport {
    /// `direct` or `sdk`, as [`OUTBOX_SQS_TRANSPORT`](crate::ENV_TRANSPORT) spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SqsTransport::Direct => "direct",
            SqsTransport::Sdk => "sdk",
        }
    }
}

impl fmt::Display for SqsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SqsTransport {
    type Err = String;

    /// `direct` or `sdk`, in any case.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "direct" => Ok(SqsTransport::Direct),
            "sdk" => Ok(SqsTransport::Sdk),
            _ => Err(format!("`{s}` is neither `direct` nor `sdk`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints() {
        for t in [SqsTransport::Direct, SqsTransport::Sdk] {
            assert_eq!(t.to_string().parse::<SqsTransport>(), Ok(t));
        }
        assert_eq!(" SDK ".parse::<SqsTransport>(), Ok(SqsTransport::Sdk));
        assert!(
            "http"
                .parse::<SqsTransport>()
                .unwrap_err()
                .contains("`http`")
        );
        assert_eq!(SqsTransport::default(), SqsTransport::Direct);
    }
}
