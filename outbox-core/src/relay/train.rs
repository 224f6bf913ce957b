//! Trains: the waves that a relay's concurrent batches have ready at the same time, published
//! together in one call.
//!
//! With per-aggregate order a batch publishes its events in waves, one event per aggregate each, a
//! wave only once the one before it was accepted. With a few hot aggregates a batch holds a few of
//! them, so each wave holds a few events and the batch makes one broker call per event of an
//! aggregate: most of the relay's work goes into calls of two or three entries. The waves of the
//! relay's batches are disjoint in aggregates (each batch holds its heads' row locks, and followers
//! are only claimed behind them), so waves of different batches may share one call and the call
//! still never holds two events of one aggregate. A train is such a call:
//!
//! - a wave leaves at once when no train is running (no wait is added to a lone batch);
//! - while one runs, the waves that arrive board the next, which leaves when a running train comes
//!   back, or at once when it is full ([`batch_size`] events or [`batch_max_bytes`] of payload);
//! - a train runs on its own task, so a batch that is dropped mid-call (its worker aborted) does
//!   not take the other batches' waves with it;
//! - its deadline is the earliest of its waves' (a wave the broker did not get to by then comes
//!   back [unavailable](crate::PublishOutcome::Unavailable), put back without an attempt counted);
//! - if the publisher panics, every wave of the train learns it and is published again alone, one
//!   event at a time, so that only the event it panics on counts an attempt.
//!
//! [`batch_size`]: crate::RelayConfig::batch_size
//! [`batch_max_bytes`]: crate::RelayConfig::batch_max_bytes

use std::collections::VecDeque;
use std::error::Error as StdError;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Inner;
use super::guard::{Guarded, publish_guarded};
use crate::publisher::{ClaimedEvent, Publisher};

/// A publisher's failure as a wave of a train gets it: the error itself when the wave rode alone,
/// shared with the other waves otherwise.
pub(crate) type TrainError = Box<dyn StdError + Send + Sync>;

/// The trains of one relay.
#[derive(Default)]
pub(crate) struct Trains {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Waves waiting for the next train, oldest first.
    boarding: VecDeque<Rider>,
    /// Events and payload bytes of `boarding`.
    events: usize,
    bytes: usize,
    /// Trains running now.
    running: usize,
}

/// A wave waiting for, or riding, a train.
struct Rider {
    wave: Vec<ClaimedEvent>,
    bytes: usize,
    deadline: Instant,
    reply: oneshot::Sender<Ride>,
}

/// A wave back from its train.
pub(crate) struct Ride {
    /// The wave, as it was handed over.
    pub(crate) wave: Vec<ClaimedEvent>,
    /// How the call ended, with one outcome per event of the wave when it returned.
    pub(crate) result: Guarded<TrainError>,
}

/// The limits of one train: a claimed batch's.
#[derive(Debug, Clone, Copy)]
struct Limits {
    events: usize,
    bytes: usize,
}

impl Trains {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change is made whole under the lock (no call runs while it is held): a poisoned
        // lock still holds consistent data.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publishes `wave` on the next train and waits for it to come back. `None` when the train was
    /// dropped without an answer (the runtime is shutting down): nothing is known of the wave.
    pub(crate) async fn ride<P: Publisher>(
        inner: &Arc<Inner<P>>,
        wave: Vec<ClaimedEvent>,
        deadline: Instant,
        overrun: Duration,
    ) -> Option<Ride> {
        let limits = Limits {
            events: inner.config.batch_size.max(1),
            bytes: inner.config.batch_max_bytes,
        };
        let (reply, answer) = oneshot::channel();
        let bytes = wave.iter().map(|e| e.payload().len()).sum();
        let departing = {
            let mut state = inner.trains.lock();
            state.events += wave.len();
            state.bytes += bytes;
            state.boarding.push_back(Rider {
                wave,
                bytes,
                deadline,
                reply,
            });
            let full = state.events >= limits.events || state.bytes >= limits.bytes;
            (state.running == 0 || full).then(|| {
                state.running += 1;
                state.board(limits)
            })
        };
        if let Some(train) = departing {
            tokio::spawn(run(Arc::clone(inner), train, limits, overrun));
        }
        answer.await.ok()
    }
}

