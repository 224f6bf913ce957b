//! The offload settings' checks, made when the publisher is built.

use crate::config::SqsConfig;
use crate::error::{Result, config_error};
use crate::message::SQS_LIMITS;
use crate::sns::SNS_MAX_TOPIC_MESSAGE_BYTES;

/// Checks the offload settings: a valid bucket name, a threshold only with a bucket, above zero
/// and not above the largest message a queue or topic can take.
pub(crate) fn validate_offload(config: &SqsConfig) -> Result<()> {
    let Some(bucket) = &config.offload_bucket else {
        if config.offload_threshold.is_some() {
            return Err(config_error(
                "an offload threshold is set but no offload bucket: set the bucket too",
            ));
        }
        return Ok(());
    };
    if !is_valid_bucket_name(bucket.trim()) {
        return Err(config_error(format!(
            "offload bucket `{bucket}` is not a valid S3 bucket name (3-63 lower-case letters, \
             digits, `.` and `-`, starting and ending with a letter or digit)"
        )));
    }
    let Some(threshold) = config.offload_threshold else {
        return Ok(());
    };
    // The largest message any SQS queue or SNS topic can be set to take; a destination whose own
    // limit is lower has its messages offloaded above that limit instead (`offload_large`).
    let limit = SQS_LIMITS
        .max_message_bytes()
        .max(SNS_MAX_TOPIC_MESSAGE_BYTES);
    if threshold == 0 {
        return Err(config_error(format!(
            "offload threshold 0 must be within 1..={limit}: a message is offloaded when it is \
             larger than the threshold, so 1 offloads every message"
        )));
    }
    if threshold > limit {
        return Err(config_error(format!(
            "offload threshold {threshold} must be within 1..={limit}: no queue or topic accepts \
             more, so a larger message could neither be sent nor offloaded"
        )));
    }
    Ok(())
}

/// S3's bucket naming rules (general purpose buckets).
fn is_valid_bucket_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'.' || *b == b'-')
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && !name.contains("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names() {
        for ok in ["abc", "my-bucket.v2", &"a".repeat(63)] {
            assert!(is_valid_bucket_name(ok), "{ok}");
        }
        for bad in [
            "ab",
            "My-Bucket",
            "bucket_",
            "-bucket",
            "bucket-",
            "a..b",
            &"a".repeat(64),
        ] {
            assert!(!is_valid_bucket_name(bad), "{bad}");
        }
    }
}
