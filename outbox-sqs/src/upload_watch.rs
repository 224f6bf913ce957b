//! The watch over an upload in flight (see `watch.rs`): S3 down is found a few seconds into an
//! outage, not at the upload's time-out. An upload not answered after [`WATCH_AFTER`] is checked
//! with a `HeadBucket`, and again every [`WATCH_EVERY`] while it runs; when S3 answers neither,
//! and nothing else for a while, or when another upload has found S3 down meanwhile, the upload is
//! given up (its future dropped: a multipart upload is aborted), S3 counts as down and the event
//! is put back, uncounted. While S3 answers, the upload goes on to its own time-out (a large
//! payload on a slow link, or S3 answering slowly).
//!
//! Why: the batch that met an outage waited for its upload's time-out (the call time-out, 10 s
//! by default, and 1 s per MiB) and a `HeadBucket` of up to 3 s; at a steady stream that batch
//! holds the heads of most aggregates, and per-aggregate order made all of them wait about 15 s
//! at each outage's onset (black-box run).

use std::time::{Duration, Instant};

use bytes::Bytes;

use outbox_core::{FailureKind, PublishFailure};

use crate::offload::{Offloaded, Offloader};
use crate::s3::{Budget, PutFailed};
use crate::watch::{Looks, WATCH_AFTER, Watched};

/// How often S3 is asked again while an upload it answered about runs on.
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(3);

/// How a watched upload ended without going through.
#[derive(Debug)]
pub(crate) enum Stopped {
    /// The upload failed on its own (see `upload_failure.rs`).
    Failed(PutFailed),
    /// Given up: S3 is down. The event is put back, uncounted, with this failure.
    Down(PublishFailure),
}

impl Offloader {
    /// [`put`](Offloader::put), watched: given up once S3 is found down while it runs.
    /// `started`: when the upload started.
    pub(crate) async fn put_watched(
        &self,
        event_id: &str,
        payload: Bytes,
        budget: Budget,
        started: Instant,
    ) -> Result<Offloaded, Stopped> {
        // On the heap: held across the watch's awaits, the upload's future inline overflowed a
        // test thread's 2 MiB stack in a debug build (a 20 MiB multipart upload).
        let payload_len = payload.len();
        let upload = Box::pin(self.put(event_id, payload, budget));
        let silent_after = self.down.silent_after();
        let looks = Looks {
            first: WATCH_AFTER,
            every: WATCH_EVERY,
            silent: silent_after.min(budget.next(payload_len).saturating_sub(WATCH_AFTER)),
        };
        let silent = |ran: Duration| {
            format!(
                "S3 answered neither an upload to bucket `{}` within {} ms, nor a HeadBucket, nor \
                 anything for {} ms",
                self.bucket,
                ran.as_millis(),
                silent_after.as_millis()
            )
        };
        match self
            .down
            .watch(upload, started, looks, |t| self.answers(t), silent)
            .await
        {
            Watched::Done(done) => done.map_err(Stopped::Failed),
            Watched::Found(failure) => Err(Stopped::Down(failure)),
            Watched::Silent(error) => Err(Stopped::Down(PublishFailure::new(
                FailureKind::Timeout,
                format!("not offloaded now: {error}"),
            ))),
        }
    }
}
