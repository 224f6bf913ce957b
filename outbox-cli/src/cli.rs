//! The command line: every subcommand's flags and help.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use outbox_sqs::Route;

use crate::{duration, help};

mod dead_letters;
mod negative;

pub use dead_letters::{DeadLettersCommand, FilterArgs, SelectArgs};

/// Use RDS IAM auth tokens as passwords (`1`/`true`).
pub const ENV_RDS_IAM: &str = "OUTBOX_PG_RDS_IAM";
/// A separate connection string for the relay's LISTEN connection.
pub const ENV_LISTEN_URL: &str = "OUTBOX_LISTEN_URL";
/// Do not LISTEN, poll only (`1`/`true`).
pub const ENV_NO_LISTEN: &str = "OUTBOX_NO_LISTEN";
/// Log format, `text` or `json`.
pub const ENV_LOG_FORMAT: &str = "OUTBOX_LOG_FORMAT";
/// Address to serve Prometheus metrics on.
pub const ENV_METRICS_ADDR: &str = "OUTBOX_METRICS_ADDR";

/// Operate a transactional outbox on PostgreSQL: apply its schema, relay its events to AWS SQS/SNS, and
/// inspect or repair it without writing SQL.
#[derive(Debug, Parser)]
#[command(name = "outbox", version)]
#[command(after_long_help = "\
ENVIRONMENT:
  DATABASE_URL      PostgreSQL connection string (postgres://user:pass@host:port/db?sslmode=...).
                    sslmode is read as libpq does: disable, prefer (default), require, verify-ca,
                    verify-full; sslrootcert=<PEM file> or sslrootcert=system. The password is
                    never logged. Without connect_timeout, connecting gives up after 10 s.
  OUTBOX_PG_RDS_IAM RDS IAM authentication (like --rds-iam).
  OUTBOX_LOG_FORMAT text or json (like --log-format)
  RUST_LOG          log filter, e.g. `info` or `outbox_core=debug,info` (default: info)
  AWS_*             the standard AWS variables and files configure credentials, region and
                    endpoints for SQS, SNS and S3 (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL, or
                    per service AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_SNS, AWS_ENDPOINT_URL_S3, ...)
  OUTBOX_*          relay and SQS settings; see `outbox relay --help`

EXIT STATUS:
  0 on success; 2 on a usage error: an argument or setting (flag or variable) that is missing,
  malformed, out of range or in conflict with another, found before anything is contacted; 1 on
  any other error, found by trying (connecting, reading a file, the database's state, credentials,
  the queues). The error is printed to stderr: one line, or one JSON object with
  --log-format json. `outbox relay` exits 130 when a second signal cuts its shutdown short.")]
pub struct Cli {
    /// PostgreSQL connection string of the database holding the outbox.
    #[arg(
        long,
        env = "DATABASE_URL",
        global = true,
        help_heading = "Global options",
        hide_env_values = true
    )]
    pub database_url: Option<String>,

    /// Authenticate with RDS IAM: the password of every new connection is a fresh auth token signed
    /// with the default AWS credential chain (needs sslmode=require or stronger).
    #[arg(long, env = ENV_RDS_IAM, global = true, help_heading = "Global options", action = clap::ArgAction::SetTrue, value_parser = switch)]
    pub rds_iam: bool,

    /// Log format.
    #[arg(long, env = ENV_LOG_FORMAT, value_enum, ignore_case = true, default_value_t = LogFormat::Text, global = true, help_heading = "Global options")]
    pub log_format: LogFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,

    /// The subcommand's words, e.g. `partitions maintain` (for "try `outbox … --help`").
    #[arg(skip)]
    pub command_path: String,

    /// Where the database URL came from, as errors about it name it: `--database-url` or
    /// `DATABASE_URL`.
    #[arg(skip)]
    pub database_url_source: &'static str,
}

