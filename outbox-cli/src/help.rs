//! Long help texts that name environment variables, built from the constants the code reads them
//! with, so that `--help` cannot drift from the code.

use outbox_core::env;
use outbox_sqs as sqs;

use crate::cli::{ENV_LISTEN_URL, ENV_METRICS_ADDR, ENV_NO_LISTEN};

/// The `outbox relay` settings: flag, variable, meaning (an empty flag: variable only).
fn relay_settings() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        (
            "--batch-size",
            env::BATCH_SIZE,
            "events per claim (default 100)",
        ),
        (
            "--concurrency",
            env::CONCURRENCY,
            "batches in flight (default 4)",
        ),
        (
            "--max-attempts",
            env::MAX_ATTEMPTS,
            "attempts before dead-lettering (default 10)",
        ),
        (
            "--poll-interval",
            env::POLL_INTERVAL_MS,
            "fallback poll (default 2s)",
        ),
        (
            "--shutdown-grace",
            env::SHUTDOWN_GRACE_MS,
            "grace period at shutdown (default 30s)",
        ),
        (
            "--retention",
            env::RETENTION_SECS,
            "retention: delete processed rows (partitioned: drop partitions) older than this (default off)",
        ),
        (
            "--no-ordering",
            env::PER_AGGREGATE_ORDER,
            "per-aggregate order (default true)",
        ),
        (
            "--route",
            sqs::ENV_ROUTES,
            "`pattern=target,…` (queue URL or topic ARN)",
        ),
        (
            "--default-queue",
            sqs::ENV_DEFAULT_QUEUE_URL,
            "queue or topic for unrouted types",
        ),
        (
            "--offload-bucket",
            sqs::ENV_OFFLOAD_BUCKET,
            "S3 bucket for large payloads (default off)",
        ),
        (
            "--offload-threshold",
            sqs::ENV_OFFLOAD_THRESHOLD_BYTES,
            "offload above this (default: the limit)",
        ),
        (
            "--batch-aggregates",
            sqs::ENV_BATCH_AGGREGATES,
            "an aggregate's events in one FIFO call (default false)",
        ),
        (
            "--broken-queue-dead-letter-after",
            sqs::ENV_BROKEN_QUEUE_DEAD_LETTER_AFTER_SECS,
            "dead-letter the events of a queue or topic broken this long (default 1h; 100ms to 30d)",
        ),
        (
            "--no-listen",
            ENV_NO_LISTEN,
            "poll only (PgBouncer transaction mode)",
        ),
        (
            "--listen-url",
            ENV_LISTEN_URL,
            "direct connection for LISTEN",
        ),
        (
            "--metrics-addr",
            ENV_METRICS_ADDR,
            "serve Prometheus metrics at /metrics",
        ),
        ("", env::BACKOFF_BASE_MS, "first retry delay (default 1s)"),
        (
            "",
            env::BACKOFF_CAP_MS,
            "longest retry delay (default 5 min)",
        ),
        ("", env::BACKOFF_JITTER, "0.0-1.0 (default 0.2)"),
        (
            "",
            env::PUBLISH_TIMEOUT_MS,
            "time limit of one batch's publish (default 30s)",
        ),
        (
            "",
            env::METRICS_INTERVAL_MS,
            "gauge refresh interval (default 5s)",
        ),
        (
            "",
            env::BATCH_MAX_BYTES,
            "claim byte budget (default 4 MiB)",
        ),
        (
            "",
            sqs::ENV_MAX_IN_FLIGHT,
            "SendMessageBatch calls at once (default 8)",
        ),
        (
            "",
            sqs::ENV_CALL_TIMEOUT_MS,
            "time limit of one SQS call (default 10s; 100 ms to 1h)",
        ),
        (
            "",
            sqs::ENV_BREAKER_PROBE_INTERVAL_MS,
            "probe of a broken or down queue, topic or bucket (default 5s; 100 ms to 1h)",
        ),
        (
            "",
            sqs::ENV_CALL_WAIT_MS,
            "wait for SQS calls, then let them go on (default 1s, at most 1h)",
        ),
        ("", sqs::ENV_MAX_UPLOADS, "S3 uploads at once (default 32)"),
        (
            "",
            sqs::ENV_OFFLOAD_WAIT_MS,
            "wait for an upload, then let it go on (default 1s)",
        ),
        (
            "",
            sqs::ENV_TRANSPORT,
            "SQS client: `direct` (default; its own HTTP client and signer) or `sdk` (the AWS SDK)",
        ),
    ]
}

