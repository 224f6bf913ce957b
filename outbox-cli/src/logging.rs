//! Log lines to stderr, filtered by `RUST_LOG` (default `info`; deadpool's lines, and the AWS SDK
//! configuration loaders', at `error` unless `RUST_LOG` names them). Text lines are coloured only when
//! stderr is a terminal (and `NO_COLOR` is unset): a file or a pipe gets no ANSI escapes. A text
//! line's control characters are escaped ([`crate::log_writer`]): a value from a row cannot forge a
//! line of its own; JSON lines escape them as JSON does.

use std::io::IsTerminal;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::cli::LogFormat;
use crate::log_writer::EscapingStderr;

/// The target of deadpool-postgres's log lines.
const DEADPOOL_TARGET: &str = "deadpool.postgres";

/// The targets of the AWS SDK's configuration loaders' log lines.
const AWS_CONFIG_TARGETS: [&str; 2] = ["aws_config", "aws_runtime::env_config"];

/// Installs the global subscriber.
pub fn init(format: LogFormat) {
    let setting = std::env::var("RUST_LOG").ok();
    let parsed: Option<Targets> = setting.as_deref().and_then(|f| f.parse().ok());
    // Said once logging is up: it was ignored without a word (black-box run).
    let unread = setting
        .as_deref()
        .filter(|f| !f.trim().is_empty() && parsed.is_none());
    let mut filter = parsed.unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO));
    // deadpool warns once per pooled connection it finds closed (`Connection could not be
    // recycled`), so one database restart made a warning per connection; it opens a new one, and the
    // relay reports the outage itself. Shown only when RUST_LOG names deadpool.
    if !setting.as_deref().is_some_and(|f| f.contains("deadpool")) {
        filter = filter.with_target(DEADPOOL_TARGET, tracing::Level::ERROR);
    }
    // The AWS SDK's configuration loaders warn about each place they looked for a region or
    // credentials that had none (IMDS off EC2: two long lines with whole HTTP responses before
    // the one-line error that says what is missing: black-box run). Shown only when RUST_LOG
    // names them.
    if !setting.as_deref().is_some_and(|f| f.contains("aws_")) {
        for target in AWS_CONFIG_TARGETS {
            filter = filter.with_target(target, tracing::Level::ERROR);
        }
    }
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
    if result.is_ok() {
        if let Some(unread) = unread {
            tracing::warn!(
                rust_log = unread,
                "RUST_LOG is not a filter this reads (`info`, `outbox=debug,info`, \
                 `target=level` pairs): logging at info"
            );
        }
    }
}
