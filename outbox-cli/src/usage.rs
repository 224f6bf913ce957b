//! How the CLI ends on an error. Exit status 2 for a usage error: a command line or a setting that
//! is invalid in itself (missing, malformed, out of range, or in conflict with another), found
//! before anything is contacted or read — as clap's own usage errors. Exit status 1 for everything
//! found by trying: connecting, reading a file, the database's state, credentials, the queues.
//!
//! The error is one line on stderr (`error: …`, then `hint: …` when there is one), or under
//! `--log-format json` one JSON object like the log lines, so that a log pipeline parses it too.

use std::ffi::OsString;
use std::fmt;
use std::process::ExitCode;

use clap::CommandFactory;
use clap::error::ErrorKind;

use crate::Failure;
use crate::cli::{Cli, ENV_LOG_FORMAT, LogFormat};

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

/// An error's text on one line: a line break and the indentation after it become `; ` (or a
/// space after a `:`). The AWS SDK's error for an empty credential chain lists each provider it
/// tried on a line of its own, which the one-line error showed as literal `\n`s (black-box run).
fn fold_lines(text: &str) -> String {
    let mut folded = String::with_capacity(text.len());
    for piece in text.split('\n').map(str::trim).filter(|p| !p.is_empty()) {
        if !folded.is_empty() {
            folded.push_str(if folded.ends_with(':') { " " } else { "; " });
        }
        folded.push_str(piece);
    }
    folded
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
    let message = fold_lines(&outbox_core::error_chain(e));
    let help = is_usage.then(|| help_command(command));
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

/// Reports an error of the argument parser (clap's): its own text and exit status, or under
/// `--log-format json` (or its variable) one JSON object like any other usage error's. `--help`
/// and `--version` print as clap prints them.
pub fn parse_error(e: clap::Error) -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let display = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if display {
        e.exit()
    }
    let path = command_path(&args);
    let rendered = from_env(&e, &args, &e.render().to_string());
    if !wants_json(&args, std::env::var_os(ENV_LOG_FORMAT)) {
        // clap's text, its hint naming the subcommand: "try '--help'" alone is no command.
        let help = help_command(&path);
        eprint!(
            "{}",
            rendered.replace("try '--help'", &format!("try '{help}'"))
        );
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
    }
    let message = clap_message(&rendered);
    report(&Usage(message), None, LogFormat::Json, &path)
}

/// `rendered` (clap's text of `e`) saying where an invalid value came from when it was not the
/// command line but the flag's environment variable: clap names the flag alone
/// (`OUTBOX_LOG_FORMAT=xml` read "invalid value 'xml' for '--log-format <LOG_FORMAT>'").
fn from_env(e: &clap::Error, args: &[OsString], rendered: &str) -> String {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return rendered.to_owned();
    };
    let Some(flag) = arg.split_whitespace().next() else {
        return rendered.to_owned();
    };
    let Some(ContextValue::String(value)) = e.get(ContextKind::InvalidValue) else {
        return rendered.to_owned();
    };
    // Given on the command line as well, the flag's own value is the one in question, unless
    // the two differ and the variable's is the one refused.
    let on_command_line = args
        .iter()
        .skip(1)
        .zip(args.iter().skip(2))
        .any(|(a, v)| a.to_string_lossy() == flag && v.to_string_lossy() == value.as_str())
        || args
            .iter()
            .any(|a| a.to_string_lossy() == format!("{flag}={value}"));
    let long = flag.trim_start_matches('-');
    let env = Cli::command()
        .get_subcommands()
        .flat_map(|c| std::iter::once(c).chain(c.get_subcommands()))
        .flat_map(|c| c.get_arguments())
        .chain(Cli::command().get_arguments())
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_env().map(|v| v.to_string_lossy().into_owned()));
    match env {
        Some(var)
            if !on_command_line && std::env::var(&var).ok().as_deref() == Some(value.as_str()) =>
        {
            rendered.replacen(
                &format!("for '{arg}'"),
                &format!("for '{arg}' (from the environment variable {var})"),
                1,
            )
        }
        _ => rendered.to_owned(),
    }
}

