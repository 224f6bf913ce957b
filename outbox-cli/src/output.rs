//! What the commands print on stdout. A closed pipe (`outbox dead-letters list | head -1`) is not
//! an error: printing stops and the command finishes its work — `println!` panicked there (exit
//! 101), in the middle of a purge too.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout refused a line: nothing more is written.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `line` and a newline to stdout, unless stdout was found closed; another write error is
/// reported on stderr once, and printing stops too.
pub fn line(line: std::fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(line).and_then(|()| out.write_all(b"\n")) {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("warning: cannot write to stdout: {e}");
        }
    }
}

/// `println!` through [`line()`].
macro_rules! out {
    () => {
        $crate::output::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use out;

/// "row" or "rows", for a count of `n`.
pub(crate) fn rows<N: TryInto<i64>>(n: N) -> &'static str {
    if n.try_into().is_ok_and(|n| n == 1) {
        "row"
    } else {
        "rows"
    }
}
