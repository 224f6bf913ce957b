//! The relay's workers and their supervision: a worker that panics or fails is logged, counted and
//! restarted with a backoff; a relay that cannot keep its workers alive stops with an error.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Relay;
use super::guard::panic_message;
use super::waiting::{IdleFlag, IdleWorkers};
use crate::backoff::{Backoff, InfraBackoff};
use crate::error::{Error, ErrorKind};
use crate::publisher::Publisher;

/// Infrastructure failures are retried with a delay doubling from this…
const INFRA_BACKOFF_BASE: Duration = Duration::from_millis(100);
/// …up to this.
pub(crate) const INFRA_BACKOFF_CAP: Duration = Duration::from_secs(30);

/// A relay gives up (its `run` returns an error) when its workers died more than this many times…
pub const MAX_WORKER_RESTARTS: usize = 10;
/// …within this window.
pub const WORKER_RESTART_WINDOW: Duration = Duration::from_secs(60);
/// A restarted worker waits a delay doubling from this (per restart within the window)…
const RESTART_BACKOFF_BASE: Duration = Duration::from_millis(100);
/// …up to this.
const RESTART_BACKOFF_CAP: Duration = Duration::from_secs(5);

/// A worker whose publisher has no room for events asks again after this (the publisher may
/// itself wait a while before answering: [`Publisher::room`]).
const NO_ROOM_PAUSE: Duration = Duration::from_millis(50);

/// The fallback poll of an idle relay, taken by one of its idle workers: the others wait for a
/// wake-up (a notification, a claim that came back full, a put-back event due). Each idle worker
/// polled on its own timer: four claims every poll interval where one does, and over a backlog
/// blocked behind dead letters each claim reads it all (black-box run: 80 ms per claim over
/// 100 000 blocked events). Given back when the worker wakes, or dies.
struct PollRole<'a>(Option<&'a AtomicBool>);

impl<'a> PollRole<'a> {
    /// The role, unless another idle worker holds it.
    fn take(polling: &'a AtomicBool) -> Self {
        let free = polling
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        PollRole(free.then_some(polling))
    }

    /// No role: a worker that is not idle.
    fn none() -> Self {
        PollRole(None)
    }

    fn held(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for PollRole<'_> {
    fn drop(&mut self) {
        if let Some(polling) = self.0 {
            polling.store(false, Ordering::Release);
        }
    }
}

/// The restarts within the last [`WORKER_RESTART_WINDOW`].
struct RestartBudget {
    recent: VecDeque<Instant>,
    backoff: Backoff,
}

impl RestartBudget {
    fn new() -> Self {
        RestartBudget {
            recent: VecDeque::new(),
            backoff: Backoff::new(RESTART_BACKOFF_BASE, RESTART_BACKOFF_CAP, 0.2),
        }
    }

    /// Records a restart at `now`; `None` when the budget is spent, else the delay before the
    /// restarted worker starts.
    fn restart(&mut self, now: Instant) -> Option<Duration> {
        while self
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > WORKER_RESTART_WINDOW)
        {
            self.recent.pop_front();
        }
        self.recent.push_back(now);
        if self.recent.len() > MAX_WORKER_RESTARTS {
            return None;
        }
        let n = u32::try_from(self.recent.len() - 1).unwrap_or(u32::MAX);
        Some(self.backoff.delay_random(n))
    }

    fn in_window(&self) -> usize {
        self.recent.len()
    }
}

