//! How long a watched connection is waited for, and what it waits for.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::relay::session::{ANSWER_WITHIN, Idle};

/// How long the watched session may sit idle while its client waits for an answer. Between two
/// statements of a connection that works it is idle for microseconds (housekeeping's own pauses
/// between statements are at most 25 ms).
pub(super) const IDLE_AT_MOST: Duration = ANSWER_WITHIN;

/// What a watched connection waits for, which tells a stall from an answer on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Awaiting {
    /// Answers to statements sent one after another (a housekeeping round): its session idle for
    /// [`IDLE_AT_MOST`] meanwhile has stalled, however it waits.
    Answers,
    /// The answer to one request (a claim's round trip), sent while the session waited inside a
    /// transaction (`true`) or out of one. Still waiting the same way [`IDLE_AT_MOST`] on, the
    /// session never got the request. Waiting the other way, it got it and answered: the answer
    /// may still be on its way (megabytes leave the server's socket long before they arrive over
    /// a slow link: review), so the round trip is left to its bound.
    Answer { sent_in_transaction: bool },
}

impl Awaiting {
    /// Whether a session waiting as `idle` has stalled.
    /// (`waiting`: how long its client has waited; the session cannot have waited for this
    /// answer longer, though idle since before: black-box recheck, a purge's session idle through
    /// its prompt was given up 5 s into a hiccup after it.)
    pub(super) fn stalled(self, idle: &Idle, idle_at_most: Duration, waiting: Duration) -> bool {
        idle.waited.min(waiting) >= idle_at_most
            && match self {
                Awaiting::Answers => true,
                Awaiting::Answer {
                    sent_in_transaction,
                } => idle.in_transaction == sent_in_transaction,
            }
    }
}

/// How a connection is watched: how long it is waited for, and what shows it moving.
#[derive(Clone, Copy)]
pub(crate) struct Watching<'a> {
    pub(crate) patience: Patience,
    /// Counts the wake-ups of the watched connection's task, when known (`Watch`'s).
    pub(crate) activity: Option<&'a AtomicU64>,
}

/// How long a watched connection is waited for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Patience {
    /// How long its session may sit idle while its client waits for an answer.
    pub(crate) idle_at_most: Duration,
    /// How long looks may all go unanswered before the wait ends (`Stall::Unseen`); `None`:
    /// for ever.
    pub(crate) unseen_at_most: Option<Duration>,
}

impl Patience {
    /// The relay's own connections: [`IDLE_AT_MOST`], looking for as long as it takes (the relay
    /// has other bounds).
    pub(crate) const RELAY: Patience = Patience {
        idle_at_most: IDLE_AT_MOST,
        unseen_at_most: None,
    };
}
