//! `demo`: the orders example end to end. Makes a fresh database and (locally) a fresh FIFO queue,
//! places orders while the relay publishes their events, reads them back, and prints a report.
//! Exits 1 when anything was lost, out of order, or should not have arrived.
//!
//! Run it with `scripts/demo` (which starts PostgreSQL and a local SQS first); see
//! `examples/orders/README.md` for real AWS.

use std::process::ExitCode;
use std::time::Duration;

use aws_config::BehaviorVersion;
use orders_example::Error;
use orders_example::args::{self as cli, env};
use orders_example::demo::{self, DemoConfig};
use tokio_postgres::config::Host;

const USAGE: &str = "\
usage: demo [--orders N] [--writers N] [--consumers N] [--redeliver-every N] [--timeout SECS]
            [--database NAME]

Environment:
  DATABASE_URL            the PostgreSQL server, as a connection string to a database the user may
                          connect to (default postgres://postgres@127.0.0.1:5432/postgres); the demo
                          drops and creates the database NAME there
  OUTBOX_DEMO_DATABASE    NAME, the demo's database (default outbox_demo; --database wins)
  OUTBOX_DEMO_QUEUE_URL   an existing FIFO queue to use (e.g. on AWS); without it, a fresh queue is
                          created on the endpoint in AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL, and
                          deleted afterwards
  AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, …  the usual AWS settings";

struct Args {
    orders: u32,
    writers: usize,
    consumers: usize,
    redeliver_every: u64,
    timeout: Duration,
    database: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        orders: 3000,
        writers: 4,
        consumers: 8,
        redeliver_every: 50,
        timeout: Duration::from_secs(60),
        database: env("OUTBOX_DEMO_DATABASE").unwrap_or_else(|| "outbox_demo".into()),
    };
    cli::parse(|flag, value| {
        match flag {
            "--orders" => args.orders = value.orders()?,
            "--writers" => args.writers = value.workers()?,
            "--consumers" => args.consumers = value.workers()?,
            "--redeliver-every" => args.redeliver_every = value.count()?,
            "--timeout" => args.timeout = value.seconds()?,
            "--database" => args.database = value.text(),
            _ => return Err(cli::unknown(flag)),
        }
        Ok(())
    })?;
    Ok(args)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => return cli::usage_exit("demo", &e, USAGE),
    };
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("demo: {}", orders_example::error_chain(&*e));
            ExitCode::from(2)
        }
    }
}

/// The demo database's URL for the `outbox stats` hint, when it can be shown without a password:
/// rebuilt from the parsed URL (user, host, port), never cut out of the text (a raw `/` or `?` in a
/// password would leave part of it in the hint).
fn stats_url_hint(admin_url: &str, database: &str) -> String {
    let placeholder = format!("<DATABASE_URL with database {database}>");
    let url_form = admin_url.starts_with("postgres://") || admin_url.starts_with("postgresql://");
    let Ok(config) = admin_url.parse::<tokio_postgres::Config>() else {
        return placeholder;
    };
    let plain = |s: &str| !s.is_empty() && !s.contains([':', '@', '/', '?', '#', '%', ' ']);
    match (config.get_hosts(), config.get_user()) {
        ([Host::Tcp(host)], user)
            if url_form
                && config.get_password().is_none()
                && plain(host)
                && user.is_none_or(plain) =>
        {
            let port = config.get_ports().first().copied().unwrap_or(5432);
            let user = user.map(|u| format!("{u}@")).unwrap_or_default();
            format!("postgres://{user}{host}:{port}/{database}")
        }
        _ => placeholder,
    }
}

async fn run(args: Args) -> Result<bool, Error> {
    let admin_url =
        env("DATABASE_URL").unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let database = demo::recreate_database(&admin_url, &args.database).await?;
    let host = match database.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".into(),
    };
    let port = database.get_ports().first().copied().unwrap_or(5432);

    let sqs =
        aws_sdk_sqs::Client::new(&aws_config::defaults(BehaviorVersion::latest()).load().await);
    let endpoint = env("AWS_ENDPOINT_URL_SQS").or_else(|| env("AWS_ENDPOINT_URL"));
    let (queue_url, created) = match env("OUTBOX_DEMO_QUEUE_URL") {
        Some(url) => {
            if !url.ends_with(".fifo") {
                eprintln!(
                    "demo: warning: {url} is not a FIFO queue: SQS keeps no order on it, so order \
                     violations are to be expected"
                );
            }
            (url, false)
        }
        None => {
            if endpoint.is_none() {
                return Err(
                    "no queue: set OUTBOX_DEMO_QUEUE_URL to a FIFO queue (real SQS), or \
                            AWS_ENDPOINT_URL_SQS to a local SQS server (scripts/demo does)"
                        .into(),
                );
            }
            let name = format!(
                "outbox-demo-{}.fifo",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            );
            (demo::create_fifo_queue(&sqs, &name).await?, true)
        }
    };

    println!("orders example: {} orders", args.orders);
    println!(
        "  database  {} on {host}:{port} (dropped and created afresh)",
        args.database
    );
    println!(
        "  queue     {queue_url}{}",
        if created {
            " (created for this run)"
        } else {
            ""
        }
    );
    println!(
        "  SQS       {}",
        endpoint
            .as_deref()
            .unwrap_or("AWS (the default endpoint of the region)")
    );
    let redelivery = match args.redeliver_every {
        0 => "no redelivery on purpose".to_string(),
        n => format!("every {n}th message is redelivered on purpose"),
    };
    println!(
        "  writers {}, consumer handlers {}, in-process relay with LISTEN; {redelivery}",
        args.writers, args.consumers
    );
    println!();

    let mut config = DemoConfig::new(database, sqs.clone(), &queue_url);
    config.orders = args.orders;
    config.writers = args.writers;
    config.consumers = args.consumers;
    config.redeliver_every = args.redeliver_every;
    config.timeout = args.timeout;
    config.progress = true;
    let result = demo::run(config).await;
    if created {
        // Best effort: a queue left behind is harmless.
        let _ = sqs.delete_queue().queue_url(&queue_url).send().await;
    }
    let report = result?;

    println!("{report}");
    println!();
    println!(
        "outbox stats (what `outbox stats` prints; try `cargo run -q -p outbox-cli -- stats --database-url {}`):",
        stats_url_hint(&admin_url, &args.database)
    );
    for line in demo::format_stats(&report.stats).lines() {
        println!("  {line}");
    }
    println!();
    let problems = report.problems();
    if problems.is_empty() {
        println!(
            "OK: every committed event arrived once, in order; the rolled-back order left no trace."
        );
        Ok(true)
    } else {
        for p in &problems {
            println!("FAILED: {p}");
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::stats_url_hint;

    #[test]
    fn the_stats_hint_never_shows_a_password() {
        for url in [
            "postgres://app:ab/cdS3CRET@db/postgres",
            "postgres://app:pa?ssS3CRET@db:5432/postgres",
            "postgres://app:S3CRET@db/postgres",
            "host=db user=app password=S3CRET",
        ] {
            let hint = stats_url_hint(url, "outbox_demo");
            assert!(!hint.contains("S3CRET"), "{url} gave {hint}");
            assert_eq!(hint, "<DATABASE_URL with database outbox_demo>", "{url}");
        }
        assert_eq!(
            stats_url_hint("postgres://postgres@127.0.0.1:5432/postgres", "outbox_demo"),
            "postgres://postgres@127.0.0.1:5432/outbox_demo"
        );
        assert_eq!(
            stats_url_hint("postgres://db/postgres", "d"),
            "postgres://db:5432/d"
        );
    }
}
