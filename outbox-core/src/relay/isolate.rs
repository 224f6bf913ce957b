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

/// After `Err` from the publisher for `wave` (which, by [`Publisher::publish`]'s contract, means
/// the broker is down): publishes its halves, to tell an outage from an event the publisher fails
/// on every time. While exactly one half fails as a whole and the other is answered, the failing
/// half is halved again, down to one event: that event counts an attempt (so it ends in a visible
/// dead letter instead of holding back its batch, and its aggregate, for ever), and the rest of
/// the wave has its own outcomes. When both halves of the whole wave fail, it is an outage:
/// `None`, and the caller releases the wave as before (no attempt counted). At most two calls per
/// halving, within the batch's deadline.
///
/// The halves are sent one after the other; the caller does not use this for a wave holding
/// several events of one aggregate in order (a publisher that keeps aggregate order).
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
    let mut failing: Range<usize> = 0..wave.len();
    let mut error = String::new();
    // Whether the publisher answered for some part of the wave: the broker is reachable.
    let mut answered = false;
    while failing.len() > 1 {
        let mid = failing.start + failing.len() / 2;
        let mut failed: Vec<(Range<usize>, String)> = Vec::new();
        for half in [failing.start..mid, mid..failing.end] {
            let events = &wave[half.clone()];
            let outcome = if Instant::now() >= deadline {
                Guarded::TimedOut
            } else {
                publish_guarded(publisher, events, deadline, overrun(publish_timeout)).await
            };
            match outcome {
                Guarded::Done(Ok(o)) => {
                    answered = true;
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
                Guarded::Done(Err(e)) => failed.push((half, e.to_string())),
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
        match failed.len() {
            0 => {
                failing = 0..0;
            }
            1 => {
                let (half, e) = failed.remove(0);
                failing = half;
                error = e;
            }
            _ => {
                if !answered {
                    // Both halves of the whole wave failed: the broker is down.
                    return None;
                }
                for (half, e) in failed {
                    fill(
                        &mut outcomes[half],
                        PublishOutcome::unavailable(
                            FailureKind::Other,
                            format!("the publisher failed: {e}"),
                        ),
                    );
                }
                failing = 0..0;
            }
        }
    }
    if !answered {
        // Nothing of the wave was answered (out of time on the way): no proof of a poisonous
        // event; released as after an outage.
        return None;
    }
    if failing.len() == 1 {
        outcomes[failing.start] = Some(PublishOutcome::retry(
            FailureKind::Other,
            format!(
                "the publisher failed as a whole whenever this event was in the call, and \
                 published the rest of its batch without it: {error}"
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
