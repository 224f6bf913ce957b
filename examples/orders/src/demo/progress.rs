//! The demo's progress line on stderr.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The progress line: rewritten in place on a terminal, a line every 2 s otherwise.
pub(super) struct Progress {
    enabled: bool,
    terminal: bool,
    orders: u32,
    last: Mutex<Option<Instant>>,
    published: Mutex<i64>,
}

impl Progress {
    pub(super) fn new(enabled: bool, orders: u32) -> Self {
        Progress {
            enabled,
            terminal: std::io::stderr().is_terminal(),
            orders,
            last: Mutex::new(None),
            published: Mutex::new(0),
        }
    }

    fn interval(&self) -> Duration {
        if self.terminal {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(2)
        }
    }

    /// Whether a line is due now.
    pub(super) fn due(&self) -> bool {
        self.enabled
            && self
                .last
                .lock()
                .unwrap()
                .is_none_or(|at| at.elapsed() >= self.interval())
    }

    pub(super) fn show(&self, orders: u64, written: u64, published: Option<i64>, received: u64) {
        if !self.due() {
            return;
        }
        *self.last.lock().unwrap() = Some(Instant::now());
        let mut last_published = self.published.lock().unwrap();
        if let Some(p) = published {
            *last_published = p;
        }
        let line = format!(
            "orders {orders:>6}/{}   events written {written:>7}   published {:>7}   received {received:>7}",
            self.orders, *last_published
        );
        let mut err = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(err, "\r{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }

    pub(super) fn finish(&self) {
        if self.enabled && self.terminal {
            eprintln!();
        }
    }
}
