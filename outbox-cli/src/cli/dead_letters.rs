//! `outbox dead-letters`: its subcommands and the dead letters they select.

use clap::{Args, Subcommand};
use uuid::Uuid;

/// The usage lines of a subcommand that selects dead letters (clap's own ran to 144 columns, the
/// required group written out on one line: black-box run). The filters' line leaves out
/// `[OPTIONS]` to fit (a `<FILTER>` there read as an argument: black-box run).
macro_rules! usage {
    ($command:literal) => {
        concat!(
            "outbox dead-letters ",
            $command,
            " [OPTIONS] <ID>...\n       ",
            "outbox dead-letters ",
            $command,
            " [--event-type <T>] [--aggregate-type <T>] [--aggregate-id <ID>]\n       ",
            "outbox dead-letters ",
            $command,
            " [OPTIONS] --all"
        )
    };
}

/// Dead-letter operations.
#[derive(Debug, Subcommand)]
pub enum DeadLettersCommand {
    /// List dead letters, oldest first.
    #[command(long_about = "\
List dead letters, oldest first, with their last error. Payloads are not shown.")]
    List {
        /// At most this many (1 or more).
        #[arg(long, default_value_t = 50, value_parser = limit)]
        limit: i64,
        /// Print JSON (one array) instead of a table.
        #[arg(long)]
        json: bool,
        // (Last: its heading would be the options' after it too.)
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Make dead letters pending again (attempts reset).
    #[command(long_about = "\
Make dead letters pending again: attempts reset to 0 and retry_after cleared, so the relay publishes
them on its next claim, in order within their aggregates; the relays are notified, so an idle one
claims at once. Say which: event ids, a filter, or --all.

Given ids that are not dead letters (mistyped, or published meanwhile) are named on stderr and make
the exit status 1; the others are retried all the same, and listed on stdout.")]
    #[command(override_usage = usage!("retry"))]
    Retry(SelectArgs),
    /// Delete dead letters for good.
    #[command(long_about = "\
Delete dead letters for good, unblocking the later events of their aggregates. Say which: event
ids, a filter, or --all. Asks for confirmation unless --yes is given.

Unlike retry, purge deletes nothing when a given id is not a dead letter (mistyped, or published
meanwhile): it names them on stderr and exits 1, so that a slip never deletes the rest unseen.")]
    #[command(override_usage = usage!("purge"))]
    Purge {
        #[command(flatten)]
        select: SelectArgs,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// Filters over dead letters (with retry and purge: one or more of these, or ids, or `--all`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Filters")]
pub struct FilterArgs {
    /// Only events of this type.
    #[arg(long)]
    pub event_type: Option<String>,
    /// Only events of this aggregate type.
    #[arg(long)]
    pub aggregate_type: Option<String>,
    /// Only events of this aggregate id.
    #[arg(long)]
    pub aggregate_id: Option<String>,
}

/// Which dead letters a retry or purge applies to: at least one of ids, a filter or `--all` (a
/// usage error otherwise, exit 2).
#[derive(Debug, Clone, Args)]
#[command(group(
    clap::ArgGroup::new("which")
        .required(true)
        .multiple(true)
        .args(["ids", "event_type", "aggregate_type", "aggregate_id", "all"])
))]
pub struct SelectArgs {
    /// Event ids.
    #[arg(value_name = "ID")]
    pub ids: Vec<Uuid>,
    /// Every dead letter.
    #[arg(long, conflicts_with_all = ["ids", "event_type", "aggregate_type", "aggregate_id"])]
    pub all: bool,
    // (After `all`: the filters' heading would be its too.)
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// `--limit N`: 1 or more (clap's own range check printed `1..9223372036854775807`).
fn limit(text: &str) -> Result<i64, String> {
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("`{text}`: a number of dead letters, 1 or more"))
}
