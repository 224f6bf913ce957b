//! `bench`: runs the outbox benchmarks, prints the table and writes it to a file. See
//! `scripts/bench --help`.

use std::process::ExitCode;
use std::time::Duration;

use outbox_bench::{BENCHMARKS, Opts};

const USAGE: &str = "\
usage: scripts/bench [options]

Runs the outbox benchmarks (PostgreSQL and an in-process SQS fixture) and prints a table of
ratios against baselines measured in the same run; writes it to bench-results/latest.md.
Exits 0 even when targets are missed (MISS rows); non-zero only when a benchmark crashed.

options:
  --quick               small sizes: a smoke run in well under a minute
  --only N[,N…]         run only these benchmarks (1-10)
  --rounds N            repetitions; figures are their median (default 3, quick 1)
  --backlog N           events drained in benchmarks 1 and 6 (default 100000)
  --batch-size N        relay batch size, also pgbench's (default 100)
  --concurrency N       relay workers, also pgbench clients and naive workers (default 4)
  --max-in-flight N     SQS publisher's calls in flight (default 40)
  --sqs-latency-ms N    latency of the slow case of benchmark 2 (default 15)
  --growth-rows N       processed rows in benchmark 5 (default 1000000)
  --cap-secs N          longest drain in benchmark 6 (default 60)
  --scale-out-backlog N events drained in benchmark 7 (default 50000)
  --consumer-events N   messages drained in benchmark 8 (default 10000)
  --retention-rows N    old rows retired in benchmark 9's first cycle (default 200000)
  --retention-rate N    events/s the writers emit in benchmark 9 (default 1000)
  --retention-gap N     seconds of load before each of benchmark 9's cycles and after the last (default 10)
  --out PATH            where the table is written (default bench-results/latest.md)
  -h, --help            this text

benchmarks:";

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut opts = if args.iter().any(|a| a == "--quick") {
        Opts::quick()
    } else {
        Opts::full()
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f, Some(v.to_owned())),
            None => (arg.as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        let mut number = || -> Result<usize, String> {
            let v = value()?;
            v.replace('_', "")
                .parse::<usize>()
                .map_err(|_| format!("{flag}: `{v}` is not a whole number"))
        };
        match flag {
            "--quick" => {}
            "--only" => {
                let v = value()?;
                opts.only = v
                    .split(',')
                    .map(|n| match n.trim().parse::<u8>() {
                        Ok(n @ 1..=10) => Ok(n),
                        _ => Err(format!("--only: `{n}` is not a benchmark number (1-10)")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--rounds" => opts.rounds = number()?.max(1),
            "--backlog" => opts.backlog = number()?.max(1),
            "--batch-size" => opts.relay.batch_size = number()?.max(1),
            "--concurrency" => opts.relay.concurrency = number()?.max(1),
            "--max-in-flight" => opts.relay.max_in_flight = number()?.max(1),
            "--sqs-latency-ms" => opts.sqs_latency = Duration::from_millis(number()? as u64),
            "--growth-rows" => opts.growth_rows = number()?,
            "--cap-secs" => opts.ordering_cap = Duration::from_secs(number()? as u64),
            "--scale-out-backlog" => opts.scale_out_backlog = number()?.max(1),
            "--consumer-events" => opts.consumer_events = number()?.max(1),
            "--retention-rows" => opts.retention_rows = number()?.max(1),
            "--retention-rate" => {
                opts.retention_rate = u32::try_from(number()?.max(1)).unwrap_or(u32::MAX)
            }
            "--retention-gap" => opts.retention_gap = Duration::from_secs(number()? as u64),
            "--out" => opts.out = value()?.into(),
            "-h" | "--help" => {
                println!("{USAGE}");
                for (n, name) in BENCHMARKS {
                    println!("  {n}. {name}");
                }
                std::process::exit(0);
            }
            other => return Err(format!("unknown option `{other}` (see --help)")),
        }
    }
    Ok(opts)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::from(2);
        }
    };
    let started = std::time::Instant::now();
    let report = match outbox_bench::run(&opts).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench: a benchmark failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut text = report.to_markdown();
    text.push_str(&format!(
        "\nWhole run: {:.1} s.\n",
        started.elapsed().as_secs_f64()
    ));
    println!("{text}");
    if let Some(dir) = opts.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("bench: cannot create {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    }
    if let Err(e) = std::fs::write(&opts.out, &text) {
        eprintln!("bench: cannot write {}: {e}", opts.out.display());
        return ExitCode::FAILURE;
    }
    eprintln!("[bench] table written to {}", opts.out.display());
    ExitCode::SUCCESS
}
