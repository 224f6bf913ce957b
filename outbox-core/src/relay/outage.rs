//! How the relay reports trouble that lasts: batches failing as a whole (the database or the
//! publisher down) and events put back because their destination is unavailable. One warning when
//! it starts, a reminder each minute while it goes on, one line when batches succeed again —
//! instead of a warning for every failed batch of every worker, or for every put-back batch.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::InfraBackoff;
use crate::error::Error;

/// How often a reminder is logged while batches keep failing; also the least time between two
/// outages' first warnings (batches that fail and succeed by turns, one destination down and
/// another up, are not a warning each).
pub(crate) const REMINDER_EVERY: Duration = Duration::from_secs(60);

/// After a publisher failure, a claim that finds nothing ends the outage only when no batch has
/// failed for this long: another relay may have published everything since, and this one may
/// claim nothing for a long time. This is the least; a relay uses more than its workers' longest
/// back-off and publish timeout together ([`Outage::new`]).
pub(crate) const QUIET_END: Duration = Duration::from_secs(35);

/// An outage that was not warned about (another was, less than [`REMINDER_EVERY`] before) and
/// lasted this long logs its end all the same.
pub(crate) const QUIET_RECOVERY: Duration = Duration::from_secs(15);

/// The failures since the last batch that succeeded.
#[derive(Debug, Clone, Copy)]
struct Failing {
    since: Instant,
    /// The last failure.
    last: Instant,
    batches: u64,
    reminded: Instant,
    /// A failure of this outage was the publisher's: only a batch that published shows it works
    /// again; a claim that finds nothing (the others' events locked) does not.
    publisher: bool,
    /// Whether this outage was warned about (and so is its end).
    warned: bool,
}

/// Events put back unsent since the last line about them.
#[derive(Debug, Clone, Copy)]
struct Deferring {
    events: u64,
    /// The last warning about them.
    logged: Option<Instant>,
    /// The last line saying they are sent again.
    ended: Option<Instant>,
    /// The last time events were put back.
    last: Instant,
    /// Events were put back since the last end line: one is due once none has been for a while.
    open: bool,
    /// A batch published since events were last put back: without one, nothing was sent since
    /// (the events put back were dead-lettered once their destination stayed broken past the
    /// limit, say), and no line says they are sent again. (The relay does not tell whose events a
    /// batch published: with other destinations' events sent meanwhile, the line still comes.)
    sent: bool,
}

#[derive(Debug, Default)]
struct State {
    failing: Option<Failing>,
    /// When the last outage ended.
    recovered: Option<Instant>,
    last_warned: Option<Instant>,
    deferring: Option<Deferring>,
}

/// The relay's lasting trouble, shared by its workers.
#[derive(Debug)]
pub(crate) struct Outage {
    state: Mutex<State>,
    /// See [`QUIET_END`].
    quiet_end: Duration,
    /// How long no event must have been put back before a batch that sends says they are sent
    /// again: longer than it takes a put-back event to come back (its delay, or the poll), so
    /// that the healthy events sent in between do not end it while the destination is still down.
    deferrals_end: Duration,
}

impl Default for Outage {
    fn default() -> Self {
        Outage::new(Duration::ZERO, Duration::ZERO)
    }
}

/// What a failure or success is to be logged as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    /// The first failure after a success: a warning.
    Started,
    /// Failing for a minute more: a warning with the count.
    StillFailing { for_: Duration, batches: u64 },
    /// Nothing at `warn` or `info`: another failure within the minute, a claim that found nothing
    /// while the publisher fails, the end of an outage that was not warned about.
    Quiet,
    /// The first success after failures that were warned about, or lasted
    /// [`QUIET_RECOVERY`]: an info line, or a warning when no line told of the outage (`warned`).
    Recovered {
        after: Duration,
        batches: u64,
        warned: bool,
    },
    /// A success after a success: nothing.
    Fine,
}

