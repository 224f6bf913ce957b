//! The S3 uploads in flight at once: at most `max_uploads` of them, and at most
//! [`UPLOAD_BYTES_IN_FLIGHT`] of payloads between them (each running upload holds a copy of its
//! payload, its batch gone or not).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most payload bytes the running uploads hold between them: 256 MiB.
pub(crate) const UPLOAD_BYTES_IN_FLIGHT: usize = 256 * 1024 * 1024;

/// Bytes are counted in KiB (begun): a semaphore's permits are counted in `u32`.
const KIB: usize = 1024;

/// The slots of the uploads.
#[derive(Debug)]
pub(crate) struct UploadSlots {
    count: Arc<Semaphore>,
    kib: Arc<Semaphore>,
}

/// One upload's slot: held until it ends.
#[derive(Debug)]
pub(crate) struct UploadSlot {
    _count: OwnedSemaphorePermit,
    _kib: OwnedSemaphorePermit,
}

impl UploadSlots {
    /// `uploads` at once.
    pub(crate) fn new(uploads: usize) -> Self {
        UploadSlots {
            count: Arc::new(Semaphore::new(uploads.max(1))),
            kib: Arc::new(Semaphore::new(UPLOAD_BYTES_IN_FLIGHT / KIB)),
        }
    }

    /// A slot for an upload of `bytes`, in turn (first come, first served). The semaphores are
    /// never closed: `None` does not happen (the caller treats it as no slot).
    pub(crate) async fn acquire(&self, bytes: usize) -> Option<UploadSlot> {
        let count = Arc::clone(&self.count).acquire_owned().await.ok()?;
        let kib = Arc::clone(&self.kib)
            .acquire_many_owned(kib_of(bytes))
            .await
            .ok()?;
        Some(UploadSlot {
            _count: count,
            _kib: kib,
        })
    }

    /// A slot for an upload of `bytes` if one is free now, without waiting (nor yielding: a
    /// zero time-out around [`acquire`](Self::acquire) could give up on a free slot once the
    /// task's scheduling budget was spent).
    pub(crate) fn try_acquire(&self, bytes: usize) -> Option<UploadSlot> {
        let count = Arc::clone(&self.count).try_acquire_owned().ok()?;
        let kib = Arc::clone(&self.kib)
            .try_acquire_many_owned(kib_of(bytes))
            .ok()?;
        Some(UploadSlot {
            _count: count,
            _kib: kib,
        })
    }
}

/// The KiB (begun) counted for `bytes`, within the budget.
fn kib_of(bytes: usize) -> u32 {
    let kib = bytes.div_ceil(KIB).clamp(1, UPLOAD_BYTES_IN_FLIGHT / KIB);
    u32::try_from(kib).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn uploads_are_bounded_by_count_and_by_bytes() {
        let slots = UploadSlots::new(2);
        let none_left = async |slots: &UploadSlots, bytes| {
            tokio::time::timeout(Duration::from_millis(50), slots.acquire(bytes))
                .await
                .is_err()
        };
        let a = slots.acquire(10).await.unwrap();
        let b = slots.acquire(10).await.unwrap();
        assert!(none_left(&slots, 10).await, "two at once");
        drop((a, b));
        // 200 MiB and 100 MiB do not fit together; a payload over the whole budget goes alone.
        let big = slots.acquire(200 * 1024 * 1024).await.unwrap();
        assert!(
            none_left(&slots, 100 * 1024 * 1024).await,
            "over 256 MiB together"
        );
        assert!(
            !none_left(&slots, 10 * 1024 * 1024).await,
            "within the bytes"
        );
        assert!(slots.try_acquire(100 * 1024 * 1024).is_none());
        let small = slots.try_acquire(10 * 1024 * 1024);
        assert!(small.is_some(), "free now");
        assert!(slots.try_acquire(1).is_none(), "two at once");
        drop((big, small));
        assert!(!none_left(&slots, 1).await);
    }
}
