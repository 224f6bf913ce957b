//! New connections of a relay's pool while they stall: one at a time, spaced out.
//!
//! A connection that stalls during or right after its start-up (a middlebox holding its bytes,
//! both sockets open) is given up, but its server session stays until the server's own limits end
//! it (`idle_session_timeout`, a minute; `authentication_timeout` during login). The relay's
//! workers each asked for a new connection again after their back-off, so one relay opened one
//! or two a second and held ~90 of the server's connection slots within a minute (black-box
//! run). Once one has stalled, the pool opens the next only when the one before has answered or
//! been given up, and a pause after it (1 s, doubling to 10 s); the first that answers ends this.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// The pause after the first stall.
const FIRST_PAUSE: Duration = Duration::from_secs(1);

/// The longest pause: a connection that would answer again waits at most this long (and the
/// time its predecessor is given).
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// What one pool has seen of its new connections (shared by its connector's clones).
#[derive(Clone, Debug, Default)]
pub(crate) struct CreationGate(Arc<Mutex<State>>);

#[derive(Debug, Default)]
struct State {
    /// Zero while new connections answer.
    pause: Duration,
    /// While they stall: when the next may be opened.
    next: Option<Instant>,
}

impl CreationGate {
    /// A pool's fresh gate: open.
    pub(crate) fn new() -> CreationGate {
        CreationGate::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a new connection may be opened now; when not, how long until the next may. A
    /// connection let through while they stall closes the gate until it has answered or been
    /// given up (within `bound`) and the pause after it.
    pub(crate) fn admit(&self, now: Instant, bound: Duration) -> Result<(), Duration> {
        let mut state = self.state();
        match state.next {
            None => Ok(()),
            Some(next) if now >= next => {
                state.next = Some(now + bound + state.pause);
                Ok(())
            }
            Some(next) => Err(next - now),
        }
    }

    /// A new connection stalled (given up at its bound): the next waits the pause, longer each
    /// time.
    pub(crate) fn stalled(&self, now: Instant) {
        let mut state = self.state();
        state.pause = if state.pause.is_zero() {
            FIRST_PAUSE
        } else {
            (state.pause * 2).min(MAX_PAUSE)
        };
        state.next = Some(now + state.pause);
    }

    /// A new connection answered: the gate opens.
    pub(crate) fn answered(&self) {
        *self.state() = State::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_secs(5);

    #[test]
    fn after_a_stall_one_connection_at_a_time_then_open_once_one_answers() {
        let gate = CreationGate::new();
        let mut now = Instant::now();
        for _ in 0..3 {
            assert_eq!(gate.admit(now, BOUND), Ok(()), "open while they answer");
        }
        gate.stalled(now);
        assert_eq!(gate.admit(now, BOUND), Err(FIRST_PAUSE));
        now += FIRST_PAUSE;
        assert_eq!(gate.admit(now, BOUND), Ok(()));
        // That one is under way: the others wait for it and the pause after it.
        assert_eq!(gate.admit(now, BOUND), Err(BOUND + FIRST_PAUSE));
        gate.stalled(now);
        assert_eq!(gate.admit(now, BOUND), Err(FIRST_PAUSE * 2));
        for _ in 0..5 {
            gate.stalled(now);
        }
        assert_eq!(gate.admit(now, BOUND), Err(MAX_PAUSE));
        now += MAX_PAUSE;
        assert_eq!(gate.admit(now, BOUND), Ok(()));
        gate.answered();
        assert_eq!(gate.admit(now, BOUND), Ok(()));
        assert_eq!(gate.admit(now, BOUND), Ok(()));
    }
}