impl Outage {
    /// For a relay whose batches may take `longest_batch` (its workers' longest back-off, the
    /// publish timeout and its overrun): after a publisher failure, an empty claim ends the
    /// outage once no batch has failed for that and 5 s more, at least [`QUIET_END`]: a batch
    /// still publishing (and about to fail) holds the events the empty claims miss.
    /// `deferrals_end`: see [`Outage::sent_at`].
    pub(crate) fn new(longest_batch: Duration, deferrals_end: Duration) -> Outage {
        Outage {
            state: Mutex::new(State::default()),
            quiet_end: longest_batch
                .saturating_add(Duration::from_secs(5))
                .max(QUIET_END),
            deferrals_end,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a failed batch at `now`; `publisher`: the publisher failed (not the database).
    #[cfg(test)]
    pub(crate) fn failed_at(&self, now: Instant, publisher: bool) -> Report {
        self.failed_between(now, now, publisher)
    }

    /// Records a batch that began at `began` and failed at `now` (an outage that starts with it
    /// is dated from `began`: a claim can wait half a minute on a silent database before it
    /// fails); `publisher`: the publisher failed (not the database).
    pub(crate) fn failed_between(&self, began: Instant, now: Instant, publisher: bool) -> Report {
        let mut state = self.lock();
        let recent = state
            .last_warned
            .is_some_and(|t| now.saturating_duration_since(t) < REMINDER_EVERY);
        let straggler = state.recovered.is_some_and(|ended| began < ended);
        match state.failing.as_mut() {
            // A batch that began before the last outage ended, failing late (a claim or a
            // publish that waited out a silent database): that outage's, not a new one, which
            // the batches begun since would show. Counted as one, each such batch opened an
            // outage dated from its start, ended by the next success: "succeed again" up to three
            // times within 200 ms (black-box run).
            None if straggler => Report::Quiet,
            None => {
                state.failing = Some(Failing {
                    since: began.min(now),
                    last: now,
                    batches: 1,
                    // Not warned (another outage was, less than a minute ago): its first line is
                    // due a minute after that warning, not after its own start (black-box run: a
                    // relay stalled a minute by an outage 15 s after another logged nothing).
                    reminded: match state.last_warned {
                        Some(warned) if recent => warned,
                        _ => now,
                    },
                    publisher,
                    warned: !recent,
                });
                if recent {
                    return Report::Quiet;
                }
                state.last_warned = Some(now);
                Report::Started
            }
            Some(f) => {
                f.batches += 1;
                f.last = now;
                f.publisher |= publisher;
                if now.saturating_duration_since(f.reminded) < REMINDER_EVERY {
                    return Report::Quiet;
                }
                f.reminded = now;
                f.warned = true;
                let report = Report::StillFailing {
                    for_: now.saturating_duration_since(f.since),
                    batches: f.batches,
                };
                state.last_warned = Some(now);
                report
            }
        }
    }

    /// Records a batch that succeeded at `now`; `published`: it published events; `empty`: it
    /// claimed none.
    pub(crate) fn succeeded_at(&self, now: Instant, published: bool, empty: bool) -> Report {
        let mut state = self.lock();
        let Some(f) = state.failing else {
            return Report::Fine;
        };
        // Until when it failed: now, or (an empty claim after a quiet while) its last failure.
        let until = if published || !f.publisher {
            now
        } else if empty && now.saturating_duration_since(f.last) >= self.quiet_end {
            f.last
        } else {
            return Report::Quiet;
        };
        state.failing = None;
        state.recovered = Some(now);
        // An outage not warned about says that it ended when it lasted a while: it was one.
        if f.warned || until.saturating_duration_since(f.since) >= QUIET_RECOVERY {
            Report::Recovered {
                after: until.saturating_duration_since(f.since),
                batches: f.batches,
                warned: f.warned,
            }
        } else {
            Report::Quiet
        }
    }

    /// Records `events` put back unsent at `now` (their destination unavailable); `Some(n)` when
    /// a line is due, counting the `n` events put back since the last one.
    pub(crate) fn deferred_at(&self, now: Instant, events: usize) -> Option<u64> {
        let mut state = self.lock();
        let d = state.deferring.get_or_insert(Deferring {
            events: 0,
            logged: None,
            ended: None,
            last: now,
            open: false,
            sent: false,
        });
        d.events = d
            .events
            .saturating_add(u64::try_from(events).unwrap_or(u64::MAX));
        d.last = now;
        d.open = true;
        d.sent = false;
        let due = d
            .logged
            .is_none_or(|t| now.saturating_duration_since(t) >= REMINDER_EVERY);
        if !due {
            return None;
        }
        d.logged = Some(now);
        Some(std::mem::take(&mut d.events))
    }

    /// Records a batch at `now` that put no event back (it sent them, or claimed none; `published`:
    /// it published at least one); `Some(n)` when it ends the events' being put back, with the `n`
    /// put back since the last line (which would otherwise wait for the next warning). Only once
    /// a batch has published since the last event was put back (events put back until their
    /// destination's limit and then dead-lettered are not "sent again"), once none has been put back for
    /// `deferrals_end` (a destination still down puts its events back again each time they come
    /// back, while the healthy ones are sent in between), and at most once a minute (a destination
    /// failing and recovering by turns is not a pair of lines each time; its count waits for the
    /// next one).
    pub(crate) fn sent_at(&self, now: Instant, published: bool) -> Option<u64> {
        let mut state = self.lock();
        let d = state.deferring.as_mut().filter(|d| d.open)?;
        d.sent |= published;
        if !d.sent {
            return None;
        }
        let quiet = now.saturating_duration_since(d.last) >= self.deferrals_end;
        let spaced = d
            .ended
            .is_none_or(|t| now.saturating_duration_since(t) >= REMINDER_EVERY);
        if !(quiet && spaced) {
            return None;
        }
        d.open = false;
        d.ended = Some(now);
        Some(std::mem::take(&mut d.events))
    }

    /// Records and logs a failed batch that began at `began`; `retry_in` is the failing worker's
    /// back-off; `stopping`: the relay is shutting down (no retry follows).
    pub(crate) fn failed(
        &self,
        error: &Error,
        began: Instant,
        consecutive: u32,
        retry_in: Duration,
        stopping: bool,
    ) {
        let retry_in_ms = retry_in.as_millis() as u64;
        let publisher = error.is_publishers();
        let report = self.failed_between(began, Instant::now(), publisher);
        // The whole chain: a pool's TLS failure said "error performing TLS handshake" and not why
        // (black-box run: an untrusted certificate, named only on the LISTEN connection's line).
        let error = crate::error_chain(error);
        if stopping {
            tracing::info!(error = %error, "relay batch failed while shutting down");
            return;
        }
        match report {
            Report::Started => tracing::warn!(
                error = %error, retry_in_ms,
                "relay batch failed; the workers retry with back-off (while batches keep failing, \
                 a reminder is logged each minute, and a line when they succeed again)"
            ),
            Report::StillFailing { for_, batches } => tracing::warn!(
                error = %error, failing_for_secs = for_.as_secs(), failed_batches = batches,
                retry_in_ms, "relay batches still failing"
            ),
            _ => tracing::debug!(
                error = %error, consecutive_failures = consecutive, retry_in_ms,
                "relay batch failed"
            ),
        }
    }

    /// Records a batch that succeeded (`published`: it published events; `empty`: it claimed
    /// none), and logs the end of an outage.
    pub(crate) fn succeeded(&self, published: bool, empty: bool) {
        let report = self.succeeded_at(Instant::now(), published, empty);
        match report {
            Report::Recovered {
                after,
                batches,
                warned: true,
            } => tracing::info!(
                failed_for_ms = after.as_millis() as u64,
                failed_batches = batches,
                "relay batches succeed again"
            ),
            // The only line of this outage: at `warn`, where an operator looks (black-box run: a
            // 35 s stall was told at `info` alone).
            Report::Recovered {
                after,
                batches,
                warned: false,
            } => tracing::warn!(
                failed_for_ms = after.as_millis() as u64,
                failed_batches = batches,
                "relay batches failed for a while and succeed again (not warned about when they \
                 started: another outage was, less than a minute before)"
            ),
            _ => {}
        }
    }

    /// Records and logs (at most once a minute) events put back because their destination is
    /// unavailable; `reason` is the last one's error.
    pub(crate) fn deferred(&self, events: usize, retry_in: Duration, reason: &str) {
        match self.deferred_at(Instant::now(), events) {
            Some(n) => tracing::warn!(
                deferred = n,
                retry_in_ms = retry_in.as_millis() as u64,
                last_reason = reason,
                "events put back without counting an attempt: their destination is unavailable, \
                 or the publish deadline came before they were sent (the count since the last \
                 such line, and the last one's reason; logged at most once a minute)"
            ),
            None => tracing::debug!(deferred = events, "events put back without an attempt"),
        }
    }

    /// Records a batch that succeeded and put no event back (`published`: it published some), and
    /// logs the end of events being put back (when a line was logged about them).
    pub(crate) fn none_put_back(&self, published: bool) {
        if let Some(n) = self.sent_at(Instant::now(), published) {
            tracing::info!(
                deferred = n,
                "events are sent again: none was put back for a while (`deferred`: the events put \
                 back since the last line)"
            );
        }
    }
}

/// Whether a failure of a task that retries on its own (a periodic refresh) is logged at `warn`:
/// the first of a run of failures (`first`), then at most once a minute (`last`: when the last
/// warning was); the others at `debug`.
pub(crate) fn warn_now(first: bool, last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    let due = first || last.is_none_or(|t| now.saturating_duration_since(t) >= REMINDER_EVERY);
    if due {
        *last = Some(now);
    }
    due
}

/// The longest pause between two attempts to reopen the LISTEN connection or the one advertising
/// waiting. Shorter than the workers' back-off cap (30 s): the LISTEN connection's return is what
/// tells workers backing off after a database outage that the database is back, and until the
/// waiting connection is back, writers do not wake an idle relay (it waits for its poll).
pub(crate) const RECONNECT_CAP: Duration = Duration::from_secs(5);

/// How a connection that reconnects on its own (LISTEN, advertising waiting) paces and logs its
/// attempts: its back-off; its loss at `warn` at most once a minute (a reminder a minute while it
/// stays lost), so that a connection dropped again and again (an idle timeout, a proxy) is not a
/// warning each time; its return at `info` only after a loss warned about.
#[derive(Debug)]
pub(crate) struct Reconnects {
    backoff: InfraBackoff,
    last_warned: Option<Instant>,
    loss_warned: bool,
}

impl Reconnects {
    /// A back-off from 100 ms doubling to `cap`.
    pub(crate) fn up_to(cap: Duration) -> Reconnects {
        Reconnects {
            backoff: InfraBackoff::new(Duration::from_millis(100), cap),
            last_warned: None,
            loss_warned: false,
        }
    }

    /// Records a failure (the connection lost, or a reconnect failed): the delay before the next
    /// attempt, and whether to log it at `warn`.
    pub(crate) fn failed(&mut self) -> (Duration, bool) {
        self.failed_at(Instant::now())
    }

    fn failed_at(&mut self, now: Instant) -> (Duration, bool) {
        let delay = self.backoff.failed();
        let due = self
            .last_warned
            .is_none_or(|t| now.saturating_duration_since(t) >= REMINDER_EVERY);
        if due {
            self.last_warned = Some(now);
            self.loss_warned = true;
        }
        (delay, due)
    }

    /// The failures since the connection last worked.
    pub(crate) fn failures(&self) -> u32 {
        self.backoff.failures()
    }

    /// Records that the connection works (again); `true` when its return is to be logged at
    /// `info` (its loss was).
    pub(crate) fn connected(&mut self) -> bool {
        self.backoff.succeeded();
        std::mem::take(&mut self.loss_warned)
    }
}

#[cfg(test)]
mod tests;
