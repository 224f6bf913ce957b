//! Writing offloaded payloads to S3: one `PutObject`, or a multipart upload for large payloads;
//! and the start-up `HeadBucket`.

use std::time::Duration;

use aws_sdk_s3::operation::head_bucket::HeadBucketError;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use bytes::Bytes;
use outbox_core::FailureKind;

use crate::error::{Error, ErrorKind, Result};
use crate::offload::{Offloaded, Offloader, offload_key, pointer_body};
use crate::sdk_error::{sdk_error, timeout_error};

/// Payloads larger than this are uploaded in parts of this size (S3 wants parts of at least
/// 5 MiB but the last; a single `PutObject` takes up to 5 GiB, but smaller requests retry cheaper
/// and fit the request limits of S3-compatible servers).
pub(crate) const MULTIPART_PART_BYTES: usize = 8 * 1024 * 1024;

/// How much longer than the call time-out an upload may take, per MiB it carries (each MiB
/// begun): a part of 8 MiB gets 8 s more, so that a link of about 1 MiB/s is slow, not broken.
const PER_MIB: Duration = Duration::from_secs(1);

/// A failed S3 call: the failure kind for the event's outcome, and the error.
type Failed = (FailureKind, Error);

/// A failed upload: how it failed, and whether S3 answered one of its calls first (a multipart
/// upload's creation or a part). Only then does a time-out at the publish deadline say that the
/// upload needs longer than the publish timeout: with no call answered, S3 may be down.
#[derive(Debug)]
pub(crate) struct PutFailed {
    pub(crate) kind: FailureKind,
    pub(crate) error: Error,
    pub(crate) answered: bool,
}

impl PutFailed {
    fn new((kind, error): Failed, answered: bool) -> Self {
        PutFailed {
            kind,
            error,
            answered,
        }
    }
}

/// The failure kind of an S3 call's error: time-out, unreachable, 5xx (`Broker`), a refusal of
/// every upload to the bucket (`Destination`: see [`refuses_the_bucket`]), anything else
/// (`Other`: this request refused — a slow link's `RequestTimeout`, a bad digest, credentials or
/// a clock out of date).
pub(crate) fn kind_of<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> FailureKind {
    match e {
        SdkError::TimeoutError(_) => FailureKind::Timeout,
        SdkError::DispatchFailure(_) => FailureKind::Unreachable,
        SdkError::ServiceError(ctx) if ctx.raw().status().is_server_error() => FailureKind::Broker,
        SdkError::ServiceError(ctx) if refuses_the_bucket(ctx.err().code()) => {
            FailureKind::Destination
        }
        _ => FailureKind::Other,
    }
}

/// Whether an S3 error code refuses every upload to the bucket, whichever the object: the bucket
/// missing, writing to it denied (a policy, a disabled account), its KMS key unusable. Such a
/// refusal opens the bucket's circuit breaker (see `offload.rs`).
fn refuses_the_bucket(code: Option<&str>) -> bool {
    code.is_some_and(|c| {
        matches!(c, "NoSuchBucket" | "AccessDenied" | "AllAccessDisabled") || c.starts_with("KMS")
    })
}

/// How long an offload's S3 calls may take: each at most `call` (the call timeout) and a second
/// more per MiB it uploads (as the consumer reads them back), and all of them together no later
/// than `until` (what the relay's publish deadline leaves after the offload, for the message's own
/// call).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub(crate) call: Duration,
    pub(crate) until: Option<tokio::time::Instant>,
}

impl Budget {
    /// The time-out of the next call, which uploads `bytes`.
    pub(crate) fn next(&self, bytes: usize) -> Duration {
        // Each MiB begun: 1.9 MiB gets 2 s more, not 1.
        let call = self.call_time(bytes);
        self.until.map_or(call, |until| {
            call.min(until.saturating_duration_since(tokio::time::Instant::now()))
        })
    }

    /// The time a call uploading `bytes` is given, the deadline apart.
    pub(crate) fn call_time(&self, bytes: usize) -> Duration {
        let mib = u32::try_from(bytes.div_ceil(1024 * 1024)).unwrap_or(u32::MAX);
        self.call.saturating_add(PER_MIB.saturating_mul(mib))
    }

