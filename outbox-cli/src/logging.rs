//! Log lines to stderr, filtered by `RUST_LOG` (default `info`). Text lines are coloured only when
//! stderr is a terminal (and `NO_COLOR` is unset): a file or a pipe gets no ANSI escapes. A text
//! line's control characters are escaped ([`crate::log_writer`]): a value from a row cannot forge a
//! line of its own; JSON lines escape them as JSON does.

use std::io::IsTerminal;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::cli::LogFormat;
use crate::log_writer::EscapingStderr;

/// Installs the global subscriber.
pub fn init(format: LogFormat) {
    let filter: Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO));
    let registry = tracing_subscriber::registry().with(filter);
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let result = match format {
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(colour)
                    .with_writer(EscapingStderr { colour }),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_ansi(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    let _ = result;
}
