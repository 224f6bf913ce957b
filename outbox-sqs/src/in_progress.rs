//! The outcomes of events put back while work for them goes on without their publish (see
//! `detached.rs`): uploads of their payloads to S3, and batch calls carrying them.

use std::time::Duration;

use outbox_core::{FailureKind, PublishFailure, PublishOutcome};

use crate::detached::{IN_PROGRESS_PUT_BACK, Remembered};
use crate::offload::Offloaded;
use crate::publisher::Queue;

/// What an upload came to: the pointer, or the outcome of its event.
pub(crate) type UploadResult = Result<Offloaded, PublishOutcome>;

/// A pointer stays for the event's later claims (its message may not be sent this time: held
/// back, or its call failing); a failure is taken.
impl Remembered for UploadResult {
    fn stays(&self) -> bool {
        self.is_ok()
    }
    fn panicked() -> Self {
        Err(PublishOutcome::retry(
            FailureKind::Panic,
            "the upload of its payload to S3 panicked",
        ))
    }
}

/// What a batch call that went on without its publish did with an event: taken once.
impl Remembered for PublishOutcome {
    fn stays(&self) -> bool {
        false
    }
    fn panicked() -> Self {
        PublishOutcome::retry(FailureKind::Panic, "the batch call carrying it panicked")
    }
}

/// The longest an event is put back while the calls to its destination go on (its next claim
/// looks again then): its own call's, or a free slot's turn.
pub(crate) const CALL_PUT_BACK_AT_MOST: Duration = Duration::from_secs(60);

/// The longest an event bound for a destination whose calls hold every slot is put back.
const SLOT_PUT_BACK_AT_MOST: Duration = Duration::from_secs(10);

/// An event put back, uncounted, for [`IN_PROGRESS_PUT_BACK`] because of `why`.
fn put_back(why: String) -> PublishOutcome {
    put_back_for(why, IN_PROGRESS_PUT_BACK)
}

/// An event put back, uncounted, for `put_back` because of `why`.
fn put_back_for(why: String, put_back: Duration) -> PublishOutcome {
    PublishOutcome::Unavailable(
        PublishFailure::new(FailureKind::InProgress, why).with_put_back(put_back),
    )
}

/// How long the destination's last answered batch call took, at least
/// [`IN_PROGRESS_PUT_BACK`] (the time unknown: that), at most `at_most`.
fn pace(queue: Option<&Queue>, at_most: Duration) -> Duration {
    queue
        .and_then(|q| q.call_pace.last())
        .unwrap_or(IN_PROGRESS_PUT_BACK)
        .clamp(IN_PROGRESS_PUT_BACK, at_most)
}

/// The outcome of an event whose batch call to `queue` goes on without its publish, after
/// `waited` of the call's `call_timeout`: put back until the call cannot be running any more
/// (the rest of its time-out; at least [`IN_PROGRESS_PUT_BACK`], at most
/// [`CALL_PUT_BACK_AT_MOST`]). The relay marks it published as soon as the call gets it accepted
/// ([`Publisher::settled`](outbox_core::Publisher::settled)); its next claim takes any other
/// answer.
///
/// Why: put back for a second, or for as long as the destination's last call took, another relay
/// claimed it when its call ran longer and sent it again (black-box run: 686 duplicates of 2 000
/// events with two relays and a queue answering in 4-7 s), and the relay itself claimed and put
/// it back again every second until its call ended (23 put-backs per event published).
pub(crate) fn call_goes_on(
    queue: &Queue,
    waited: Duration,
    call_timeout: Duration,
) -> PublishOutcome {
    put_back_for(
        format!(
            "its {} call to {} `{}` was not answered within {} ms; it goes on, and the event is \
             marked published when it is accepted, or its next claim takes the call's answer",
            queue.operation(),
            queue.kind,
            queue.url,
            waited.as_millis()
        ),
        call_timeout
            .saturating_sub(waited)
            .clamp(IN_PROGRESS_PUT_BACK, CALL_PUT_BACK_AT_MOST),
    )
}

/// How long an event claimed again while a call to `queue` carrying it (or an earlier event of
/// its FIFO message group) still runs is put back: half as long as the destination's last
/// answered batch call took (the call started at least a second ago), at least [`IN_PROGRESS_PUT_BACK`].
fn still_runs_put_back(queue: Option<&Queue>) -> Duration {
    (pace(queue, CALL_PUT_BACK_AT_MOST) / 2).max(IN_PROGRESS_PUT_BACK)
}

