//! S3 down: an upload failed without an answer (a time-out, unreachable) or with a 5xx, and a
//! `HeadBucket` after it was not answered either; or an upload in flight went unanswered, and so
//! did a `HeadBucket` its watch sent (`upload_watch.rs`); or uploads stall while S3 answers
//! `HeadBucket`.
//! While S3 is down, offloaded events are put back at once, uncounted, without an upload, so that
//! the other events of their batches go on; a task of its own tries a tiny upload
//! ([`PROBE_KEY`]) once per probe interval and ends the state when one goes through. (Each batch
//! with an offloaded event waited for an upload's time-out, about 15 s at the relay's defaults,
//! during an S3 outage; with a probe upload in a batch every interval, those batches overlapped
//! and held the heads of every aggregate they had claimed: black-box run.)
//!
//! Unlike the bucket's circuit breaker (S3 refusing: the bucket missing, access denied), being down
//! never dead-letters an event and moves no gauge: the events wait for S3, however long, and count
//! under `outbox_events_deferred_total` with the outage's reason.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use aws_sdk_s3::primitives::ByteStream;
use outbox_core::{FailureKind, PublishFailure};

/// The object the probe writes, empty, next to the offloaded payloads (whose keys are event ids).
pub(crate) const PROBE_KEY: &str = "outbox/probe";

/// Whether S3 is down, for one bucket. Shared by every `publish` of the publisher.
#[derive(Debug)]
pub(crate) struct S3Down {
    client: aws_sdk_s3::Client,
    bucket: String,
    probe_interval: Duration,
    /// How long the probe's upload may take (the call time-out).
    probe_timeout: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    down: Option<Down>,
    /// When S3 last came back from being down: a failure of a call started before that is
    /// stale, caught in the outage that ended then. (Not any answer: on a link too slow for one
    /// payload, the others' uploads go through meanwhile, and its time-out still counts.)
    recovered_at: Option<Instant>,
    /// Whether the probing task runs.
    probing: bool,
}

#[derive(Debug)]
struct Down {
    /// How the upload that found S3 down failed, and its error.
    kind: FailureKind,
    error: String,
}

/// What an upload may do now.
#[derive(Debug)]
pub(crate) enum Gate {
    /// S3 is not known to be down.
    Go,
    /// S3 is down: do not upload; put the event back with this failure.
    Wait(PublishFailure),
}

impl S3Down {
    pub(crate) fn new(
        client: aws_sdk_s3::Client,
        bucket: &str,
        probe_interval: Duration,
        probe_timeout: Duration,
    ) -> Self {
        S3Down {
            client,
            bucket: bucket.to_owned(),
            probe_interval,
            probe_timeout,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain values: a panic elsewhere cannot leave them half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks to upload now.
    pub(crate) fn gate(&self) -> Gate {
        match &self.lock().down {
            None => Gate::Go,
            Some(down) => Gate::Wait(PublishFailure::new(
                down.kind,
                format!(
                    "not offloaded now: S3 is down (bucket `{}`): {}",
                    self.bucket, down.error
                ),
            )),
        }
    }

    /// Whether S3 is known to be down.
    pub(crate) fn is_down(&self) -> bool {
        self.lock().down.is_some()
    }

    /// Whether S3 has come back from being down since `started`: a failure of a call started
    /// before is stale.
    pub(crate) fn recovered_since(&self, started: Instant) -> bool {
        self.lock().recovered_at.is_some_and(|at| at >= started)
    }

    /// S3 did not answer an upload started at `started` (or failed it with a 5xx), nor a
    /// `HeadBucket` after it; or it stalls uploads (see `upload_failure.rs`). Ignored when S3
    /// has come back since `started`: the outage the call was caught in is over. Outside a Tokio
    /// runtime (no task could probe) nothing changes.
    pub(crate) fn down(self: &Arc<Self>, started: Instant, kind: FailureKind, error: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut state = self.lock();
        if state.recovered_at.is_some_and(|at| at >= started) {
            return;
        }
        if state.down.is_none() {
            tracing::warn!(bucket = %self.bucket, error,
                probe_every_ms = self.probe_interval.as_millis() as u64,
                "S3 is down: offloaded events are put back without uploading, uncounted, and a \
                 small upload once per probe interval finds it back");
        }
        state.down = Some(Down {
            kind,
            error: error.to_owned(),
        });
        if !state.probing {
            state.probing = true;
            runtime.spawn(Self::probe_until_up(Arc::downgrade(self)));
        }
    }

    /// S3 answered (an upload went through, or a `HeadBucket` was answered).
    pub(crate) fn up(&self) {
        let mut state = self.lock();
        if state.down.take().is_some() {
            state.recovered_at = Some(Instant::now());
            tracing::info!(bucket = %self.bucket, "S3 answers again: offloading resumes");
        }
    }

    /// Once per probe interval, on a fixed schedule, a small upload given at most the interval
    /// (an unanswered one pushed the next a whole call time-out later: black-box run); ends when
    /// S3 is no longer down, or when the publisher is gone (it held the state, and probed on, for
    /// the rest of the process).
    async fn probe_until_up(down: Weak<Self>) {
        let Some(every) = down.upgrade().map(|d| d.probe_interval) else {
            return;
        };
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(this) = down.upgrade() else {
                return;
            };
            this.probe_once().await;
            let mut state = this.lock();
            if state.down.is_none() {
                state.probing = false;
                return;
            }
        }
    }

    /// One probe: S3 is up again once it answers the probe's upload.
    async fn probe_once(&self) {
        if self.lock().down.is_some() && self.upload_answered().await {
            self.up();
        }
    }

    /// Whether S3 answers an upload of [`PROBE_KEY`] within the probe's time-out (the call
    /// time-out, at most the probe interval): it goes
    /// through, or is refused (a refusal is the bucket's breaker's to handle, not an outage).
    async fn upload_answered(&self) -> bool {
        let call = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(PROBE_KEY)
            .body(ByteStream::from_static(b""))
            .send();
        match tokio::time::timeout(self.probe_timeout.min(self.probe_interval), call).await {
            Ok(Ok(_)) => true,
            Ok(Err(aws_sdk_s3::error::SdkError::ServiceError(ctx))) => {
                !ctx.raw().status().is_server_error()
            }
            Ok(Err(_)) | Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        Arc::new(S3Down::new(
            client,
            "b",
            interval,
            Duration::from_millis(100),
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
        let d = Arc::new(S3Down::new(client, "b", interval, Duration::from_secs(10)));
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