/// The command that shows the help of the subcommand `path` (its words; empty: the binary's).
fn help_command(path: &str) -> String {
    if path.is_empty() {
        "outbox --help".to_owned()
    } else {
        format!("outbox {path} --help")
    }
}

/// Whether the command line (or else `env`, the log format's variable) asks for JSON: read from
/// the raw arguments, as parsing them failed.
fn wants_json(args: &[OsString], env: Option<OsString>) -> bool {
    let mut format = None;
    let mut args = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        } else if arg == "--log-format" {
            format = args.next().map(|v| v.into_owned());
        } else if let Some(v) = arg.strip_prefix("--log-format=") {
            format = Some(v.to_owned());
        }
    }
    let format = format.or_else(|| env.map(|v| v.to_string_lossy().into_owned()));
    format.as_deref() == Some("json")
}

/// clap's rendered error as one line: its lines up to the usage, without the `error: ` prefix.
fn clap_message(rendered: &str) -> String {
    rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .fold(String::new(), |mut line, part| {
            // A line ending in `:` introduces the next ("not provided:; <--older-than …>" read
            // oddly; black-box run): joined with a space.
            if !line.is_empty() {
                line.push_str(if line.ends_with(':') { " " } else { "; " });
            }
            line.push_str(part);
            line
        })
}

/// The subcommand's words among `args` (e.g. `partitions maintain`), as far as they name
/// subcommands.
fn command_path(args: &[OsString]) -> String {
    let mut command = Cli::command();
    let mut words = Vec::new();
    for arg in args.iter().skip(1).map(|a| a.to_string_lossy()) {
        if arg.starts_with('-') {
            continue;
        }
        let Some(sub) = command.find_subcommand(arg.as_ref()).cloned() else {
            continue;
        };
        words.push(sub.get_name().to_owned());
        command = sub;
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn an_errors_lines_are_folded_into_one() {
        let sdk = "no credentials found in chain. Attempted:\n  Environment: not set\n  Profile: \
                   not enabled\n";
        assert_eq!(
            fold_lines(sdk),
            "no credentials found in chain. Attempted: Environment: not set; Profile: not enabled"
        );
        assert_eq!(fold_lines("one line"), "one line");
    }

    #[test]
    fn json_is_read_from_the_raw_arguments_or_else_the_variable() {
        let json = Some(OsString::from("json"));
        assert!(wants_json(
            &args(&["outbox", "--log-format", "json", "x"]),
            None
        ));
        assert!(wants_json(
            &args(&["outbox", "relay", "--log-format=json"]),
            None
        ));
        assert!(wants_json(&args(&["outbox", "relay"]), json.clone()));
        assert!(!wants_json(&args(&["outbox", "--log-format=text"]), json));
        assert!(!wants_json(
            &args(&["outbox", "--", "--log-format=json"]),
            None
        ));
        assert!(!wants_json(&args(&["outbox", "relay"]), None));
    }

    #[test]
    fn the_subcommand_path_skips_flags_and_values() {
        assert_eq!(
            command_path(&args(&[
                "outbox",
                "--log-format",
                "json",
                "partitions",
                "maintain",
                "--x"
            ])),
            "partitions maintain"
        );
        assert_eq!(command_path(&args(&["outbox", "nope"])), "");
    }

    #[test]
    fn clap_errors_become_one_line() {
        let rendered = "error: unexpected argument '--x' found\n\n  tip: to pass '--x' as a value, use '-- --x'\n\nUsage: outbox relay [OPTIONS]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            clap_message(rendered),
            "unexpected argument '--x' found; tip: to pass '--x' as a value, use '-- --x'"
        );
        let rendered = "error: the following required arguments were not provided:
  <--older-than <DURATION>|--inbox-older-than <DURATION>>

Usage: outbox cleanup
";
        assert_eq!(
            clap_message(rendered),
            "the following required arguments were not provided: <--older-than \
             <DURATION>|--inbox-older-than <DURATION>>"
        );
    }
}
