//! `fanout`: the orders example with an SNS topic in the middle. Makes a fresh database, an SNS
//! FIFO topic and two SQS FIFO queues subscribed to it; the relay publishes the order events to the
//! topic, and two consumers (the read model and the shipping service) each apply every event once.
//! Prints a report; exits 1 when an event did not reach a consumer, or was applied twice or out of
//! order.
//!
//! Run it with `scripts/demo --fan-out` (which starts PostgreSQL and the local AWS emulator first).

use std::process::ExitCode;
use std::time::Duration;

use aws_config::BehaviorVersion;
use orders_example::Error;
use orders_example::args::{self as cli, env};
use orders_example::demo;
use orders_example::fanout::{self, FanOutConfig, Topology};

const USAGE: &str = "\
usage: fanout [--orders N] [--writers N] [--handlers N] [--timeout SECS] [--database NAME]

Environment:
  DATABASE_URL            the PostgreSQL server, as a connection string to a database the user may
                          connect to (default postgres://postgres@127.0.0.1:5432/postgres); the run
                          drops and creates the database NAME there (default outbox_fanout)
  AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL
                          a local server speaking SQS and SNS (scripts/demo sets it to fauxqs);
                          without either, the topic and queues are created on AWS itself, and
                          deleted afterwards
  AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, …  the usual AWS settings";

struct Args {
    orders: u32,
    writers: usize,
    handlers: usize,
    timeout: Duration,
    database: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        orders: 300,
        writers: 4,
        handlers: 4,
        timeout: Duration::from_secs(60),
        database: "outbox_fanout".into(),
    };
    cli::parse(|flag, value| {
        match flag {
            "--orders" => args.orders = value.orders()?,
            "--writers" => args.writers = value.workers()?,
            "--handlers" => args.handlers = value.workers()?,
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
        Err(e) => return cli::usage_exit("fanout", &e, USAGE),
    };
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("fanout: {}", orders_example::error_chain(&*e));
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> Result<bool, Error> {
    let admin_url =
        env("DATABASE_URL").unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let database = demo::recreate_database(&admin_url, &args.database).await?;
    // One endpoint for SQS and SNS: the local emulator serves both on one port.
    let endpoint = env("AWS_ENDPOINT_URL_SQS").or_else(|| env("AWS_ENDPOINT_URL"));
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(url) = &endpoint {
        loader = loader.endpoint_url(url);
    }
    let aws = loader.load().await;
    let prefix = format!(
        "outbox-fanout-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let topology = Topology::create(&aws, &prefix).await?;

    println!("fan-out example: {} orders", args.orders);
    println!("  database  {} (dropped and created afresh)", args.database);
    println!("  topic     {}", topology.topic_arn);
    println!("  queues    {}  (read model)", topology.summaries_queue);
    println!("            {}  (shipping)", topology.shipping_queue);
    println!(
        "  AWS       {}",
        endpoint
            .as_deref()
            .unwrap_or("AWS (the region's endpoints)")
    );
    println!(
        "  writers {}, {} handlers per consumer, in-process relay routing order.* to the topic",
        args.writers, args.handlers
    );
    println!();

    let mut config = FanOutConfig::new(database, aws.clone(), topology.clone());
    config.orders = args.orders;
    config.writers = args.writers;
    config.handlers = args.handlers;
    config.timeout = args.timeout;
    let result = fanout::run(config).await;
    topology.delete(&aws).await;
    let report = result?;

    println!("{report}");
    println!();
    let problems = report.problems();
    if problems.is_empty() {
        println!(
            "OK: every committed event reached both consumers through the topic; each applied it once, in order."
        );
        Ok(true)
    } else {
        for p in &problems {
            println!("FAILED: {p}");
        }
        Ok(false)
    }
}
