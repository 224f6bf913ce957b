//! A chain of batch calls to one destination, sent one after the other (see `batch.rs`), within
//! the publish deadline and until its publish stops waiting for it (see `detached_call.rs`).

use std::collections::HashSet;
use std::sync::Arc;

use outbox_core::{FailureKind, PublishOutcome};
use tokio_util::sync::CancellationToken;

use crate::batch::Chain;
use crate::classify::Class;
use crate::in_progress::not_sent_publish_went_on;
use crate::message::Prepared;
use crate::publisher::{Queue, SqsPublisher};
use crate::settle::{Report, held_back, settle};

impl SqsPublisher {
    /// Sends a chain's batches one after the other; on a FIFO queue, a message whose group had a
    /// failure earlier in the chain is not sent (so that it cannot overtake the failed one).
    ///
    /// A batch that could not be answered before `deadline` (a call timeout from now would pass
    /// it) is not sent: its events are put back without an attempt, and what was sent is kept.
    /// Once `stop` is cancelled (its publish went on without it), no further call starts, nor
    /// does the chain wait for an in-flight slot: its unsent events are put back uncounted, and
    /// the call it is in goes on (so that calls going on without their publish hold no more
    /// slots than they did then).
    pub(crate) async fn run_chain(
        &self,
        queue: Arc<Queue>,
        chain: Chain<Prepared>,
        deadline: Option<tokio::time::Instant>,
        stop: CancellationToken,
    ) -> Report {
        let mut report = Report::default();
        let mut failed_groups: HashSet<String> = HashSet::new();
        for batch in chain {
            // The in-flight limit, taken before the deadline check so that a batch waiting for a
            // slot is judged by when it would really be sent (and held for its re-sends).
            // The destination's share of the slots, then one of the publisher's.
            let permit = tokio::select! {
                biased;
                permits = async {
                    let share = queue.slots.acquire().await.ok();
                    (share, self.inner.permits.acquire().await.ok())
                } => Some(permits),
                () = stop.cancelled() => None,
            };
            if permit.is_none() || stop.is_cancelled() {
                for p in batch {
                    report.outcomes.push((p.index, not_sent_publish_went_on()));
                }
                continue;
            }
            if self.late(deadline) {
                for p in batch {
                    report.outcomes.push((p.index, too_late()));
                }
                continue;
            }
            let mut send = Vec::with_capacity(batch.len());
            for p in batch {
                match &p.group {
                    Some(group) if failed_groups.contains(group) => {
                        report.outcomes.push((p.index, held_back(group)));
                    }
                    _ => send.push(p),
                }
            }
            if send.is_empty() {
                continue;
            }
            self.send_batch(
                &queue,
                send,
                &mut report,
                &mut failed_groups,
                deadline,
                &stop,
            )
            .await;
        }
        report
    }

    /// Whether a call made now could not be answered before `deadline` (one call timeout).
    pub(crate) fn late(&self, deadline: Option<tokio::time::Instant>) -> bool {
        deadline.is_some_and(|d| {
            tokio::time::Instant::now()
                .checked_add(self.inner.call_timeout)
                .is_none_or(|answered_by| answered_by > d)
        })
    }

    /// Sends one batch and records an outcome per entry. A batch refused as a whole for its
    /// content is re-sent one entry per call, so that only the culprit is dead-lettered; an entry
    /// whose call could not be answered before `deadline` is put back unsent (and, on a FIFO
    /// queue, holds back the rest of its group).
    async fn send_batch(
        &self,
        queue: &Queue,
        entries: Vec<Prepared>,
        report: &mut Report,
        failed_groups: &mut HashSet<String>,
        deadline: Option<tokio::time::Instant>,
        stop: &CancellationToken,
    ) {
        let result = self.call(queue, &entries).await;
        report.count(&result);
        match result {
            Err(failure) if failure.class == Class::Permanent && entries.len() > 1 => {
                tracing::warn!(
                    destination = %queue.url, kind = %queue.kind, entries = entries.len(),
                    error = %failure.error, "{} refused a whole batch; sending its entries one by one",
                    queue.service()
                );
                for p in entries {
                    if let Some(group) = p.group.as_ref().filter(|g| failed_groups.contains(*g)) {
                        report.outcomes.push((p.index, held_back(group)));
                        continue;
                    }
                    if self.late(deadline) || stop.is_cancelled() {
                        if let Some(group) = &p.group {
                            failed_groups.insert(group.clone());
                        }
                        let outcome = if stop.is_cancelled() {
                            not_sent_publish_went_on()
                        } else {
                            too_late()
                        };
                        report.outcomes.push((p.index, outcome));
                        continue;
                    }
                    let single = std::slice::from_ref(&p);
                    let result = self.call(queue, single).await;
                    report.count(&result);
                    settle(queue, result, vec![p], report, failed_groups);
                }
            }
            result => settle(queue, result, entries, report, failed_groups),
        }
    }
}

/// The outcome of an event not sent because its call could not be answered before the relay's
/// publish deadline: put back without an attempt counted.
pub(crate) fn too_late() -> PublishOutcome {
    PublishOutcome::unavailable(
        FailureKind::NotSent,
        "not sent: the relay's publish deadline would pass first",
    )
}