    /// Whether the whole budget is used up.
    pub(crate) fn spent(&self) -> bool {
        self.until
            .is_some_and(|until| tokio::time::Instant::now() >= until)
    }
}

/// Runs `f` when dropped, unless [`disarm`](Self::disarm)ed first: what must happen however the
/// holder ends, its future dropped half-way included.
struct DropGuard<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> DropGuard<F> {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for DropGuard<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// Runs one S3 call within `timeout`.
async fn within<T, E>(
    what: &str,
    timeout: Duration,
    call: impl Future<Output = std::result::Result<T, SdkError<E, HttpResponse>>>,
) -> std::result::Result<T, Failed>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e)) => Err((kind_of(&e), sdk_error(what, e))),
        Err(_) => Err((FailureKind::Timeout, timeout_error(what, timeout))),
    }
}

impl Offloader {
    /// Writes `payload` at the event's key and returns the pointer; the S3 calls within `budget`.
    pub(crate) async fn put(
        &self,
        event_id: &str,
        payload: Bytes,
        budget: Budget,
    ) -> std::result::Result<Offloaded, PutFailed> {
        let key = offload_key(event_id);
        let payload_len = payload.len();
        if payload_len > MULTIPART_PART_BYTES {
            self.put_in_parts(&key, payload, budget).await?;
        } else {
            let call = self
                .client
                .put_object()
                .bucket(&self.bucket)
                .key(&key)
                .content_type("application/json")
                .body(ByteStream::from(payload))
                .send();
            let what = format!(
                "PutObject of an offloaded payload to bucket `{}`",
                self.bucket
            );
            within(&what, budget.next(payload_len), call)
                .await
                .map_err(|f| PutFailed::new(f, false))?;
        }
        Ok(Offloaded {
            body: pointer_body(&self.bucket, &key),
            payload_len,
        })
    }

    /// A multipart upload; aborted (best effort) when a part or the completion fails, or when
    /// this future is dropped half-way (the relay giving up on a late publish).
    async fn put_in_parts(
        &self,
        key: &str,
        payload: Bytes,
        budget: Budget,
    ) -> std::result::Result<(), PutFailed> {
        let what = format!(
            "multipart upload of an offloaded payload to bucket `{}`",
            self.bucket
        );
        let call = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/json")
            .send();
        let created = within(&what, budget.next(0), call)
            .await
            .map_err(|f| PutFailed::new(f, false))?;
        // Answered: S3 is slow, not silent, while the parts go (the watch).
        self.down.heard();
        let Some(upload_id) = created.upload_id().map(str::to_owned) else {
            let error = Error::new(
                ErrorKind::Service,
                format!("{what}: no upload id in the answer"),
            );
            return Err(PutFailed::new((FailureKind::Broker, error), true));
        };
        // Best effort: an upload left behind is removed by the bucket's lifecycle rule
        // (`AbortIncompleteMultipartUpload`).
        let abort = {
            let call = self
                .client
                .abort_multipart_upload()
                .bucket(&self.bucket)
                .key(key)
                .upload_id(&upload_id);
            let timeout = budget.call;
            move || {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        let _ = tokio::time::timeout(timeout, call.send()).await;
                    });
                }
            }
        };
        let unfinished = DropGuard(Some(abort));
        // The creation was answered: S3 is up, whatever becomes of the parts.
        let result = self
            .upload_parts(key, &upload_id, payload, budget, &what)
            .await
            .map_err(|f| PutFailed::new(f, true));
        if result.is_ok() {
            unfinished.disarm();
        }
        result
    }

    async fn upload_parts(
        &self,
        key: &str,
        upload_id: &str,
        payload: Bytes,
        budget: Budget,
        what: &str,
    ) -> std::result::Result<(), Failed> {
        let mut done = CompletedMultipartUpload::builder();
        // Parts share the payload's buffer: no copy.
        let parts = (0..payload.len())
            .step_by(MULTIPART_PART_BYTES)
            .map(|start| payload.slice(start..payload.len().min(start + MULTIPART_PART_BYTES)));
        for (n, chunk) in parts.enumerate() {
            let len = chunk.len();
            let number = i32::try_from(n + 1).unwrap_or(i32::MAX);
            let call = self
                .client
                .upload_part()
                .bucket(&self.bucket)
                .key(key)
                .upload_id(upload_id)
                .part_number(number)
                .body(ByteStream::from(chunk))
                .send();
            let part = within(what, budget.next(len), call).await?;
            self.down.heard();
            let mut completed = CompletedPart::builder().part_number(number);
            if let Some(tag) = part.e_tag() {
                completed = completed.e_tag(tag);
            }
            done = done.parts(completed.build());
        }
        let call = self
            .client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload_id)
            .multipart_upload(done.build())
            .send();
        within(what, budget.next(0), call).await.map(|_| ())
    }

    /// Whether S3 answers a `HeadBucket` on the offload bucket within `timeout`: with the bucket's
    /// metadata or with a refusal (403, 404), anything but a 5xx. A probe after a failed upload:
    /// S3 answering says the upload failed on its own (a link too slow for it), not S3 down.
    pub(crate) async fn answers(&self, timeout: Duration) -> bool {
        answers(&self.client, &self.bucket, timeout).await
    }

    /// `HeadBucket` on the offload bucket: it exists and the credentials reach it.
    pub(crate) async fn check(&self, timeout: Duration) -> Result<()> {
        let call = self.client.head_bucket().bucket(&self.bucket).send();
        let what = format!("HeadBucket on offload bucket `{}`", self.bucket);
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(SdkError::ServiceError(ctx)))
                if matches!(ctx.err(), HeadBucketError::NotFound(_))
                    || ctx.raw().status().as_u16() == 404 =>
            {
                Err(Error::new(
                    ErrorKind::BucketNotFound,
                    format!("{what}: the bucket does not exist"),
                ))
            }
            Ok(Err(e)) => Err(sdk_error(&what, e)),
            Err(_) => Err(timeout_error(&what, timeout)),
        }
    }
}

