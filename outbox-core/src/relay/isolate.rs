//! Finding the event a publisher fails on, when a wave fails as a whole: the publisher panicked
//! (the wave again one event at a time), or returned `Err` (halves, while one half goes through).

use std::collections::HashSet;
use std::ops::Range;

use tokio::time::Instant;

use super::guard::{Guarded, overrun, publish_guarded};
use crate::failure::FailureKind;
use crate::publisher::{ClaimedEvent, PublishOutcome, Publisher};

/// After a panic: publishes `wave` one event at a time. An event the publisher panics on alone
/// counts an attempt (dead-lettered when they are used up, with the panic as its reason); the
/// others go through normally. With `ordered`, once an event of an aggregate failed, the later
/// ones of that aggregate in the wave (a publisher that keeps aggregate order gets several) are
/// not sent: put back without an attempt, so that none overtakes it.
pub(crate) async fn one_by_one<P: Publisher>(
    publisher: &P,
    wave: &[ClaimedEvent],
    ordered: bool,
    deadline: Instant,
    publish_timeout: std::time::Duration,
) -> Vec<PublishOutcome> {
    let mut outcomes = Vec::with_capacity(wave.len());
    let mut failed: HashSet<(&str, &str)> = HashSet::new();
    for event in wave {
        let aggregate = (event.aggregate_type.as_str(), event.aggregate_id.as_str());
        if ordered && failed.contains(&aggregate) {
            outcomes.push(PublishOutcome::unavailable(
                FailureKind::NotSent,
                "not sent: an earlier event of its aggregate failed in this batch",
            ));
            continue;
        }
        let single = std::slice::from_ref(event);
        let outcome = match publish_guarded(publisher, single, deadline, overrun(publish_timeout))
            .await
        {
            Guarded::Done(Ok(mut o)) if o.len() == 1 => {
                o.pop().unwrap_or(PublishOutcome::Published)
            }
            Guarded::Done(Ok(_)) => {
                PublishOutcome::retry(FailureKind::Other, "the publisher returned no outcome")
            }
            Guarded::Done(Err(e)) => PublishOutcome::unavailable(
                FailureKind::Other,
                format!("the publisher failed: {e}"),
            ),
            Guarded::TimedOut => PublishOutcome::unavailable(
                FailureKind::Timeout,
                format!("publishing did not finish within {publish_timeout:?}"),
            ),
            Guarded::Panicked(m) => {
                PublishOutcome::retry(FailureKind::Panic, format!("the publisher panicked: {m}"))
            }
        };
        if outcome != PublishOutcome::Published {
            failed.insert(aggregate);
        }
        outcomes.push(outcome);
    }
    outcomes
}

/// How many rounds of halving run while nothing has been published yet, before the wave's failure
/// is taken for an outage: two rounds (six calls) still find two events the publisher fails on
/// that sit in different halves, and cost an outage at most six calls per failed wave.
const BLIND_ROUNDS: usize = 2;

/// After `Err` from the publisher for `wave` (which, by [`Publisher::publish`]'s contract, means
/// the broker is down): publishes its halves, to tell an outage from events the publisher fails on
/// every time. Every part that fails as a whole is halved again, round after round, down to
/// single events; once anything of the wave has been **published** (the broker proved reachable),
/// each single event that still fails as a whole counts an attempt (so that it ends in a visible
/// dead letter instead of holding back its batch and its aggregate for ever) and the rest of the
/// wave has its own outcomes. When nothing has been published after [`BLIND_ROUNDS`] rounds, it is
/// an outage: `None`, and the caller releases the wave as before (no attempt counted). Every call
/// within the batch's deadline; parts not tried by then are put back without an attempt.
///
/// The parts are sent one after the other; the caller does not use this for a wave holding several
/// events of one aggregate in order (a publisher that keeps aggregate order).
pub(crate) async fn bisect<P: Publisher>(
    publisher: &P,
    wave: &[ClaimedEvent],
    deadline: Instant,
    publish_timeout: std::time::Duration,
) -> Option<Vec<PublishOutcome>> {
    if wave.len() < 2 {
        return None;
    }
    let mut outcomes: Vec<Option<PublishOutcome>> = vec![None; wave.len()];
    // Parts that failed as a whole, with the publisher's error.
    let mut failing: Vec<(Range<usize>, String)> = vec![(0..wave.len(), String::new())];
    // Single events that failed as a whole when published alone.
    let mut alone: Vec<(usize, String)> = Vec::new();
    // Whether the broker accepted anything of the wave: it is reachable.
    let mut published = false;
    let mut rounds = 0;
    while !failing.is_empty() {
        if !published && rounds == BLIND_ROUNDS {
            return None;
        }
        rounds += 1;
        let mut next = Vec::new();
        for (part, _) in failing {
            let mid = part.start + part.len() / 2;
            for half in [part.start..mid, mid..part.end] {
                let events = &wave[half.clone()];
                let outcome = if Instant::now() >= deadline {
                    Guarded::TimedOut
                } else {
                    publish_guarded(publisher, events, deadline, overrun(publish_timeout)).await
                };
                match outcome {
                    Guarded::Done(Ok(o)) => {
                        published |= o.contains(&PublishOutcome::Published);
                        let mut o = o.into_iter();
                        for slot in &mut outcomes[half] {
                            *slot = Some(o.next().unwrap_or_else(|| {
                                PublishOutcome::retry(
                                    FailureKind::Other,
                                    "the publisher returned no outcome",
                                )
                            }));
                        }
                    }
                    Guarded::Done(Err(e)) if half.len() == 1 => {
                        alone.push((half.start, e.to_string()));
                    }
                    Guarded::Done(Err(e)) => next.push((half, e.to_string())),
                    Guarded::TimedOut => fill(
                        &mut outcomes[half],
                        PublishOutcome::unavailable(
                            FailureKind::Timeout,
                            format!("publishing did not finish within {publish_timeout:?}"),
                        ),
                    ),
                    Guarded::Panicked(m) => fill(
                        &mut outcomes[half],
                        PublishOutcome::unavailable(
                            FailureKind::Panic,
                            format!("the publisher panicked: {m}"),
                        ),
                    ),
                }
            }
        }
        failing = next;
    }
    if !published {
        // Nothing of the wave went through (out of time on the way, or nothing sent): no proof
        // that the broker is up; released as after an outage.
        return None;
    }
    for (i, error) in alone {
        outcomes[i] = Some(PublishOutcome::retry(
            FailureKind::Other,
            format!(
                "the publisher failed as a whole whenever this event was in the call (alone too), \
                 while it published other events of the batch: {error}"
            ),
        ));
    }
    Some(
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    PublishOutcome::unavailable(FailureKind::NotSent, "not sent in this batch")
                })
            })
            .collect(),
    )
}

fn fill(slots: &mut [Option<PublishOutcome>], outcome: PublishOutcome) {
    for slot in slots {
        *slot = Some(outcome.clone());
    }
}
