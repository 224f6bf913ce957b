//! Negative values on the command line. clap reads `--poll-interval -1s` as the flag without a
//! value followed by an unknown flag `-1`, and says "unexpected argument '-1' found"; joined into
//! `--poll-interval=-1s` first, the value reaches the flag's parser, which says what is wrong
//! with it ("a duration cannot be negative").

use std::ffi::OsString;

use clap::Command;

/// `args` with each `--flag -<digit>…` joined into `--flag=-<digit>…`, where `--flag` takes a
/// value somewhere in `command` and is a switch nowhere. No flag of `outbox` is a digit, so what
/// is joined would have been a usage error anyway; everything after `--` is left as it is.
pub fn join_negative_values(command: &Command, args: Vec<OsString>) -> Vec<OsString> {
    let (mut takes_value, mut switches) = (Vec::new(), Vec::new());
    collect_longs(command, &mut takes_value, &mut switches);
    let mut joined: Vec<OsString> = Vec::with_capacity(args.len());
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        if arg == "--" {
            joined.push(arg);
            joined.extend(args);
            break;
        }
        let flag = arg.to_str().and_then(|a| a.strip_prefix("--"));
        let negative = args
            .peek()
            .and_then(|next| next.to_str())
            .is_some_and(|next| {
                next.strip_prefix('-')
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            });
        match (flag, negative) {
            (Some(name), true)
                if takes_value.contains(&name.to_owned())
                    && !switches.contains(&name.to_owned()) =>
            {
                let mut both = arg.clone();
                both.push("=");
                both.push(args.next().unwrap_or_default());
                joined.push(both);
            }
            _ => joined.push(arg),
        }
    }
    joined
}

/// The long names of `command`'s flags and its subcommands', by whether they take a value.
fn collect_longs(command: &Command, takes_value: &mut Vec<String>, switches: &mut Vec<String>) {
    for arg in command.get_arguments() {
        if let Some(long) = arg.get_long() {
            let list = if arg.get_action().takes_values() {
                &mut *takes_value
            } else {
                &mut *switches
            };
            list.push(long.to_owned());
        }
    }
    for sub in command.get_subcommands() {
        collect_longs(sub, takes_value, switches);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn join(args: &[&str]) -> Vec<String> {
        let args = args.iter().map(OsString::from).collect();
        join_negative_values(&crate::cli::Cli::command(), args)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn joins_a_negative_value_to_the_flag_that_takes_it() {
        assert_eq!(
            join(&[
                "outbox",
                "relay",
                "--poll-interval",
                "-1s",
                "--batch-size",
                "-5"
            ]),
            ["outbox", "relay", "--poll-interval=-1s", "--batch-size=-5"]
        );
        // A switch is not given the next word, a value that is not negative stays apart, and
        // nothing after `--` is touched.
        assert_eq!(
            join(&[
                "outbox",
                "relay",
                "--no-listen",
                "-1",
                "--batch-size",
                "5",
                "--",
                "--concurrency",
                "-1"
            ]),
            [
                "outbox",
                "relay",
                "--no-listen",
                "-1",
                "--batch-size",
                "5",
                "--",
                "--concurrency",
                "-1"
            ]
        );
        assert_eq!(
            join(&["outbox", "relay", "--poll-interval", "-h"]),
            ["outbox", "relay", "--poll-interval", "-h"]
        );
    }
}