/// The outcome of an event claimed again while the batch call to `queue` carrying it still
/// runs.
pub(crate) fn call_still_runs(queue: Option<&Queue>) -> PublishOutcome {
    put_back_for(
        "the batch call carrying it still runs; the event's next claim takes its answer".to_owned(),
        still_runs_put_back(queue),
    )
}

/// The outcome of an event behind one of its FIFO message group whose batch call to `queue`
/// goes on: put back with it.
pub(crate) fn behind_a_call(group: &str, queue: Option<&Queue>) -> PublishOutcome {
    put_back_for(
        format!(
            "not sent: the batch call carrying an earlier event of message group `{group}` goes on"
        ),
        still_runs_put_back(queue),
    )
}

/// The outcome of an event bound for `queue` while `running` calls to it go on without their
/// publishes, and its calls hold every in-flight slot they may.
///
/// Put back for as long as the destination's last answered call took (1-10 s): about when a
/// slot frees. Put back for a second, a backlog bound for a slow destination was claimed and put
/// back about once a second per event until its turn came (black-box run: 27 put-backs per event
/// published to a queue answering in 4-7 s beside a fast one).
pub(crate) fn calls_go_on(queue: &Queue, running: usize) -> PublishOutcome {
    put_back_for(
        format!(
            "not sent: {running} call(s) to {} `{}` go on without their publishes, and its calls hold \
         every in-flight slot a destination may (half of OUTBOX_SQS_MAX_IN_FLIGHT with several \
         destinations, all of it with one); it is sent once fewer run",
            queue.kind, queue.url
        ),
        pace(Some(queue), SLOT_PUT_BACK_AT_MOST),
    )
}

/// The outcome of an event whose chain of calls stopped before its call started, its publish
/// gone on without the chain: sent at its next claim.
pub(crate) fn not_sent_publish_went_on() -> PublishOutcome {
    put_back("not sent: its publish went on without the calls before it".to_owned())
}

/// The outcome of an event whose upload goes on without its publish: put back for
/// [`IN_PROGRESS_PUT_BACK`], uncounted.
pub(crate) fn still_uploading(bytes: usize, waited: Duration) -> PublishOutcome {
    put_back(format!(
        "the upload of its payload ({bytes} bytes) to S3 was not done within {} ms; it goes on, \
         and the event is sent at its next claim once it is done",
        waited.as_millis()
    ))
}

/// The outcome of an event claimed again while its upload still runs: put back for
/// [`IN_PROGRESS_PUT_BACK`], uncounted.
pub(crate) fn uploading_still(bytes: usize) -> PublishOutcome {
    put_back(format!(
        "the upload of its payload ({bytes} bytes) to S3 still runs; the event is sent at its \
         next claim once it is done"
    ))
}

/// The outcome of an event behind one of its FIFO message group whose upload goes on: put back
/// with it, uncounted.
pub(crate) fn behind_an_upload(group: &str) -> PublishOutcome {
    put_back(format!(
        "not sent: the upload of an earlier event of message group `{group}` goes on"
    ))
}

/// Whether `outcome` puts its event back while its upload or call goes on.
pub(crate) fn in_progress(outcome: &PublishOutcome) -> bool {
    matches!(outcome, PublishOutcome::Unavailable(f) if f.kind() == FailureKind::InProgress)
}

/// The outcome of an event that found every upload slot busy for the whole wait: put back,
/// and warned about (an outage of sorts: the uploads need more slots, or S3 is too slow).
pub(crate) fn no_upload_slot(waited: Duration) -> PublishOutcome {
    PublishOutcome::Unavailable(
        PublishFailure::new(
            FailureKind::NotSent,
            format!(
                "not offloaded now: every S3 upload slot was busy (waited {} ms; uploads running \
                 slowly: raise OUTBOX_SQS_MAX_UPLOADS, or S3 is too slow; the running uploads \
                 hold at most 256 MiB of payloads between them)",
                waited.as_millis()
            ),
        )
        .with_put_back(IN_PROGRESS_PUT_BACK),
    )
}
