//! Batch calls that go on without their publish. A publish waits for its chains of
//! `SendMessageBatch` / `PublishBatch` calls at most [`SqsConfig::call_wait`](crate::SqsConfig::call_wait)
//! (1 s by default); the chains still running then go on in a task of their own, their events
//! are put back, uncounted, until the call has ended (`in_progress.rs`); the events it got
//! accepted are reported settled for the relay to mark, and the next claim of the others takes
//! what its call did
//! (see `detached.rs`): published, a counted failure, or, put back uncounted by its call, sent
//! again.
//!
//! Why: a publish ended, and the relay marked its events, when its slowest call did. A topic
//! answering in 2–12 s held the events of the batch bound for healthy queues as long, and through
//! per-aggregate order the next events of their aggregates (black-box run).
//!
//! Once its publish goes on, a chain ends with the call it is in: it starts no other, nor waits
//! for an in-flight slot (its unsent events are sent at their next claim). Chains going on
//! without their publish hold at most half of the in-flight slots between them when there are
//! several destinations ([`destination_slots`]): past that, a destination with such chains running
//! has its new events put back until fewer run, so that a slow destination cannot take every
//! slot from the healthy ones.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use outbox_core::{ClaimedEvent, PublishOutcome};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::batch::Chain;
use crate::detached::{Detached, Known, Remembered, Started};
use crate::in_progress::{behind_a_call, call_goes_on, call_still_runs, calls_go_on};
use crate::message::Prepared;
use crate::publisher::{Queue, SqsPublisher, group_of};
use crate::settle::{Report, held_back};

/// What became of the calls that went on without their publish, by event.
pub(crate) type DetachedCalls = Detached<PublishOutcome>;

/// A chain's events registered as carried by a call going on (by position in the publish).
type Registered = Vec<(usize, Started<PublishOutcome>)>;

/// What a chain's run yields: its position among the publish's chains, and its report (or its
/// panic).
type ChainDone = (usize, std::thread::Result<Report>);

/// How often shutdown looks whether calls still go on (see [`SqsPublisher::settle_calls`]).
const SETTLE_LOOK: Duration = Duration::from_millis(20);

/// The longest shutdown waits for calls going on, whatever it is asked (see
/// [`SqsPublisher::settle_calls`]).
const SETTLE_AT_MOST: Duration = Duration::from_secs(86_400);

/// Counts a chain going on without its publish, for its destination, until dropped.
struct GoingOn(Arc<Queue>);

impl GoingOn {
    fn new(queue: &Arc<Queue>) -> Self {
        queue.going_on.fetch_add(1, Ordering::Relaxed);
        GoingOn(Arc::clone(queue))
    }
}