impl Cli {
    /// Parses the process's arguments, with the long help texts that name environment variables
    /// built from their constants. `--help` and `--version` print and exit, as clap does; a usage
    /// error is returned, for [`usage::parse_error`](crate::usage::parse_error) to report.
    pub fn parse_args() -> Result<Cli, clap::Error> {
        let command = unset_empty_env(
            Cli::command().mut_subcommand("relay", |c| c.long_about(help::relay())),
        );
        let args = negative::join_negative_values(&command, std::env::args_os().collect());
        let command = unset_env_of_given_flags(command, &given_flags(&args));
        let matches = command.try_get_matches_from(args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        let mut words = Vec::new();
        let mut level = &matches;
        while let Some((name, sub)) = level.subcommand() {
            words.push(name);
            level = sub;
        }
        cli.command_path = words.join(" ");
        cli.database_url_source = match matches.value_source("database_url") {
            Some(clap::parser::ValueSource::CommandLine) => "--database-url",
            _ => "DATABASE_URL",
        };
        Ok(cli)
    }
}

/// The long flags on the command line (`--log-format`, `--log-format=json`: `log-format`).
fn given_flags(args: &[std::ffi::OsString]) -> Vec<String> {
    args.iter()
        .filter_map(|a| a.to_str()?.strip_prefix("--"))
        .map(|a| a.split('=').next().unwrap_or(a).to_owned())
        .collect()
}

/// `command` without the variables of the flags `given`: a variable whose flag is given is not
/// read at all, as the README says. clap reads a global flag's variable at the top level when the
/// flag is given after the subcommand, and refused `OUTBOX_LOG_FORMAT=garbage` beside
/// `relay --log-format text` (black-box run).
fn unset_env_of_given_flags(command: clap::Command, given: &[String]) -> clap::Command {
    without_env(command, &|a| {
        a.get_long().is_some_and(|l| given.iter().any(|g| g == l))
    })
}

/// `command` without the variables of its flags that are set but empty (blank), as templated
/// deployments leave them: unset, as the settings the library reads (clap took an empty
/// `OUTBOX_LOG_FORMAT` or `OUTBOX_METRICS_ADDR` for a value and refused it: black-box run).
fn unset_empty_env(command: clap::Command) -> clap::Command {
    without_env(command, &|a| {
        a.get_env()
            .and_then(std::env::var_os)
            .is_some_and(|v| v.to_string_lossy().trim().is_empty())
    })
}

/// `command` (and its subcommands) with no variable read for the arguments `unset` picks.
fn without_env(mut command: clap::Command, unset: &dyn Fn(&clap::Arg) -> bool) -> clap::Command {
    let ids: Vec<clap::Id> = command
        .get_arguments()
        .filter(|a| a.get_env().is_some() && unset(a))
        .map(|a| a.get_id().clone())
        .collect();
    for id in ids {
        command = command.mut_arg(id, |a| a.env(None::<&'static str>));
    }
    let subcommands: Vec<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    for name in subcommands {
        command = command.mut_subcommand(name, |c| without_env(c, unset));
    }
    command
}

/// How log lines are written (to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply the outbox schema (idempotent).
    #[command(long_about = "\
Apply the outbox schema to the database: the outbox_events table and its indexes, the
outbox_dead_letters view, the NOTIFY trigger and the processed_events inbox table.

Applied versions are recorded in outbox_schema_history; running it again changes nothing, and
several processes running it at once are serialised by an advisory lock.

With --partitioned (daily, the default, or hourly), outbox_events is range-partitioned on
created_at so that retention drops whole partitions instead of deleting rows. An existing plain
table is converted in one transaction that locks it while its pending events and dead letters move
over; its published rows stay in outbox_events_legacy until they are past the retention. See the
README, Partitioned outbox.")]
    Migrate(MigrateArgs),

    /// Relay events to SQS queues and SNS topics until SIGINT or SIGTERM.
    ///
    /// (The long help is built from the variable names' constants: see `help::relay`.)
    Relay(RelayArgs),

    /// Show the outbox's state at a glance.
    #[command(long_about = "\
Show the outbox's state: pending events (due now; behind an earlier event of their aggregate that
is a dead letter or waits for a retry, which a relay keeping per-aggregate order publishes first;
waiting for a retry), dead letters, the age of the oldest pending event, aggregates blocked by a
dead letter, and events published in the last hour. With --json, one JSON object with the same
figures (`due_now`, `held_back`, `waiting_retry`, ...).")]
    Stats {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },

    /// List, retry or purge dead letters.
    #[command(subcommand)]
    DeadLetters(DeadLettersCommand),

    /// Maintain or list the partitions of a partitioned outbox.
    #[command(subcommand)]
    Partitions(PartitionsCommand),

    /// Delete processed events (and consumer inbox records) older than a given age.
    #[command(long_about = "\
Delete processed (published) events older than --older-than, in batches of 1000 rows per
statement, so no long locks are taken. Pending events and dead letters are never deleted.
The relay can do the same periodically with --retention.

With --inbox-older-than, also delete the consumer inbox's records (processed_events, written by
process_once) recorded longer ago than that. Keep them longer than a message can still be
redelivered (the queue's message retention, up to 14 days on SQS, plus the relay's retrying):
an event redelivered after its record is gone is processed again. The relay can do this
periodically with --inbox-retention when the inbox is in its database.")]
    #[command(group(clap::ArgGroup::new("ages").required(true).multiple(true).args(["older_than", "inbox_older_than"])))]
    // clap's own usage of a missing age listed `--database-url <DATABASE_URL>` as if required
    // whenever DATABASE_URL was set (it writes out the arguments given): black-box run.
    #[command(
        override_usage = "outbox cleanup [OPTIONS] --older-than <AGE> [--inbox-older-than <AGE>]\n       \
                                outbox cleanup [OPTIONS] --inbox-older-than <AGE>"
    )]
    Cleanup {
        /// Age of the processed rows to delete, e.g. 7d, 12h, 30m.
        #[arg(long, value_parser = duration::parse_retention)]
        older_than: Option<Duration>,
        /// Age of the inbox records (processed_events) to delete, e.g. 30d.
        #[arg(long, value_parser = duration::parse)]
        inbox_older_than: Option<Duration>,
    },
}

