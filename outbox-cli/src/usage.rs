//! How the CLI ends on an error. Exit status 2 for a usage error: a command line or a setting that
//! is invalid in itself (missing, malformed, out of range, or in conflict with another), found
//! before anything is contacted or read — as clap's own usage errors. Exit status 1 for everything
//! found by trying: connecting, reading a file, the database's state, credentials, the queues.
//!
//! The error is one line on stderr (`error: …`, then `hint: …` when there is one), or under
//! `--log-format json` one JSON object like the log lines, so that a log pipeline parses it too.

use std::fmt;
use std::process::ExitCode;

use crate::Failure;
use crate::cli::LogFormat;

/// A usage error (exit status 2): its message, causes included.
#[derive(Debug)]
pub struct Usage(String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// `e` as a usage error.
pub fn usage(e: impl Into<Failure>) -> Failure {
    let e = e.into();
    Box::new(Usage(outbox_core::error_chain(&*e)))
}

/// `e` with `prefix` in front of its message, a usage error still if it was one.
pub fn context(prefix: &str, e: Failure) -> Failure {
    let message = format!("{prefix}: {}", outbox_core::error_chain(&*e));
    if e.is::<Usage>() {
        Box::new(Usage(message))
    } else {
        message.into()
    }
}

/// Prints `e` (with `hint`) in `format` for `outbox <command>`, and gives its exit status.
pub fn report(
    e: &(dyn std::error::Error + Send + Sync + 'static),
    hint: Option<&str>,
    format: LogFormat,
    command: &str,
) -> ExitCode {
    let is_usage = e.is::<Usage>();
    let status: u8 = if is_usage { 2 } else { 1 };
    let message = outbox_core::error_chain(e);
    let help = is_usage.then(|| format!("outbox {command} --help"));
    match format {
        LogFormat::Text => {
            // Values from the command line or the database stay on their line.
            let line = |s: &str| {
                String::from_utf8_lossy(&crate::log_writer::escape(s.as_bytes(), false))
                    .into_owned()
            };
            let mut text = format!("error: {}\n", line(&message));
            if let Some(hint) = hint {
                text.push_str(&format!("hint: {}\n", line(hint)));
            }
            if let Some(help) = help {
                text.push_str(&format!("\nFor more information, try '{help}'.\n"));
            }
            eprint!("{text}");
        }
        LogFormat::Json => {
            let mut line = serde_json::json!({
                "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                "level": "ERROR",
                "message": message,
                "exit_status": status,
                "target": "outbox",
            });
            if let Some(hint) = hint {
                line["hint"] = hint.into();
            }
            if let Some(help) = help {
                line["help"] = help.into();
            }
            eprintln!("{line}");
        }
    }
    ExitCode::from(status)
}
