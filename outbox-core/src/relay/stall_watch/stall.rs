//! Why a watched connection was given up.

use std::fmt;
use std::time::Duration;

/// Why a watched connection was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stall {
    /// Its session had sat idle this long (and was ended, or not).
    Idle { idle: Duration, ended: bool },
    /// Its session had ended without the connection hearing of it.
    Gone,
    /// No look could be made for this long (new connections did not answer either).
    Unseen(Duration),
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stall::Idle { idle, ended } => write!(
                f,
                "its server session had sat idle for {} s while the connection waited for an answer ({})",
                idle.as_secs(),
                if *ended { "ended now" } else { "not ended" }
            ),
            Stall::Gone => {
                f.write_str("its server session had ended without the connection hearing of it")
            }
            Stall::Unseen(unseen) => write!(
                f,
                "no other connection could look at its server session for {} s (they did not \
                 answer either: the server or the network to it has stalled)",
                unseen.as_secs()
            ),
        }
    }
}