/// `outbox migrate` flags.
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// Partition outbox_events by day (default) or hour, converting a plain table.
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "daily",
          value_name = "GRANULARITY")]
    pub partitioned: Option<GranularityArg>,
    /// With --partitioned: partitions kept ready beyond the current one (default 3 days, 12 hours;
    /// 2 to 100: each is more locks for every claim). On a table partitioned before, the new
    /// setting for maintenance.
    #[arg(long, requires = "partitioned", value_name = "N", value_parser = ahead)]
    pub ahead: Option<u32>,
}

/// How long one partition is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GranularityArg {
    /// One partition per UTC day.
    Daily,
    /// One partition per UTC hour.
    Hourly,
}

impl From<GranularityArg> for outbox_core::partition::Granularity {
    fn from(g: GranularityArg) -> Self {
        match g {
            GranularityArg::Daily => outbox_core::partition::Granularity::Daily,
            GranularityArg::Hourly => outbox_core::partition::Granularity::Hourly,
        }
    }
}

/// Partition operations.
#[derive(Debug, Subcommand)]
pub enum PartitionsCommand {
    /// Create partitions ahead and retire expired ones (for cron; relays do it every minute).
    #[command(long_about = "\
Maintain a partitioned outbox once: create the partitions the next periods need (detaching the
tail partition concurrently, so writers never wait), move rows that reached the tail back into
partitions of their own (the one step that locks the table, bounded by --drain-lock-timeout), and
with --retention detach (CONCURRENTLY) and drop every partition whose whole range and whose rows'
publication are older than the retention. A partition holding a pending event or a dead letter is
kept and reported; `outbox stats` shows it too. A partition is retired only once every transaction
that began before its end has finished (an event's created_at is its transaction's start, so such a
transaction may still write into it): maintenance waits up to --settle-timeout for them and
otherwise leaves the partition for the next run.

Relays started with the table's owner do this every minute; run it from cron as the owner when
relays run as a least-privilege role. Several maintainers at once are fine: one does the work (an
advisory lock), the others report that it was busy.")]
    Maintain {
        /// Drop partitions older than this whose rows were all published longer ago, e.g. 7d.
        #[arg(long, value_parser = duration::parse_retention)]
        retention: Option<Duration>,
        /// How long the tail's drain may wait for its table lock, e.g. 2s (at least 1ms).
        #[arg(long, value_parser = duration::parse_positive, default_value = "2s")]
        drain_lock_timeout: Duration,
        /// How long retirement waits for transactions that began before an expired partition's
        /// end, e.g. 2s.
        #[arg(long, value_parser = duration::parse, default_value = "2s")]
        settle_timeout: Duration,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the partitions, oldest first, with their bounds and estimated rows.
    List {
        /// Print JSON (one array) instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// `outbox relay` settings. Unset flags fall back to the `OUTBOX_*` environment, then defaults.
#[derive(Debug, Clone, Args)]
pub struct RelayArgs {
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9187) at /metrics.
    #[arg(long, env = ENV_METRICS_ADDR)]
    pub metrics_addr: Option<SocketAddr>,
    /// Route an event type, or every type starting with a prefix (a pattern ending in `*`), to an
    /// SQS queue URL or an SNS topic ARN: `order.*=https://sqs...`, `audit.*=arn:aws:sns:...`
    /// (repeatable; replaces OUTBOX_SQS_ROUTES).
    #[arg(long = "route", value_name = "PATTERN=TARGET", value_parser = route)]
    pub routes: Vec<Route>,
    /// Queue URL (or topic ARN) for event types without a route.
    #[arg(long)]
    pub default_queue: Option<String>,
    /// Offload payloads too large for their queue or topic to this S3 bucket, in the format of the
    /// AWS SQS/SNS Extended Client libraries.
    #[arg(long, value_name = "BUCKET")]
    pub offload_bucket: Option<String>,
    /// With --offload-bucket (or OUTBOX_SQS_OFFLOAD_BUCKET): offload messages larger than this many
    /// bytes (default: the queue's or topic's limit, 1 MiB or 256 KiB).
    #[arg(long, value_name = "BYTES", value_parser = whole::<usize>)]
    pub offload_threshold: Option<usize>,
    /// With one FIFO queue or topic and per-aggregate order: send several events of one
    /// aggregate in one call (faster for hot aggregates; see the README).
    #[arg(long)]
    pub batch_aggregates: bool,
    /// Events per claim.
    #[arg(long, value_parser = whole::<usize>)]
    pub batch_size: Option<usize>,
    /// Batches in flight at once.
    #[arg(long, value_parser = whole::<usize>)]
    pub concurrency: Option<usize>,
    /// Attempts before an event is dead-lettered.
    #[arg(long, value_parser = whole::<u32>)]
    pub max_attempts: Option<u32>,
    /// Fallback poll interval, e.g. 2s.
    #[arg(long, value_parser = duration::parse)]
    pub poll_interval: Option<Duration>,
    /// How long shutdown waits for batches in flight, and for the SQS/SNS calls going on after
    /// their publish, e.g. 30s.
    #[arg(long, value_parser = duration::parse)]
    pub shutdown_grace: Option<Duration>,
    /// Delete processed rows older than this, every minute (e.g. 7d); on the partitioned layout,
    /// drop partitions older than this instead. 0s keeps nothing: each event is deleted as it is
    /// acknowledged instead of being marked processed (the least write load).
    #[arg(long, value_parser = duration::parse_retention)]
    pub retention: Option<Duration>,
    /// Do not keep per-aggregate order.
    #[arg(long)]
    pub no_ordering: bool,
    /// Apply the schema before starting.
    #[arg(long)]
    pub migrate: bool,
    /// Dead-letter the events of a queue or topic that has been broken as a whole (missing, access
    /// or KMS key denied, throttled), or whose offload bucket has refused uploads, this long, e.g.
    /// 1h (default 1h; until then they are put back without counting an attempt).
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    pub broken_queue_dead_letter_after: Option<Duration>,
    /// Delete consumer inbox records (processed_events) older than this, every minute (e.g. 30d);
    /// for an inbox in the relay's database.
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    pub inbox_retention: Option<Duration>,
    /// Do not LISTEN for wake-ups: poll only (for PgBouncer in transaction mode without a direct
    /// connection).
    #[arg(long, env = ENV_NO_LISTEN, action = clap::ArgAction::SetTrue, value_parser = switch)]
    pub no_listen: bool,
    /// Connection string for the LISTEN connection, when DATABASE_URL goes through PgBouncer in
    /// transaction mode: a direct connection to the database (same sslmode rules).
    #[arg(long, env = ENV_LISTEN_URL, hide_env_values = true)]
    pub listen_url: Option<String>,
}

/// `--ahead N`: within [`outbox_core::partition::AHEAD`] (a usage error otherwise, exit 2).
fn ahead(text: &str) -> Result<u32, String> {
    let range = outbox_core::partition::AHEAD;
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            let (min, max) = range.into_inner();
            format!("`{text}`: a number of partitions from {min} to {max}")
        })
}