impl Drop for GoingOn {
    fn drop(&mut self) {
        self.0.going_on.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The in-flight slots one destination's calls may hold at once: with several destinations,
/// half of `max_in_flight` (at least one), so that a destination answering slowly leaves the
/// others the rest; with a single destination, all of them.
pub(crate) fn destination_slots(max_in_flight: usize, destinations: usize) -> usize {
    if destinations <= 1 {
        max_in_flight
    } else {
        (max_in_flight / 2).max(1)
    }
}

/// The counter of chains going on without their publish, per destination.
pub(crate) type GoingOnCount = AtomicUsize;

/// When a batch call of the publisher (to any destination) last had an answer: what tells a call
/// that failed as a whole while others went through (a counted attempt) from one that failed in
/// an outage of everything (put back uncounted, as a publish whose calls all fail is).
#[derive(Debug)]
pub(crate) struct LastAnswer {
    base: Instant,
    /// Nanoseconds after `base`, plus one (zero: never).
    at: AtomicU64,
}

impl Default for LastAnswer {
    fn default() -> Self {
        LastAnswer {
            base: Instant::now(),
            at: AtomicU64::new(0),
        }
    }
}

impl LastAnswer {
    /// A call had an answer now.
    pub(crate) fn mark(&self) {
        let nanos = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        self.at
            .fetch_max(nanos.saturating_add(1), Ordering::Relaxed);
    }

    /// Whether a call had an answer at or after `since`.
    fn since(&self, since: Instant) -> bool {
        let at = self.at.load(Ordering::Relaxed);
        let since = u64::try_from(since.saturating_duration_since(self.base).as_nanos())
            .unwrap_or(u64::MAX - 1);
        at > since
    }
}

impl SqsPublisher {
    /// Takes what became of the calls that went on without their publish for the events at
    /// `order` (in `seq` order): an event whose call still runs is put back; one whose call
    /// ended gets its outcome (the call happened), unless its call put it back uncounted (it is
    /// sent again now, as a new event would be). A later event of a FIFO message group with such
    /// an event that is not published waits, as behind a failure. Returns the outcomes taken.
    pub(crate) fn take_detached_calls(
        &self,
        events: &[ClaimedEvent],
        order: &mut Vec<usize>,
        outcomes: &mut [Option<PublishOutcome>],
    ) -> Vec<(Uuid, PublishOutcome)> {
        let known = self
            .inner
            .detached_calls
            .take_known(order.iter().map(|&i| (i, events[i].id)));
        let mut taken = Vec::new();
        if known.is_empty() {
            return taken;
        }
        let mut known: HashMap<usize, Known<PublishOutcome>> = known.into_iter().collect();
        // Groups with an earlier event whose call still runs (true) or failed (false).
        let mut stopped: HashMap<String, bool> = HashMap::new();
        order.retain(|&i| {
            let event = &events[i];
            let needs_group = !stopped.is_empty() || known.contains_key(&i);
            let group = (needs_group && self.fifo_or_no_route(event)).then(|| group_of(event));
            match known.remove(&i) {
                Some(Known::Running) => {
                    if let Some(group) = group {
                        stopped.entry(group).or_insert(true);
                    }
                    outcomes[i] = Some(call_still_runs(self.queue_of(event)));
                    return false;
                }
                Some(Known::Done(outcome))
                    if !matches!(outcome, PublishOutcome::Unavailable(_)) =>
                {
                    if let Some(group) = group.filter(|_| outcome != PublishOutcome::Published) {
                        stopped.entry(group).or_insert(false);
                    }
                    taken.push((event.id, outcome.clone()));
                    outcomes[i] = Some(outcome);
                    return false;
                }
                _ => {}
            }
            // Sent now, unless an earlier event of its group waits.
            let Some((group, running)) = group.as_ref().and_then(|g| stopped.get_key_value(g))
            else {
                return true;
            };
            outcomes[i] = Some(if *running {
                behind_a_call(group, self.queue_of(event))
            } else {
                held_back(group)
            });
            false
        });
        taken
    }

    /// Whether `queue`'s new events are put back without a call: chains going on without their
    /// publish run for it and its calls hold every slot they may (see [`destination_slots`]);
    /// the outcome to put them back with.
    pub(crate) fn no_call_for(&self, queue: &Queue) -> Option<PublishOutcome> {
        queue
            .saturated()
            .then(|| calls_go_on(queue, queue.going_on.load(Ordering::Relaxed)))
    }

    /// Runs `chains`, each sent in order, and waits for them at most the call wait: the report of
    /// those that ended, and for the events of the others, which go on in a task of their own,
    /// their put-back outcomes.
    pub(crate) async fn run_chains(
        &self,
        events: &[ClaimedEvent],
        chains: Vec<(Arc<Queue>, Chain<Prepared>)>,
        deadline: Option<tokio::time::Instant>,
    ) -> Report {
        let mut report = Report::default();
        if chains.is_empty() {
            return report;
        }
        // Each chain's destination and events, for those that may go on.
        let mut carried: Vec<Option<(Arc<Queue>, Vec<usize>)>> = Vec::with_capacity(chains.len());
        let mut running = FuturesUnordered::new();
        let stop = CancellationToken::new();
        for (k, (queue, chain)) in chains.into_iter().enumerate() {
            let indexes = chain.iter().flatten().map(|p| p.index).collect();
            carried.push(Some((Arc::clone(&queue), indexes)));
            let publisher = self.clone();
            let stop = stop.clone();
            running.push(async move {
                let run = AssertUnwindSafe(publisher.run_chain(queue, chain, deadline, stop));
                (k, run.catch_unwind().await) as ChainDone
            });
        }
        let started = Instant::now();
        let wait_end = tokio::time::Instant::now().checked_add(self.inner.call_wait);
        loop {
            let next = match wait_end {
                Some(end) => match tokio::time::timeout_at(end, running.next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                },
                None => running.next().await,
            };
            let Some((k, done)) = next else {
                return report;
            };
            carried[k] = None;
            report.merge(ended(done));
        }
        // The chains still running go on without this publish: those in a call end with it, the
        // others stop (their events' next claim sends them).
        stop.cancel();
        // Those waiting for a slot end at once, without a call.
        while let Some(Some((k, done))) = running.next().now_or_never() {
            carried[k] = None;
            report.merge(ended(done));
        }
        let waited = started.elapsed();
        let mut going_on: HashMap<usize, (GoingOn, Registered)> = HashMap::new();
        for (k, carried) in carried.into_iter().enumerate() {
            let Some((queue, indexes)) = carried else {
                continue;
            };
            let mut registered = Vec::with_capacity(indexes.len());
            for i in indexes {
                if let Some((started, _woken)) = self.inner.detached_calls.start(events[i].id) {
                    registered.push((i, started));
                }
                report
                    .outcomes
                    .push((i, call_goes_on(&queue, waited, self.inner.call_timeout)));
            }
            tracing::debug!(
                destination = %queue.url, kind = %queue.kind, events = registered.len(),
                waited_ms = waited.as_millis() as u64,
                "a batch call goes on without its publish; its events are put back and take its \
                 answer at their next claim"
            );
            going_on.insert(k, (GoingOn::new(&queue), registered));
        }
        // Not counted as calls of this publish: when every call that ended failed, the publish
        // is an outage, put back uncounted (counted as calls that went through, each event of a
        // 30 s SQS outage was charged attempts: fault suite); a call going on is judged when it
        // ends (`judged`).
        let publisher = self.clone();
        let rest = async move {
            while let Some((k, done)) = running.next().await {
                let Some((going_on, registered)) = going_on.remove(&k) else {
                    continue;
                };
                // A chain that panicked leaves its events a counted failure each, the others'
                // outcomes untouched.
                let panicked = done.is_err();
                let mut outcomes: HashMap<usize, PublishOutcome> = match done {
                    Ok(report) => publisher.judged(report, started, &going_on.0),
                    Err(_) => HashMap::new(),
                };
                for (i, started) in registered {
                    let outcome = outcomes.remove(&i).unwrap_or_else(|| {
                        if panicked {
                            PublishOutcome::panicked()
                        } else {
                            lost()
                        }
                    });
                    started.finish(outcome);
                }
            }
        };
        // Not awaited: the calls go on whether anyone waits for them or not.
        drop(tokio::spawn(rest));
        report
    }
}

impl SqsPublisher {
    /// [`Publisher::settle`](outbox_core::Publisher::settle): waits at most `within` for the
    /// chains going on without their publish, then takes the events they got accepted.
    pub(crate) async fn settle_calls(&self, within: Duration) -> Vec<Uuid> {
        // (A day at most: any caller's `within`, `Duration::MAX` too, without overflowing.)
        let until = tokio::time::Instant::now() + within.min(SETTLE_AT_MOST);
        let going_on = || {
            self.inner
                .queues
                .iter()
                .any(|q| q.going_on.load(Ordering::Relaxed) > 0)
        };
        while going_on() && tokio::time::Instant::now() < until {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            tokio::time::sleep(SETTLE_LOOK.min(left)).await;
        }
        if going_on() {
            tracing::warn!(
                within_ms = within.as_millis() as u64,
                "batch calls still go on at shutdown; their events are sent again after a restart"
            );
        }
        self.inner
            .detached_calls
            .take_done_where(|outcome| *outcome == PublishOutcome::Published)
    }

    /// [`Publisher::settled`](outbox_core::Publisher::settled): the events the calls that went
    /// on without their publish got accepted since last asked.
    pub(crate) fn settled_calls(&self) -> Vec<Uuid> {
        self.inner
            .detached_calls
            .take_done_where(|outcome| *outcome == PublishOutcome::Published)
    }

    /// The outcomes of a chain to `queue` that went on without its publish, started at
    /// `started`: when a call of it failed as a whole, no call of the publisher had an answer
    /// since, every call failing meanwhile, and `queue` answered no probe either, its counted
    /// failures are put back uncounted instead, as those of a publish whose calls all failed are
    /// (an outage; the fault suite: each event of a 30 s SQS outage was charged attempts once its
    /// calls, slow to fail, went on). A destination that answers its probes while its calls fail
    /// is not an outage: its failures count (review: such a destination, alone, had its events
    /// put back uncounted for ever).
    fn judged(
        &self,
        report: Report,
        started: Instant,
        queue: &Queue,
    ) -> HashMap<usize, PublishOutcome> {
        let outage = report.transient_failures > 0
            && !self.inner.last_answer.since(started)
            && !queue.down.heard_since(started);
        report
            .outcomes
            .into_iter()
            .map(|(i, outcome)| match outcome {
                PublishOutcome::Retry(failure) if outage => {
                    (i, PublishOutcome::Unavailable(failure))
                }
                outcome => (i, outcome),
            })
            .collect()
    }
}

/// A chain's report, or its panic resumed (in the publish, as any panic in it).
fn ended(done: std::thread::Result<Report>) -> Report {
    done.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The outcome of an event its chain gave no outcome (a bug): counted, as a failure.
fn lost() -> PublishOutcome {
    PublishOutcome::retry(
        outbox_core::FailureKind::Other,
        "the SQS publisher lost track of this event",
    )
}
