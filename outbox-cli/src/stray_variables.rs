//! `OUTBOX_*` variables that are no setting of the relay: misspellings, most likely, which were
//! ignored without a word (black-box run: `OUTBOX_BATCHSIZE=5` started the relay at the default
//! batch size of 100).

use std::ffi::OsString;

use clap::CommandFactory;

use crate::cli::Cli;

/// The prefix of the product's variables.
const PREFIX: &str = "OUTBOX_";

/// Logs a warning, naming it, for each `OUTBOX_*` variable of the environment that `outbox relay`
/// does not read. The consumer's variables (`OUTBOX_SQS_CONSUMER_*`) are left to the consumer,
/// which warns about its own.
pub fn warn() {
    for name in stray(std::env::vars_os().map(|(k, _)| k)) {
        tracing::warn!(
            variable = %name,
            "an {PREFIX}… variable that is no setting of the relay: ignored (misspelt?)"
        );
    }
}

/// The names among `names` with the product's prefix that no setting of the relay reads.
fn stray(names: impl Iterator<Item = OsString>) -> Vec<String> {
    let command = Cli::command();
    let flags: Vec<String> = std::iter::once(&command)
        .chain(command.get_subcommands())
        .flat_map(|c| std::iter::once(c).chain(c.get_subcommands()))
        .flat_map(|c| c.get_arguments())
        .filter_map(|a| a.get_env().map(|v| v.to_string_lossy().into_owned()))
        .collect();
    let mut stray: Vec<String> = names
        .filter_map(|n| n.into_string().ok())
        .filter(|n| {
            n.starts_with(PREFIX)
                && !n.starts_with(outbox_sqs::consumer::ENV_CONSUMER_PREFIX)
                && !outbox_core::env::VARIABLES.contains(&n.as_str())
                && !outbox_sqs::ENV_VARIABLES.contains(&n.as_str())
                && !flags.contains(n)
        })
        .collect();
    stray.sort();
    stray
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        stray(names.iter().map(OsString::from))
    }

    #[test]
    fn misspelt_variables_are_found_and_settings_are_not() {
        assert_eq!(
            names(&[
                "OUTBOX_BATCHSIZE",
                "OUTBOX_BATCH_SIZE",
                "OUTBOX_SQS_ROUTES",
                "OUTBOX_SQS_ROUTE",
                "OUTBOX_LISTEN_URL",
                "OUTBOX_METRICS_ADDR",
                "OUTBOX_LOG_FORMAT",
                "OUTBOX_PG_RDS_IAM",
                "OUTBOX_NO_LISTEN",
                "OUTBOX_SQS_CONSUMER_CONCURRENCY",
                "OUTBOX_SQS_CONSUMER_WHATEVER",
                "DATABASE_URL",
                "PATH",
            ]),
            ["OUTBOX_BATCHSIZE", "OUTBOX_SQS_ROUTE"]
        );
    }
}
