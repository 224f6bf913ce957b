//! The benchmarks can't rot: every one runs at tiny sizes (debug build, a few seconds) and produces
//! its rows. The figures themselves are not checked — a debug build on a shared machine says nothing.

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
    let table = report.to_markdown();
    assert!(table.contains("| # | benchmark |"), "{table}");
    assert_eq!(
        table.lines().filter(|l| l.starts_with("| ")).count(),
        report.rows.len() + 1
    );
}
