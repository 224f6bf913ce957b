//! A destination's own message limit read again before an event over it is refused: the
//! attribute is read at start-up (and by the probes), and a queue raised from 1 KiB to 256 KiB
//! still had its retried dead letters refused at 1 KiB, with SQS named as the limit's source,
//! until the relay restarted (black-box run). At most one read per destination every
//! [`READ_AGAIN_AFTER`](crate::max_message::READ_AGAIN_AFTER), so a producer writing events too
//! large for good costs one small call now and then, not one per batch.

use std::sync::Arc;

use outbox_core::ClaimedEvent;
use outbox_core::message::message_size;

use crate::publisher::{Queue, SqsPublisher};
use crate::watch::SILENT_AFTER;

impl SqsPublisher {
    /// Reads again, concurrently, the limit of each destination that the message of an event
    /// at `order` is over, where that limit is the destination's own, lower than its service's
    /// (see [`MaxMessage::read_again_for`](crate::max_message::MaxMessage::read_again_for)). A
    /// destination down is not asked (the probe that finds it back reads it); a read that fails
    /// leaves the limit as it was.
    pub(crate) async fn read_limits_again(&self, events: &[ClaimedEvent], order: &[usize]) {
        // The common case, queues at SQS's own limit: nothing to look at per event.
        if !self.inner.queues.iter().any(|q| q.limit_lowered()) {
            return;
        }
        let mut asked: Vec<&Arc<Queue>> = Vec::new();
        for &i in order {
            let event = &events[i];
            let Some(queue) = self.inner.router.route(&event.event_type) else {
                continue;
            };
            if asked.iter().any(|q| Arc::ptr_eq(q, queue)) || queue.down.is_down() {
                continue;
            }
            let size = message_size(
                event.payload().len(),
                &event.event_type,
                &event.aggregate_type,
                &event.aggregate_id,
                event.traceparent().filter(|t| !t.is_empty()),
            );
            if queue.read_limit_again_for(size) {
                asked.push(queue);
            }
        }
        if asked.is_empty() {
            return;
        }
        let timeout = self.inner.call_timeout.min(SILENT_AFTER);
        futures::future::join_all(asked.iter().map(|q| q.down.probe().works(timeout))).await;
    }
}