/// The long help of `outbox relay`.
pub fn relay() -> String {
    // Two lines a setting, so that the help fits 100 columns (one row each ran to 177, wrapped
    // badly in a terminal: black-box run).
    let mut settings = String::new();
    for (flag, var, meaning) in relay_settings() {
        let names = if flag.is_empty() {
            var.to_owned()
        } else {
            format!("{flag}, {var}")
        };
        settings.push_str(&format!("  {names}\n      {meaning}\n"));
    }
    settings.push_str(
        "  --inbox-retention (flag only)\n      delete processed_events older than this (default off)\n",
    );
    RELAY.replace("{settings}", settings.trim_end())
}

const RELAY: &str = "\
Relay committed outbox events to AWS SQS queues and SNS topics until SIGINT or SIGTERM, then shut
down gracefully: stop claiming, let batches in flight finish within the grace period, release the
rest.

Events are claimed with FOR UPDATE SKIP LOCKED, so any number of relays may run side by side.
Delivery is at-least-once; consumers dedupe on the event_id attribute. Per-aggregate order is kept
unless --no-ordering is given.

ROUTING:
  Each event type goes to one queue or topic: an exact route (`order.created=TARGET`) wins over a
  prefix route (`order.*=TARGET`; the longest prefix wins), which wins over the default. A target
  is an SQS queue URL (or name) or an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:TOPIC); anything
  else is refused at start-up. An event with no route is dead-lettered with a clear reason. Queues
  and topics ending in .fifo get MessageGroupId = aggregate and MessageDeduplicationId = event id.

LARGE PAYLOADS:
  With --offload-bucket, a message over the threshold (default: the queue's or topic's own limit,
  1 MiB for a queue, 256 KiB for a topic) is written to S3 at outbox/<event_id> and sent as a
  pointer in the AWS Extended Client format (ExtendedPayloadSize attribute), which the
  Java/Python/.NET extended clients read unchanged. Nothing deletes these objects: expire the
  outbox/ prefix with an S3 lifecycle rule.

SETTINGS (flag and environment variable; the flag wins, and then the variable is not read):
{settings}

A BROKEN QUEUE OR TOPIC:
  A queue or topic that fails as a whole (deleted, access or KMS key denied, throttled) has its
  circuit breaker opened: its events are put back for 5s without counting an attempt and it is not
  called except for one probe every 5s, while the others keep flowing. Still broken after
  --broken-queue-dead-letter-after, its events are dead-lettered with the SQS or SNS error
  (never for throttling alone: those events wait until the load passes).

START-UP CHECKS:
  Every setting is checked first: one that is invalid in itself is a usage error (exit status 2),
  before anything is contacted. Then the relay connects and checks the database: reachable,
  password accepted, TLS as sslmode demands, the outbox schema present and at least at the version
  this binary needs, and the role's grants. Any failure is one line on stderr and exit status 1.

AWS:
  Credentials and region come from the default AWS chain (environment, profile, web identity,
  instance role; not SSO or credential_process profiles: export the session first).
  The relay needs sqs:SendMessage and sqs:GetQueueAttributes on its queues (and sqs:GetQueueUrl
  when a target is a queue name), kms:GenerateDataKey and kms:Decrypt on the key of an encrypted
  queue or topic, sns:Publish and
  sns:GetTopicAttributes on its topics, and with offload s3:PutObject on BUCKET/outbox/* and
  s3:ListBucket on BUCKET.";

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command's long description is written in lines of at most 100 columns: clap wraps a
    /// longer one at 100, leaving its last word alone on a line (`partitions maintain --help`'s
    /// "otherwise": black-box run).
    #[test]
    fn long_descriptions_are_written_within_100_columns() {
        let mut pending = vec![
            crate::cli::Cli::command().mut_subcommand("relay", |c| c.long_about(super::relay())),
        ];
        let mut seen = 0;
        while let Some(command) = pending.pop() {
            for text in [command.get_long_about(), command.get_about()]
                .into_iter()
                .flatten()
            {
                let text = text.to_string();
                let lines: Vec<&str> = text.lines().collect();
                // Lines wrapped by hand: in a paragraph of several (clap joins a doc comment's
                // lines into one per paragraph, which it wraps itself).
                let by_hand = |i: usize| {
                    (i > 0 && !lines[i - 1].is_empty())
                        || lines.get(i + 1).is_some_and(|l| !l.is_empty())
                };
                for (_, line) in lines.iter().enumerate().filter(|&(i, _)| by_hand(i)) {
                    assert!(
                        line.chars().count() <= 100,
                        "`{}`: {} columns: {line}",
                        command.get_name(),
                        line.chars().count()
                    );
                }
            }
            seen += 1;
            pending.extend(command.get_subcommands().cloned());
        }
        assert!(seen >= 12, "walked {seen} commands");
    }
}