impl<P: Publisher> Relay<P> {
    /// Runs `concurrency` workers until `shutdown` is cancelled, restarting those that die. `Err`
    /// when the restart budget is spent (the workers still running are stopped first, within the
    /// grace period).
    pub(super) async fn supervise_workers(
        &self,
        idle: &IdleWorkers,
        shutdown: &CancellationToken,
    ) -> Result<(), Error> {
        // Cancelled on shutdown, and when the supervisor gives up (without cancelling the caller's
        // token).
        let stop = shutdown.child_token();
        let mut workers: JoinSet<Result<(), Error>> = JoinSet::new();
        let spawn = |workers: &mut JoinSet<Result<(), Error>>, delay: Duration| {
            let (relay, stop, idle) = (self.clone(), stop.clone(), idle.flag());
            workers.spawn(async move {
                tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(delay) => {}
                }
                relay.worker(idle, stop).await
            });
        };
        for _ in 0..self.inner.config.concurrency {
            spawn(&mut workers, Duration::ZERO);
        }
        let mut budget = RestartBudget::new();
        let mut gave_up: Option<Error> = None;
        loop {
            let joined = tokio::select! {
                _ = stop.cancelled() => break,
                joined = workers.join_next() => joined,
            };
            let Some(joined) = joined else { break };
            if stop.is_cancelled() {
                break;
            }
            let reason = match joined {
                Ok(Ok(())) => "the worker returned".to_owned(),
                Ok(Err(e)) => e.to_string(),
                Err(e) if e.is_panic() => {
                    format!("panicked: {}", panic_message(e.into_panic().as_ref()))
                }
                Err(e) => e.to_string(),
            };
            if let Some(m) = &self.inner.metrics {
                m.worker_restart();
            }
            match budget.restart(Instant::now()) {
                Some(delay) => {
                    tracing::error!(
                        reason = %reason, restarts_in_window = budget.in_window(),
                        retry_in_ms = delay.as_millis() as u64, "relay worker died; restarting it"
                    );
                    spawn(&mut workers, delay);
                }
                None => {
                    tracing::error!(
                        reason = %reason, restarts_in_window = budget.in_window(),
                        "relay workers keep dying; stopping the relay"
                    );
                    gave_up = Some(Error::new(
                        ErrorKind::Panic,
                        format!(
                            "relay workers died more than {MAX_WORKER_RESTARTS} times within \
                             {WORKER_RESTART_WINDOW:?}; last: {reason}"
                        ),
                    ));
                    stop.cancel();
                    break;
                }
            }
        }
        let grace = self.inner.config.shutdown_grace;
        let grace_ends = tokio::time::Instant::now() + grace;
        let drained = tokio::time::timeout(grace, async {
            while workers.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                grace_ms = grace.as_millis() as u64,
                "batches still in flight after the grace period; releasing their claims"
            );
            workers.abort_all();
            while workers.join_next().await.is_some() {}
        }
        // What is left of the grace period goes to the calls that went on after their publish.
        let left = grace_ends.saturating_duration_since(tokio::time::Instant::now());
        super::settle::settle_calls_going_on(&self.inner, left).await;
        match gave_up {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// One worker: claim batches back to back while there is work; when idle, sleep until woken
    /// or the poll tick. Returns `Ok` on shutdown, `Err` when a batch returns an error of kind
    /// [`ErrorKind::Panic`], so the supervisor restarts the worker. (A publisher's panic is not
    /// one: the batch records it as the events' failure and goes on.)
    ///
    /// Wake-ups go to one idle worker at a time (`Inner::wake`): a notification, the claim after
    /// the waiting barrier, or a claim that came back full (more is waiting: one more worker joins
    /// in, and so on while claims stay full). A wake-up that finds no worker idle is kept for the
    /// next one to go idle, which claims again at once, so a notification that arrives during a
    /// claim is never lost. Waking every worker for each notification made all of them claim for
    /// one event at light load (and again after each batch), which the one that found it paid for
    /// on a small machine.
    async fn worker(self, mut idle: IdleFlag, shutdown: CancellationToken) -> Result<(), Error> {
        let mut infra = InfraBackoff::new(INFRA_BACKOFF_BASE, INFRA_BACKOFF_CAP);
        while !shutdown.is_cancelled() {
            let began = Instant::now();
            // Busy from the claim on, its batch included: flagged only once the batch had ended,
            // a relay keeping up with a steady stream (one event per claim, then an empty claim)
            // counted as busy for the empty claims alone, and advertised waiting throughout, so
            // every commit notified (`waiting.rs`; the wake-ups test of a relay busy most of the
            // time failed 2 runs in 6).
            idle.set(false);
            // A publisher without room for new events (its calls all going on after their
            // publishes: a destination answering slowly) is not handed a batch it can only put
            // back, each event a row written: the worker claims no more than it has room for,
            // nothing while it has none (`room` waits a while for some first). Claimed and put
            // back regardless, a backlog bound for a destination answering in 4-7 s was claimed
            // and put back about once a second, 23 times per event published (black-box run).
            let room = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                room = self.inner.publisher.room() => room,
            };
            if room == Some(0) {
                // Asked again after a pause, should the publisher answer at once.
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(NO_ROOM_PAUSE) => continue,
                }
            }
            // Made before the batch: a destination found back while it fails still wakes the
            // back-off that follows.
            let mut recovered = std::pin::pin!(self.inner.publisher.recovered());
            let mut publisher_failed = false;
            // Idle, the fallback poll is this worker's, or another's (`PollRole`): only the
            // worker that holds it waits on a timer; backing off, every worker does.
            let mut poll = PollRole::none();
            let mut timed = true;
            let ran = self.run_once_until(&shutdown, room).await;
            let delay = match ran.result {
                Ok(report) => {
                    self.inner.slots.worker_succeeded();
                    if infra.failures() > 0 {
                        // The others backing off try again now, not at the end of their delays.
                        self.inner.database_back.notify_waiters();
                    }
                    infra.succeeded();
                    self.inner
                        .outage
                        .succeeded(report.published > 0, report.claimed == 0);
                    // Events still in progress (an upload going on) are no outage: they do
                    // not keep one's episode open.
                    if report.deferred == report.in_progress {
                        self.inner.outage.none_put_back(report.published > 0);
                    }
                    // All workers idle: the relay advertises waiting (writers notify); busy for a
                    // while: it stops, and the busy workers claim again on their own.
                    idle.set(report.claimed == 0);
                    if report.claimed > 0 {
                        continue;
                    }
                    poll = PollRole::take(&self.inner.polling);
                    timed = poll.held();
                    self.inner.config.poll_interval
                }
                Err(e) if e.kind() == ErrorKind::Panic => {
                    // Its batch's events are released: another worker claims them now, not after
                    // this one's restart delay.
                    self.inner.wake.notify_one();
                    return Err(e);
                }
                Err(e) if ran.slot_wait.is_some() => {
                    // Fewer connection slots than workers: the others work; this one waits for
                    // a slot (no failure, no back-off growing), the helpers giving theirs up.
                    self.inner.wake.notify_one();
                    self.inner.slots.worker_failed(&e);
                    self.inner.slots.say_fewer_than_workers(
                        ran.slot_wait.unwrap_or_default(),
                        self.inner.config.concurrency,
                    );
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(self.inner.config.poll_interval) => {}
                    }
                    continue;
                }
                Err(e) => {
                    // This worker backs off: the wake-up it may have been given goes to another.
                    self.inner.wake.notify_one();
                    self.inner.slots.worker_failed(&e);
                    // Not a publish past its time limit: the broker's, not the database's
                    // (review).
                    let database = match e.kind() {
                        ErrorKind::Database | ErrorKind::Pool => true,
                        ErrorKind::Timeout => !e.is_publishers(),
                        _ => false,
                    };
                    if database {
                        self.watch_database(&shutdown);
                    }
                    publisher_failed = !database;
                    let delay = infra.failed();
                    let stopping = shutdown.is_cancelled();
                    self.inner
                        .outage
                        .failed(&e, began, infra.failures(), delay, stopping);
                    delay
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = self.inner.wake.notified(), if infra.failures() == 0 => {}
                _ = self.inner.database_back.notified(), if infra.failures() > 0 => {}
                // The publisher's broker answers again: on at once, not at the back-off's end.
                () = &mut recovered, if publisher_failed => {}
                _ = tokio::time::sleep(delay), if timed => {}
            }
            drop(poll);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_allows_restarts_within_the_window_then_refuses() {
        let mut b = RestartBudget::new();
        let t0 = Instant::now();
        for i in 0..MAX_WORKER_RESTARTS {
            let d = b.restart(t0).expect("within budget");
            assert!(d <= RESTART_BACKOFF_CAP, "restart {i}: {d:?}");
        }
        assert!(b.restart(t0).is_none(), "one more in the window is refused");
        // Once the window has passed, restarts are allowed again.
        let later = t0 + WORKER_RESTART_WINDOW + Duration::from_secs(1);
        assert!(b.restart(later).is_some());
        assert_eq!(b.in_window(), 1);
    }
}
