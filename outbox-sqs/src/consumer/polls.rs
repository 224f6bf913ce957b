//! The consumer's own long polls, as seen by a release at shutdown.
//!
//! A long poll cut short at shutdown (its `ReceiveMessage` dropped) is not cut short at SQS: the
//! server keeps it open until its wait ends and hands it the first message that becomes visible
//! meanwhile, hiding it for a whole visibility time-out and counting a receive towards the
//! queue's `maxReceiveCount` — for an answer nobody reads. A message released at once by a unit
//! that stops (one waiting for S3, say) was taken back by the consumer's own dropped poll: a black
//! box run saw such messages reach the dead-letter queue after two stops, never handled. So at
//! shutdown a receiver lets its poll in flight finish for up to [`SHUTDOWN_POLL_GRACE`] and hands
//! back at once what it got (under traffic a poll answers at once: a poll cut at shutdown took a
//! fresh message for a whole visibility time-out in a third of a rolling restart's stops); and a
//! release at shutdown waits for the polls to be [`settled`](Polls::settled), then hides its
//! messages until the end of any poll cut short: [`Polls::quiet_in`].

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long past its wait a poll is taken to last at SQS: its request may still be on its way.
pub(crate) const POLL_MARGIN: Duration = Duration::from_secs(1);

/// How long a receiver lets its poll in flight finish at shutdown before cutting it short.
pub(crate) const SHUTDOWN_POLL_GRACE: Duration = Duration::from_secs(1);

/// The polls in flight and the end of the latest one cut short.
#[derive(Default)]
pub(crate) struct Polls {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    in_flight: usize,
    /// When the last poll cut short ends at SQS, at the latest.
    cut_until: Option<Instant>,
}

impl Polls {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a poll waiting up to `wait` as in flight until the returned guard is
    /// [`answered`](Poll::answered) or dropped (cut short).
    pub(crate) fn start(&self, wait: Duration) -> Poll<'_> {
        self.state().in_flight += 1;
        Poll {
            polls: self,
            ends_by: Instant::now() + wait + POLL_MARGIN,
            answered: false,
        }
    }

    /// Waits until no poll is in flight (at shutdown: each finishes or is cut short within
    /// [`SHUTDOWN_POLL_GRACE`]), at most `bound`.
    pub(crate) async fn settled(&self, bound: Duration) {
        let settled = async {
            while self.state().in_flight > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let _ = tokio::time::timeout(bound, settled).await;
    }

    /// How long a message released now is to stay hidden so that no poll of this consumer can
    /// take it: `wait` plus [`POLL_MARGIN`] while a poll is in flight (it is about to be cut
    /// short), until the end of the latest poll cut short, else zero.
    pub(crate) fn quiet_in(&self, wait: Duration) -> Duration {
        let state = self.state();
        if state.in_flight > 0 {
            return wait.saturating_add(POLL_MARGIN);
        }
        state.cut_until.map_or(Duration::ZERO, |end| {
            end.saturating_duration_since(Instant::now())
        })
    }
}

/// A poll in flight (see [`Polls::start`]).
pub(crate) struct Poll<'a> {
    polls: &'a Polls,
    /// When it ends at SQS at the latest: its start, its wait and [`POLL_MARGIN`].
    ends_by: Instant,
    answered: bool,
}

impl Poll<'_> {
    /// The poll has its answer: it takes no message any more.
    pub(crate) fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for Poll<'_> {
    fn drop(&mut self) {
        let mut state = self.polls.state();
        state.in_flight = state.in_flight.saturating_sub(1);
        if !self.answered {
            let end = self.ends_by;
            state.cut_until = Some(state.cut_until.map_or(end, |e| e.max(end)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_waits_out_polls_in_flight_or_cut_short() {
        let polls = Polls::default();
        let wait = Duration::from_secs(5);
        assert_eq!(polls.quiet_in(wait), Duration::ZERO);
        // Answered: over.
        polls.start(wait).answered();
        assert_eq!(polls.quiet_in(wait), Duration::ZERO);
        // In flight: the whole wait and the margin.
        let poll = polls.start(wait);
        assert_eq!(polls.quiet_in(wait), wait + POLL_MARGIN);
        // Cut short: until its end at SQS, counted from its start.
        std::thread::sleep(Duration::from_millis(300));
        drop(poll);
        let left = polls.quiet_in(wait);
        assert!(
            left <= wait + POLL_MARGIN - Duration::from_millis(300),
            "{left:?}"
        );
        assert!(left > wait, "{left:?}");
    }
}