impl State {
    /// Takes the oldest waves that fit in one train (at least one).
    fn board(&mut self, limits: Limits) -> Vec<Rider> {
        let (mut events, mut bytes) = (0usize, 0usize);
        let mut train = Vec::new();
        while let Some(next) = self.boarding.front() {
            let fits = events + next.wave.len() <= limits.events
                && bytes.saturating_add(next.bytes) <= limits.bytes;
            if !train.is_empty() && !fits {
                break;
            }
            let Some(rider) = self.boarding.pop_front() else {
                break;
            };
            events += rider.wave.len();
            bytes += rider.bytes;
            self.events -= rider.wave.len();
            self.bytes -= rider.bytes;
            train.push(rider);
        }
        train
    }
}

/// Counts a running train until it ends. If its task is dropped mid-call (the runtime shuts
/// down), the waves still boarding are let go too when no other train would take them: their
/// batches release them.
struct Running<'a> {
    trains: &'a Trains,
    ended: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let mut state = self.trains.lock();
        state.running = state.running.saturating_sub(1);
        if state.running == 0 && !state.boarding.is_empty() {
            state.boarding.clear();
            (state.events, state.bytes) = (0, 0);
        }
    }
}

/// Runs trains, one after the other, while waves are boarding.
async fn run<P: Publisher>(
    inner: Arc<Inner<P>>,
    mut train: Vec<Rider>,
    limits: Limits,
    overrun: Duration,
) {
    let mut running = Running {
        trains: &inner.trains,
        ended: false,
    };
    loop {
        depart(&inner.publisher, train, overrun).await;
        let mut state = inner.trains.lock();
        if state.boarding.is_empty() {
            // Under the lock: a wave boarding from now on finds no train running and leaves.
            state.running = state.running.saturating_sub(1);
            running.ended = true;
            return;
        }
        train = state.board(limits);
    }
}

/// Publishes one train's waves in one call and answers each wave.
async fn depart<P: Publisher>(publisher: &P, mut train: Vec<Rider>, overrun: Duration) {
    let Some(deadline) = train.iter().map(|r| r.deadline).min() else {
        return;
    };
    if train.len() == 1 {
        // Alone: the wave is the call, and a failure keeps the publisher's own error.
        if let Some(rider) = train.pop() {
            let result = publish_guarded(publisher, &rider.wave, deadline, overrun)
                .await
                .boxed();
            let _ = rider.reply.send(Ride {
                wave: rider.wave,
                result,
            });
        }
        return;
    }
    let mut riders = Vec::with_capacity(train.len());
    let mut events = Vec::with_capacity(train.iter().map(|r| r.wave.len()).sum());
    for rider in train {
        riders.push((rider.wave.len(), rider.reply));
        events.extend(rider.wave);
    }
    let result = publish_guarded(publisher, &events, deadline, overrun).await;
    let (mut outcomes, failure) = match result {
        Guarded::Done(Ok(outcomes)) => (Some(outcomes.into_iter()), None),
        Guarded::Done(Err(e)) => (None, Some(Failed::Error(Arc::new(e)))),
        Guarded::TimedOut => (None, Some(Failed::TimedOut)),
        Guarded::Panicked(m) => (None, Some(Failed::Panicked(m))),
    };
    let mut events = events.into_iter();
    for (len, reply) in riders {
        let wave: Vec<ClaimedEvent> = events.by_ref().take(len).collect();
        let result = match (&mut outcomes, &failure) {
            // A missing outcome stays missing: the batch counts it as a retry.
            (Some(o), _) => Guarded::Done(Ok(o.by_ref().take(len).collect())),
            (None, Some(Failed::Error(e))) => {
                Guarded::Done(Err(Box::new(SharedError(Arc::clone(e))) as TrainError))
            }
            (None, Some(Failed::Panicked(m))) => Guarded::Panicked(m.clone()),
            (None, Some(Failed::TimedOut) | None) => Guarded::TimedOut,
        };
        let _ = reply.send(Ride { wave, result });
    }
}

/// How a shared call failed, for each of its waves.
enum Failed<E> {
    Error(Arc<E>),
    TimedOut,
    Panicked(String),
}

/// A publisher's error shared by the waves of one train: displays as the error, with its source.
#[derive(Debug)]
struct SharedError<E>(Arc<E>);

impl<E: std::fmt::Display> std::fmt::Display for SharedError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: StdError> StdError for SharedError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}