/// A count or size (`--batch-size`, `--concurrency`, …): a whole number. Whether it is in range
/// is the configuration's check (`build()`), which names the setting and the range.
fn whole<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.trim()
        .parse::<T>()
        .map_err(|_| format!("`{text}`: a whole number is needed"))
}

/// `--route PATTERN=TARGET`, split at its first `=`; a missing side is a usage error (exit 2), like
/// any other malformed flag. Whether the pattern and the target are valid is the publisher's check
/// ([`outbox_sqs::SqsConfig::validate`]).
fn route(text: &str) -> Result<Route, String> {
    text.split_once('=')
        .map(|(p, t)| (p.trim(), t.trim()))
        .filter(|(p, t)| !p.is_empty() && !t.is_empty())
        .map(|(p, t)| Route::new(p, t))
        .ok_or_else(|| "expected PATTERN=QUEUE_URL or PATTERN=TOPIC_ARN".to_owned())
}

/// A switch's value (`OUTBOX_NO_LISTEN=…`, `OUTBOX_PG_RDS_IAM=…`): what clap's boolish parser
/// takes (`true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`, `y`/`n`, `t`/`f`, any case), and
/// empty as off — a variable set to nothing is unset, as shells and container specs write it (it
/// was a usage error).
fn switch(text: &str) -> Result<bool, String> {
    if text.trim().is_empty() {
        return Ok(false);
    }
    outbox_core::env::switch(text)
        .ok_or_else(|| format!("`{text}`: expected true or false (also yes/no, on/off, 1/0)"))
}
