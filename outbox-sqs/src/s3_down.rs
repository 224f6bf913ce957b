//! S3 down (see `down.rs`): an upload failed without an answer (a time-out, unreachable) or with a
//! 5xx, and a `HeadBucket` after it was not answered either; or an upload in flight went
//! unanswered, and so did a `HeadBucket` its watch sent (`upload_watch.rs`); or uploads stall
//! while S3 answers `HeadBucket`. While S3 is down, offloaded events are put back at once,
//! uncounted, without an upload, so that the other events of their batches go on; a task of its
//! own tries a tiny upload ([`PROBE_KEY`]) once per probe interval and ends the state when one
//! goes through. (Each batch with an offloaded event waited for an upload's time-out, about 15 s
//! at the relay's defaults, during an S3 outage; with a probe upload in a batch every interval,
//! those batches overlapped and held the heads of every aggregate they had claimed: black-box
//! run.) Unlike the bucket's circuit breaker (S3 refusing: the bucket missing, access denied),
//! being down never dead-letters an event.

use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;

use prometheus_client::metrics::gauge::Gauge;

use crate::down::{Down, Probe};

/// The object the probe writes, empty, next to the offloaded payloads (whose keys are event ids).
pub(crate) const PROBE_KEY: &str = "outbox/probe";

/// Whether S3 is down, for one bucket.
pub(crate) type S3Down = Down<S3Probe>;

/// Asks S3 with an empty upload of [`PROBE_KEY`]: the relay already needs `s3:PutObject` on
/// `outbox/*`, and an upload is what must work again (S3 may answer `HeadBucket` while uploads
/// stall).
#[derive(Debug)]
pub(crate) struct S3Probe {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3Down {
    /// The state of `bucket`, probed every `probe_interval`, each probe given at most
    /// `probe_timeout`.
    pub(crate) fn for_bucket(
        client: aws_sdk_s3::Client,
        bucket: &str,
        (probe_interval, probe_timeout): (Duration, Duration),
        gauge: Gauge,
    ) -> Self {
        let probe = S3Probe {
            client,
            bucket: bucket.to_owned(),
        };
        Down::new(probe, probe_interval, probe_timeout, gauge)
    }
}

impl Probe for S3Probe {
    /// Whether S3 answers an upload of [`PROBE_KEY`] within `timeout`: it goes through, or is
    /// refused (a refusal is the bucket's breaker's to handle, not an outage).
    async fn answered(&self, timeout: Duration) -> bool {
        let call = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(PROBE_KEY)
            .body(ByteStream::from_static(b""))
            .send();
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(_)) => true,
            Ok(Err(aws_sdk_s3::error::SdkError::ServiceError(ctx))) => {
                !ctx.raw().status().is_server_error()
            }
            Ok(Err(_)) | Err(_) => false,
        }
    }

    fn waiting(&self, error: &str) -> String {
        format!(
            "not offloaded now: S3 is down (bucket `{}`): {error}",
            self.bucket
        )
    }

    fn log_down(&self, error: &str, every: Duration) {
        tracing::warn!(bucket = %self.bucket, error, probe_every_ms = every.as_millis() as u64,
            "S3 is down: offloaded events are put back without uploading, uncounted, and a small \
             upload once per probe interval finds it back");
    }

    fn log_up(&self) {
        tracing::info!(bucket = %self.bucket, "S3 answers again: offloading resumes");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::down::Gate;
    use outbox_core::FailureKind;
    use std::sync::Arc;
    use std::time::Instant;

    fn down_state() -> Arc<S3Down> {
        // No probe within the test.
        down_state_probing_every(Duration::from_secs(3600))
    }

    /// A state whose probe (to nowhere: no endpoint answers) runs every `interval`.
    fn down_state_probing_every(interval: Duration) -> Arc<S3Down> {
        let config = aws_sdk_s3::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_s3::config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                "test", "test", None, None, "test",
            ))
            .build();
        let client = aws_sdk_s3::Client::from_conf(config);
        Arc::new(S3Down::for_bucket(
            client,
            "b",
            (interval, Duration::from_millis(100)),
            Gauge::default(),
        ))
    }

    /// The probe runs once per interval even while its uploads hang: each is given at most the
    /// interval (black-box run: an unanswered probe pushed the next a whole call time-out later,
    /// one every 16 s with a 5 s interval).
    #[tokio::test]
    async fn the_probe_keeps_its_interval_while_s3_does_not_answer() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        // A black hole: connections are accepted and never answered.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                held.push(socket);
            }
        });
        let config = aws_sdk_s3::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_s3::config::Region::new("us-east-1"))
            .endpoint_url(format!("http://{addr}"))
            .force_path_style(true)
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                "test", "test", None, None, "test",
            ))
            .build();
        let client = aws_sdk_s3::Client::from_conf(config);
        let interval = Duration::from_millis(500);
        let d = Arc::new(S3Down::for_bucket(
            client,
            "b",
            (interval, Duration::from_secs(10)),
            Gauge::default(),
        ));
        d.down(Instant::now(), FailureKind::Timeout, "no answer");
        tokio::time::sleep(Duration::from_millis(2_300)).await;
        server.abort();
        let probes = accepted.load(Ordering::SeqCst);
        assert!(probes >= 3, "{probes} probes in 2.3 s at a 0.5 s interval");
        assert!(d.is_down());
    }

    /// A publisher dropped while S3 is down takes its probe with it (the probing task held the
    /// state, and probed on, for the rest of the process).
    #[tokio::test]
    async fn the_probe_ends_with_the_publisher() {
        let d = down_state_probing_every(Duration::from_millis(50));
        d.down(Instant::now(), FailureKind::Timeout, "no answer");
        let state = Arc::downgrade(&d);
        drop(d);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            state.upgrade().is_none(),
            "the probing task keeps the state alive"
        );
    }

    #[tokio::test]
    async fn down_puts_back_until_up_and_a_stale_failure_does_not_bring_it_back() {
        let d = down_state();
        assert!(matches!(d.gate(), Gate::Go));
        let started = Instant::now();
        d.down(started, FailureKind::Timeout, "no answer within 2000 ms");
        match d.gate() {
            Gate::Wait(f) => {
                assert_eq!(f.kind(), FailureKind::Timeout);
                assert!(f.message().contains("no answer within 2000 ms"), "{f:?}");
            }
            other => panic!("{other:?}"),
        }
        d.up();
        assert!(matches!(d.gate(), Gate::Go));
        // A call started before S3 came back fails late: stale, S3 stays up.
        assert!(d.recovered_since(started));
        d.down(started, FailureKind::Timeout, "no answer within 2000 ms");
        assert!(!d.is_down(), "a stale failure brought it back");
        d.down(Instant::now(), FailureKind::Timeout, "no answer");
        assert!(d.is_down());
    }
}
