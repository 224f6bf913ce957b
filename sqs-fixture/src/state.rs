//! The fixture's shared state: queues, counters, faults and recorded messages.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::{ACCOUNT_ID, CallFault, EntryFault, Faults, SentMessage};

pub(crate) struct Queue {
    pub(crate) url: String,
    pub(crate) fifo: bool,
    pub(crate) sequence: u64,
    /// Its `MaximumMessageSize` attribute (SQS's limit unless set).
    pub(crate) max_message_bytes: usize,
}

pub(crate) struct State {
    pub(crate) endpoint: String,
    pub(crate) calls: AtomicU64,
    /// TCP connections accepted so far.
    pub(crate) connections: AtomicU64,
    pub(crate) calls_by_action: Mutex<BTreeMap<String, u64>>,
    pub(crate) in_flight: AtomicUsize,
    pub(crate) max_in_flight: AtomicUsize,
    pub(crate) latency_nanos: AtomicU64,
    pub(crate) faults: Mutex<Faults>,
    pub(crate) queues: Mutex<HashMap<String, Queue>>,
    pub(crate) recording: AtomicBool,
    pub(crate) accepted: AtomicU64,
    pub(crate) messages: Mutex<Vec<SentMessage>>,
    pub(crate) next_message_id: AtomicU64,
    /// With [`verify_signatures`](crate::SqsFixture::verify_signatures): the access and secret key.
    pub(crate) signing_key: Mutex<Option<(String, String)>>,
    pub(crate) signatures_verified: AtomicU64,
    pub(crate) last_user_agent: Mutex<Option<String>>,
    /// How far the fixture's clock is ahead of the machine's, in seconds (negative: behind).
    pub(crate) clock_skew_secs: std::sync::atomic::AtomicI64,
    /// Queues whose calls are not answered while they are here (by name).
    pub(crate) silent: Mutex<Vec<String>>,
    /// Queues whose calls are answered this much later (by name).
    pub(crate) slow: Mutex<Vec<(String, std::time::Duration)>>,
    /// Actions whose calls are answered this much later.
    pub(crate) slow_actions: Mutex<Vec<(String, std::time::Duration)>>,
    /// Queues whose calls are carried out at once and answered this much later (by name).
    pub(crate) late: Mutex<Vec<(String, std::time::Duration)>>,
    /// Queues whose every call fails with this fault (by name).
    pub(crate) failing: Mutex<Vec<(String, crate::CallFault)>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking predicate must not wedge the fixture.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// The fixture's clock: the machine's, moved by [`set_clock_skew`](crate::SqsFixture::set_clock_skew).
    pub(crate) fn clock(&self) -> std::time::SystemTime {
        let skew = self.clock_skew_secs.load(Ordering::Relaxed);
        let by = Duration::from_secs(skew.unsigned_abs());
        let now = std::time::SystemTime::now();
        if skew >= 0 { now + by } else { now - by }
    }

    pub(crate) fn queue_url(&self, name: &str) -> String {
        format!("{}/{ACCOUNT_ID}/{name}", self.endpoint)
    }

    pub(crate) fn create_queue(&self, name: &str) -> String {
        let url = self.queue_url(name);
        lock(&self.queues)
            .entry(name.to_owned())
            .or_insert_with(|| Queue {
                url: url.clone(),
                fifo: name.ends_with(".fifo"),
                sequence: 0,
                max_message_bytes: crate::protocol::MAX_MESSAGE_BYTES,
            })
            .url
            .clone()
    }

