//! A publish's events sent: routed, prepared (with the pointers of the payloads offloaded to S3),
//! planned into chains of batch calls per destination, and sent. The events that need no upload
//! go at once, while the uploads run: they waited for the publish's uploads, and a slow S3
//! (answering in 3-4 s) held small events bound for healthy queues 15 s at the median, and 40 s
//! at p99, through per-aggregate order (black-box run). An event of a FIFO destination whose
//! message group has an offloaded event in the publish waits with it, in order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use outbox_core::{ClaimedEvent, FailureKind, PublishOutcome};

use crate::batch::plan;
use crate::in_progress::{behind_an_upload, in_progress};
use crate::message::{Prepared, prepare};
use crate::offload::Offloaded;
use crate::publisher::{Queue, SqsPublisher, group_of};
use crate::settle::{Report, held_back};

/// Offloaded payloads' pointers by event index, or the outcome of an event not offloaded now.
type Uploads = HashMap<usize, Result<Offloaded, PublishOutcome>>;

impl SqsPublisher {
    /// Sends the events at `order` (in `seq` order), the ones that need no upload at once, the
    /// others once their payloads are in S3; the report of every call, and the outcomes of the
    /// events not sent.
    pub(crate) async fn send_events(
        &self,
        events: &[ClaimedEvent],
        order: Vec<usize>,
        deadline: Option<tokio::time::Instant>,
    ) -> Report {
        self.read_limits_again(events, &order).await;
        let large = self.to_offload(events, &order);
        if large.is_empty() {
            return self
                .send_prepared(events, order, HashMap::new(), deadline)
                .await;
        }
        // The groups of FIFO destinations that have an offloaded event here: their events wait
        // for it, in order.
        let waiting_groups: HashSet<String> = large
            .iter()
            .filter(|&&i| self.fifo_or_no_route(&events[i]))
            .map(|&i| group_of(&events[i]))
            .collect();
        // (An event with no route waits too: its outcome holds its group's later events back.)
        let (later, now): (Vec<usize>, Vec<usize>) = order.into_iter().partition(|&i| {
            large.contains(&i)
                || (!waiting_groups.is_empty()
                    && self.fifo_or_no_route(&events[i])
                    && waiting_groups.contains(&group_of(&events[i])))
        });
        let (mut report, after_uploads) = futures::join!(
            self.send_prepared(events, now, HashMap::new(), deadline),
            async {
                let uploads = self.offload_large(events, &later, deadline).await;
                self.send_prepared(events, later, uploads, deadline).await
            }
        );
        report.merge(after_uploads);
        report
    }

    /// The queue or topic `event` is bound for, if it has one.
    pub(crate) fn queue_of(&self, event: &ClaimedEvent) -> Option<&Queue> {
        self.inner.router.route(&event.event_type).map(|q| &**q)
    }

    /// Whether `event` goes to a FIFO destination, or nowhere.
    pub(crate) fn fifo_or_no_route(&self, event: &ClaimedEvent) -> bool {
        self.inner
            .router
            .route(&event.event_type)
            .is_none_or(|q| q.fifo)
    }

    /// Sends the events at `order` (in `seq` order) with the pointers of `offloaded`.
    async fn send_prepared(
        &self,
        events: &[ClaimedEvent],
        order: Vec<usize>,
        mut offloaded: Uploads,
        deadline: Option<tokio::time::Instant>,
    ) -> Report {
        let mut report = Report::default();
        let mut failed_groups: HashSet<String> = HashSet::new();
        // Groups whose offloaded event's upload goes on: their later events are put back with
        // it, for as long (not as behind a failure: no outage).
        let mut uploading_groups: HashSet<String> = HashSet::new();
        let mut per_queue: Vec<(Arc<Queue>, Vec<Prepared>)> = Vec::new();
        for i in order {
            let event = &events[i];
            let Some(queue) = self.inner.router.route(&event.event_type) else {
                report.outcomes.push((
                    i,
                    PublishOutcome::permanent(
                        FailureKind::NoRoute,
                        format!("no SQS route for event type `{}`", event.event_type),
                    ),
                ));
                // Its group's later events in this publish wait, so none overtakes it (only FIFO
                // queues look the group up).
                failed_groups.insert(group_of(event));
                continue;
            };
            // Nothing offloaded (the common case): no hash per event.
            let offload = if offloaded.is_empty() {
                None
            } else {
                offloaded.remove(&i)
            };
            let pointer = match offload {
                None => None,
                Some(Ok(pointer)) => Some(pointer),
                Some(Err(outcome)) => {
                    // Its group's later events in this publish wait, so none overtakes it.
                    if queue.fifo && in_progress(&outcome) {
                        uploading_groups.insert(group_of(event));
                    } else if queue.fifo {
                        failed_groups.insert(group_of(event));
                    }
                    report.outcomes.push((i, outcome));
                    continue;
                }
            };
            if queue.fifo && failed_groups.contains(&group_of(event)) {
                report.outcomes.push((i, held_back(&group_of(event))));
                continue;
            }
            if queue.fifo && uploading_groups.contains(&group_of(event)) {
                report
                    .outcomes
                    .push((i, behind_an_upload(&group_of(event))));
                continue;
            }
            match prepare(
                i,
                event,
                queue,
                pointer.as_ref(),
                self.inner.direct.is_some(),
            ) {
                Err(failure) => {
                    if queue.fifo {
                        failed_groups.insert(group_of(event));
                    }
                    report
                        .outcomes
                        .push((i, PublishOutcome::Permanent(failure)));
                }
                Ok(prepared) => match per_queue.iter_mut().find(|(q, _)| Arc::ptr_eq(q, queue)) {
                    Some((_, list)) => list.push(prepared),
                    None => per_queue.push((queue.clone(), vec![prepared])),
                },
            }
        }

        let mut chains = Vec::new();
        for (queue, items) in per_queue {
            // A slow destination's calls going on without their publishes hold as many in-flight
            // slots as they may: its new events wait (see `detached_call.rs`).
            if let Some(outcome) = self.no_call_for(&queue) {
                report
                    .outcomes
                    .extend(items.iter().map(|p| (p.index, outcome.clone())));
                continue;
            }
            for chain in plan(items, queue.fifo, queue.max_batch_bytes()) {
                chains.push((Arc::clone(&queue), chain));
            }
        }
        report.merge(self.run_chains(events, chains, deadline).await);
        report
    }
}