/// [`Offloader::answers`], for a probe of its own (run in the background).
pub(crate) async fn answers(client: &aws_sdk_s3::Client, bucket: &str, timeout: Duration) -> bool {
    match tokio::time::timeout(timeout, client.head_bucket().bucket(bucket).send()).await {
        Ok(Ok(_)) => true,
        Ok(Err(SdkError::ServiceError(ctx))) => !ctx.raw().status().is_server_error(),
        Ok(Err(_)) | Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn an_unfinished_upload_is_aborted_however_it_ends_a_finished_one_never() {
        let aborts = AtomicUsize::new(0);
        let abort = || {
            aborts.fetch_add(1, Ordering::Relaxed);
        };
        // Finished: disarmed.
        DropGuard(Some(abort)).disarm();
        assert_eq!(aborts.load(Ordering::Relaxed), 0);
        // Failed: dropped armed.
        drop(DropGuard(Some(abort)));
        assert_eq!(aborts.load(Ordering::Relaxed), 1);
        // Its future dropped half-way (the relay gave up on a late publish).
        let upload = async {
            let _unfinished = DropGuard(Some(abort));
            std::future::pending::<()>().await;
        };
        let _ = tokio::time::timeout(Duration::from_millis(10), upload).await;
        assert_eq!(aborts.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn the_budget_caps_each_call_and_ends_at_its_deadline() {
        let now = tokio::time::Instant::now();
        let free = Budget {
            call: Duration::from_secs(10),
            until: None,
        };
        assert_eq!(free.next(0), Duration::from_secs(10));
        // A second more per MiB uploaded: an 8 MiB part on a 1 MiB/s link is not a time-out.
        assert_eq!(free.next(8 * 1024 * 1024), Duration::from_secs(18));
        // Each MiB begun counts.
        assert_eq!(free.next(2_000_009), Duration::from_secs(12));
        assert_eq!(free.next(1), Duration::from_secs(11));
        assert!(!free.spent());
        let short = Budget {
            call: Duration::from_secs(10),
            until: Some(now + Duration::from_secs(2)),
        };
        assert!(short.next(8 * 1024 * 1024) <= Duration::from_secs(2));
        assert!(!short.spent());
        let over = Budget {
            call: Duration::from_secs(10),
            until: Some(now),
        };
        assert_eq!(over.next(0), Duration::ZERO);
        assert!(over.spent());
    }
}