    pub(crate) fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_nanos.load(Ordering::Relaxed))
    }

    pub(crate) fn count_call(&self, action: &str) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let mut by_action = lock(&self.calls_by_action);
        match by_action.get_mut(action) {
            Some(n) => *n += 1,
            None => {
                by_action.insert(action.to_owned(), 1);
            }
        }
    }

    /// The fault the current call gets, if any (consumes one of "the next N calls").
    pub(crate) fn take_call_fault(&self, action: &str) -> Option<CallFault> {
        let mut faults = lock(&self.faults);
        match &faults.action_until {
            Some((a, until, fault)) if a == action && Instant::now() < *until => {
                return Some(fault.clone());
            }
            Some((_, until, _)) if Instant::now() >= *until => faults.action_until = None,
            _ => {}
        }
        if let Some((left, fault)) = &mut faults.next_calls {
            let fault = fault.clone();
            *left -= 1;
            if *left == 0 {
                faults.next_calls = None;
            }
            return Some(fault);
        }
        match &faults.until {
            Some((until, fault)) if Instant::now() < *until => Some(fault.clone()),
            Some(_) => {
                faults.until = None;
                None
            }
            None => None,
        }
    }

    pub(crate) fn entry_fault(&self, message: &SentMessage) -> Option<EntryFault> {
        let faults = lock(&self.faults);
        faults
            .entries
            .iter()
            .find(|rule| (rule.matches)(message))
            .map(|rule| rule.fault.clone())
    }

    pub(crate) fn new_message_id(&self) -> String {
        let n = self.next_message_id.fetch_add(1, Ordering::Relaxed);
        format!("00000000-0000-4000-8000-{n:012x}")
    }

    /// Whether accepted messages are needed as [`SentMessage`]s: to record them, or for a rule
    /// that fails entries by their content.
    pub(crate) fn keeps_messages(&self) -> bool {
        self.recording.load(Ordering::Relaxed) || !lock(&self.faults).entries.is_empty()
    }

    /// Counts `n` messages accepted that were not built (see [`keeps_messages`](Self::keeps_messages)).
    pub(crate) fn count_accepted(&self, n: u64) {
        self.accepted.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn record(&self, messages: Vec<SentMessage>) {
        self.accepted
            .fetch_add(messages.len() as u64, Ordering::Relaxed);
        if self.recording.load(Ordering::Relaxed) {
            lock(&self.messages).extend(messages);
        }
    }
}

/// Counts a call as in flight while alive.
pub(crate) struct InFlight<'a>(&'a State);

impl<'a> InFlight<'a> {
    pub(crate) fn enter(state: &'a State) -> Self {
        let now = state.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        state.max_in_flight.fetch_max(now, Ordering::Relaxed);
        InFlight(state)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl State {
    /// Whether a call with this body names a silenced queue (its URL ends in `/name`).
    pub(crate) fn silenced(&self, body: &[u8]) -> bool {
        let silent = lock(&self.silent);
        if silent.is_empty() {
            return false;
        }
        let body = String::from_utf8_lossy(body);
        silent.iter().any(|name| names(&body, name))
    }

    /// The delay of a call of `action`, when slowed.
    pub(crate) fn slow_action(&self, action: &str) -> Option<std::time::Duration> {
        lock(&self.slow_actions)
            .iter()
            .find(|(a, _)| a == action)
            .map(|(_, latency)| *latency)
    }

    /// The delay of a call with this body to a slow queue.
    pub(crate) fn slow(&self, body: &[u8]) -> Option<std::time::Duration> {
        for_named(&self.slow, body)
    }

    /// The fault of a call with this body to a failing queue.
    pub(crate) fn queue_fault(&self, body: &[u8]) -> Option<crate::CallFault> {
        for_named(&self.failing, body)
    }

    /// The delay of the answer to a call with this body, carried out at once.
    pub(crate) fn late(&self, body: &[u8]) -> Option<std::time::Duration> {
        for_named(&self.late, body)
    }
}

/// What `by_queue` holds for the first queue a call's JSON body names.
fn for_named<T: Clone>(by_queue: &Mutex<Vec<(String, T)>>, body: &[u8]) -> Option<T> {
    let by_queue = lock(by_queue);
    if by_queue.is_empty() {
        return None;
    }
    let body = String::from_utf8_lossy(body);
    by_queue
        .iter()
        .find(|(name, _)| names(&body, name))
        .map(|(_, value)| value.clone())
}

/// Whether a call's JSON body names the queue `name` (a URL ending in `/name`).
fn names(body: &str, name: &str) -> bool {
    body.contains(&format!("/{name}\""))
}
