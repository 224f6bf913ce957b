//! What a failed upload of an offloaded payload means for its event: put back uncounted (S3 down,
//! or the first time-out of a suspected slow link) or a counted attempt (a payload the link or
//! the publish timeout cannot carry: it ends as a visible dead letter instead of being uploaded
//! again on every claim). A refusal of the bucket is the breaker's (see `offload.rs`).

use std::time::{Duration, Instant};

use outbox_core::{FailureKind, PublishOutcome};
use uuid::Uuid;

use crate::config::ENV_CALL_TIMEOUT_MS;
use crate::offload::Offloader;
use crate::s3::{Budget, PutFailed};

/// The longest `HeadBucket` run in the background after an upload the deadline cut short: well
/// under the relay's 5 s before it claims a put-back event again, so that the next claim knows.
const BACKGROUND_PROBE: Duration = Duration::from_secs(2);

/// The longest `HeadBucket` after a failed upload: a tiny call, which a working S3 answers at
/// once even on a slow link. (It had the rest of the upload's budget: at the black hole's onset
/// the batch waited for the upload's time-out and about 10 s more before S3 counted as down.)
const PROBE_AFTER_FAILURE: Duration = Duration::from_secs(3);

/// An upload that timed out before carrying its payload at this rate (bytes per second, over the
/// time it was given) was stalled, not on a link too slow for it: no link a relay runs on is
/// that slow. Never a counted attempt (black-box run: 20 KB uploads black-holed while
/// `HeadBucket` answered, 1.8 KB/s over their 11 s, were dead-lettered as too large for the link).
const STALLED_BELOW_BYTES_PER_SEC: f64 = 32.0 * 1024.0;

impl Offloader {
    /// The outcome of the event `id` (of `bytes`) whose upload, started at `started`, failed with
    /// `failed`; `spent`: the upload's budget was used up when it failed (the deadline cut it
    /// short or ended it).
    pub(crate) async fn outcome(
        &self,
        id: Uuid,
        bytes: usize,
        started: Instant,
        failed: PutFailed,
        spent: bool,
        budget: Budget,
    ) -> PublishOutcome {
        let PutFailed {
            kind,
            error,
            answered,
        } = failed;
        let error = error.to_string();
        if !matches!(
            kind,
            FailureKind::Timeout | FailureKind::Unreachable | FailureKind::Broker
        ) {
            // This request refused (a slow link's `RequestTimeout`, credentials): an attempt.
            self.slow.ended(id);
            return PublishOutcome::retry(kind, error);
        }
        if self.down.recovered_since(started) {
            // Caught in an outage that ended while it ran.
            return PublishOutcome::unavailable(kind, error);
        }
        let given = budget.call_time(bytes).as_secs_f64();
        let stalled = bytes as f64 / given.max(0.001) < STALLED_BELOW_BYTES_PER_SEC;
        let too_long = || {
            PublishOutcome::retry(
                kind,
                format!(
                    "the upload of {bytes} bytes to S3 did not finish within the relay's publish \
                     timeout (raise it for payloads this large): {error}"
                ),
            )
        };
        if kind == FailureKind::Timeout && spent && answered {
            // S3 answered the upload's first calls, and the whole budget went on it.
            self.slow.ended(id);
            return too_long();
        }
        if spent {
            // Cut short by the deadline before any answer: S3 down, or the link too slow for the
            // payload. A `HeadBucket` in the background tells the next claim (the time left
            // here is the message's call's); meanwhile the first such time-out is not counted.
            if self.down.is_down() {
                return PublishOutcome::unavailable(kind, error);
            }
            self.probe_in_background(started, kind, &error);
            return if kind == FailureKind::Timeout && !stalled && self.slow.timed_out(id) {
                too_long()
            } else {
                PublishOutcome::unavailable(kind, error)
            };
        }
        if !self.answers(budget.next(0).min(PROBE_AFTER_FAILURE)).await {
            self.slow.ended(id);
            if !self.down.heard_within(self.down.silent_after()) {
                // Neither the upload, nor a `HeadBucket` right after, nor anything for a while:
                // S3 is down. (Heard from lately, it is slow, not down, as the watch has it.)
                self.down.down(started, kind, &error);
            }
            return PublishOutcome::unavailable(kind, error);
        }
        self.down.up();
        if kind != FailureKind::Timeout {
            // Unreachable or a 5xx once, while S3 answers: a transient failure.
            self.slow.ended(id);
            return PublishOutcome::unavailable(kind, error);
        }
        // The bucket answers: a probe that timed out on the link closes its breaker.
        self.breaker.succeeded();
        if stalled {
            // Uploads stall while S3 answers `HeadBucket`: down, until a probe upload goes
            // through (each claim waited for the upload's time-out again: black-box run).
            self.slow.ended(id);
            self.down.down(started, kind, &error);
            return PublishOutcome::unavailable(
                kind,
                format!(
                    "the upload of {bytes} bytes to S3 timed out while S3 answers (HeadBucket): \
                     stalled, not a link too slow for it; not counted: {error}"
                ),
            );
        }
        if self.slow.timed_out(id) {
            PublishOutcome::retry(
                kind,
                format!(
                    "the upload of {bytes} bytes to S3 timed out twice in a row while S3 answers \
                     (HeadBucket): the link is too slow for a payload this large; raise \
                     {ENV_CALL_TIMEOUT_MS} (each S3 call is given it and 1 s more per MiB begun) \
                     and the relay's publish timeout with it (the uploads must end a call time-out \
                     before that): {error}"
                ),
            )
        } else {
            PublishOutcome::unavailable(
                kind,
                format!(
                    "the upload of {bytes} bytes to S3 timed out while S3 answers (HeadBucket); \
                     not counted the first time (S3 may have just come back from an outage the \
                     upload was caught in): {error}"
                ),
            )
        }
    }

    /// A `HeadBucket` run in the background: S3 down when it is not answered.
    fn probe_in_background(&self, started: Instant, kind: FailureKind, error: &str) {
        let (client, bucket, down) = (self.client.clone(), self.bucket.clone(), self.down.clone());
        let error = error.to_owned();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if crate::s3::answers(&client, &bucket, BACKGROUND_PROBE).await {
                    down.up();
                } else if !down.heard_within(down.silent_after()) {
                    down.down(started, kind, &error);
                }
            });
        }
    }
}
