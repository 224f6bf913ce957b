//! One offloaded payload's upload: started in a task of its own, waited for at most the
//! publisher's offload wait (see `detached.rs`), and what its result means for the event.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use outbox_core::{ClaimedEvent, FailureKind, PublishFailure, PublishOutcome};
use uuid::Uuid;

use crate::detached::Known;
use crate::in_progress::{UploadResult, no_upload_slot, still_uploading, uploading_still};
use crate::offload::{Offloader, refused};
use crate::publisher::SqsPublisher;
use crate::s3::Budget;
use crate::upload_slots::UploadSlot;
use crate::upload_watch::Stopped;

impl SqsPublisher {
    /// Uploads the payload of `event` and returns its pointer, or the outcome of the event when
    /// it cannot be sent now: the upload failed, the deadline is too near to start it, or it
    /// was not done within the offload wait (it goes on; the event is put back).
    pub(crate) async fn offload_one(
        &self,
        offload: &Arc<Offloader>,
        event: &ClaimedEvent,
        deadline: Option<tokio::time::Instant>,
    ) -> UploadResult {
        let timeout = self.inner.call_timeout;
        // The uploads must leave the message's own call its time before the deadline.
        let until = deadline.map(|d| d.checked_sub(timeout).unwrap_or(d));
        if self.late(until) {
            return Err(too_late());
        }
        // The wait ends with the deadline at the latest: the upload's own budget ends a call
        // time-out before it, so an upload given up there is still waited for.
        let now = tokio::time::Instant::now();
        let wait_end = now
            .checked_add(offload.pace.wait(offload.offload_wait))
            .map_or(deadline, |end| Some(deadline.map_or(end, |d| d.min(end))));
        let waited = || now.elapsed();
        let bytes = event.payload().len();
        let slot = match wait_end {
            // Not waiting at all (uploads outlast the wait): a slot free now, or none.
            Some(end) if end <= now => offload.slots.try_acquire(bytes),
            Some(end) => tokio::time::timeout_at(end, offload.slots.acquire(bytes))
                .await
                .ok()
                .flatten(),
            None => offload.slots.acquire(bytes).await,
        };
        let Some(permit) = slot else {
            return Err(no_upload_slot(waited()));
        };
        if self.late(until) {
            // The slot came too late to start an upload in time (a long offload wait).
            return Err(too_late());
        }
        let Some((started, done)) = offload.detached.start(event.id) else {
            return Err(uploading_still(event.payload().len()));
        };
        let budget = Budget {
            call: timeout,
            until,
        };
        let task = Arc::clone(offload);
        let payload = Bytes::copy_from_slice(event.payload().as_bytes());
        let id = event.id;
        let upload = async move {
            let began = Instant::now();
            let result = task.upload(id, payload, budget, permit).await;
            task.pace.ended(bytes, began.elapsed(), task.offload_wait);
            started.finish(result);
        };
        // Not awaited: it goes on whether the publish waits for it or not.
        drop(tokio::spawn(upload));
        match wait_end {
            Some(end) => {
                let _ = tokio::time::timeout_at(end, done).await;
            }
            None => {
                let _ = done.await;
            }
        }
        match offload.detached.take(event.id) {
            Known::Done(result) => result,
            Known::Running | Known::Unknown => {
                tracing::debug!(
                    event_id = %event.id, waited_ms = waited().as_millis() as u64,
                    "the upload of an offloaded payload goes on without its publish; the event \
                     is put back and sent at its next claim"
                );
                Err(still_uploading(event.payload().len(), waited()))
            }
        }
    }
}

/// The outcome of an event whose upload would not end before the publish deadline: put back,
/// uncounted.
fn too_late() -> PublishOutcome {
    PublishOutcome::unavailable(
        FailureKind::NotSent,
        "not offloaded to S3: the relay's publish deadline would pass first",
    )
}

impl Offloader {
    /// Writes `payload` of event `id` (watched: given up once S3 is found down) and tells what
    /// becomes of the event: its pointer; put back, uncounted (S3 down, the first time-out of a
    /// suspected slow link); a counted attempt; or the bucket's breaker's refusal.
    pub(crate) async fn upload(
        &self,
        id: Uuid,
        payload: Bytes,
        budget: Budget,
        permit: UploadSlot,
    ) -> UploadResult {
        let started = Instant::now();
        let bytes = payload.len();
        let key = id.hyphenated().to_string();
        let put = self.put_watched(&key, payload, budget, started).await;
        // Before any probe, which may use up the rest of the budget: an unanswered probe
        // after an unanswered upload is an outage, not an upload too long for the publish
        // timeout (black-box run: S3 black-holed, each event was charged an attempt).
        let spent = budget.spent();
        let failed = match put {
            Ok(pointer) => {
                self.breaker.succeeded();
                self.down.up();
                self.slow.ended(id);
                return Ok(pointer);
            }
            Err(Stopped::Down(failure)) => {
                // Given up by the watch: S3 is down.
                self.slow.ended(id);
                return Err(PublishOutcome::Unavailable(failure));
            }
            Err(Stopped::Failed(failed)) => failed,
        };
        if failed.kind == FailureKind::Destination {
            self.slow.ended(id);
            // Its text, not its chain: the chain repeats it in the SDK's debug dump.
            let message = format!("S3 refused the upload of the payload: {}", failed.error);
            let dead_letter = self.breaker.failed(&message, false);
            let reason = match self.breaker.broken_for() {
                Some((for_, _)) if dead_letter => self.breaker.reason(for_, true, &message),
                _ => message,
            };
            let failure = PublishFailure::new(FailureKind::Destination, reason);
            return Err(refused(failure, dead_letter));
        }
        // A probe below is no upload: it does not hold the slot.
        drop(permit);
        // The outcome carries the error: the relay logs it (once per outage for an event put
        // back; the first few of a batch for a counted attempt).
        tracing::debug!(
            bucket = %self.bucket, event_id = %key, error = %failed.error,
            "S3 offload failed; the event is not sent now"
        );
        Err(self
            .outcome(id, bytes, started, failed, spent, budget)
            .await)
    }
}
