//! The benchmarks can't rot: every one runs at tiny sizes (debug build, a few seconds) and produces
//! its rows. The figures themselves are not checked — a debug build on a shared machine says nothing.

use outbox_bench::common::Spread;
use outbox_bench::{BENCHMARKS, Opts, Verdict};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_benchmark_runs_at_tiny_sizes() {
    let out = std::env::temp_dir().join(format!("outbox-bench-smoke-{}.md", std::process::id()));
    let opts = Opts {
        out: out.clone(),
        ..Opts::tiny()
    };
    let report = outbox_bench::run(&opts)
        .await
        .expect("every benchmark runs");

    for (n, name) in BENCHMARKS {
        assert!(
            report.rows.iter().any(|r| r.bench == n),
            "benchmark {n} ({name}) produced no row"
        );
        assert!(
            report.timings.iter().any(|t| t.0 == n),
            "benchmark {n} ({name}) has no timing"
        );
    }
    for row in &report.rows {
        assert!(
            !row.ratio.contains("n/a"),
            "benchmark {}: `{}` has no ratio",
            row.bench,
            row.name
        );
        if row.verdict != Verdict::Info {
            assert!(!row.target.is_empty(), "`{}` has no target", row.name);
        }
    }
    // PostgreSQL runs on this machine in the tests, so benchmark 1 measures its CPU per event.
    assert!(
        report
            .rows
            .iter()
            .any(|r| r.bench == 1 && r.name.starts_with("database CPU per event")),
        "benchmark 1 has no database CPU row"
    );
    // Issue 18's CPU target is checked against the same drain through aws-sdk-sqs.
    assert!(
        report.rows.iter().any(|r| r.bench == 1
            && r.name.starts_with("CPU per event, relay + SQS client")
            && r.target == "≤ 0.54×"),
        "benchmark 1 has no checked CPU row"
    );
    // Benchmark 7's verdict is about correctness, not speed: no event published twice.
    let scale_out: Vec<_> = report.rows.iter().filter(|r| r.bench == 7).collect();
    assert_eq!(scale_out.len(), 3, "one row per instance count");
    for row in scale_out {
        assert_eq!(row.verdict, Verdict::Pass, "duplicates: {}", row.measured);
    }
    let table = report.to_markdown();
    assert!(table.contains("| # | benchmark |"), "{table}");
    assert_eq!(
        table.lines().filter(|l| l.starts_with("| ")).count(),
        report.rows.len() + 1
    );
}

#[test]
fn figures_are_medians_with_their_spread() {
    let s = Spread::of(&[31_900.0, 28_100.0, 30_011.0]);
    assert_eq!(
        (s.median, s.min, s.max, s.n),
        (30_011.0, 28_100.0, 31_900.0, 3)
    );
    assert_eq!(s.rate("ev"), "30 011 ev/s (min 28 100, max 31 900)");
    assert_eq!(Spread::of(&[1.0, 3.0]).median, 2.0);
    assert_eq!(Spread::of(&[0.5]).ms(), "0.50 ms");
}
