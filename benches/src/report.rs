//! The result table: one row per figure, each a ratio against a baseline of the same run.

use std::fmt::Write as _;
use std::time::Duration;

/// Whether a figure met its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The target was met.
    Pass,
    /// The target was missed (reported, not hidden).
    Miss,
    /// No target: the figure is for information.
    Info,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Miss => "**MISS**",
            Verdict::Info => "info",
        }
    }

    fn of(met: bool) -> Verdict {
        if met { Verdict::Pass } else { Verdict::Miss }
    }
}

/// One line of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// The benchmark's number (1–6).
    pub bench: u8,
    /// What is compared.
    pub name: String,
    /// The measured figure.
    pub measured: String,
    /// The baseline it is compared with, measured in the same run.
    pub baseline: String,
    /// The ratio (or the figure the target is about).
    pub ratio: String,
    /// The target, in words.
    pub target: String,
    /// Met or missed.
    pub verdict: Verdict,
}

impl Row {
    /// A row whose ratio must be at least `min`.
    pub fn at_least(
        bench: u8,
        name: impl Into<String>,
        measured: impl Into<String>,
        baseline: impl Into<String>,
        ratio: f64,
        min: f64,
    ) -> Row {
        Row {
            bench,
            name: name.into(),
            measured: measured.into(),
            baseline: baseline.into(),
            ratio: fmt_ratio(ratio),
            target: format!("≥ {}", fmt_ratio(min)),
            verdict: Verdict::of(ratio >= min),
        }
    }

    /// A row whose ratio must be at most `max`.
    pub fn at_most(
        bench: u8,
        name: impl Into<String>,
        measured: impl Into<String>,
        baseline: impl Into<String>,
        ratio: f64,
        max: f64,
    ) -> Row {
        Row {
            bench,
            name: name.into(),
            measured: measured.into(),
            baseline: baseline.into(),
            ratio: fmt_ratio(ratio),
            target: format!("≤ {}", fmt_ratio(max)),
            verdict: Verdict::of(ratio <= max),
        }
    }

    /// A row with no target.
    pub fn info(
        bench: u8,
        name: impl Into<String>,
        measured: impl Into<String>,
        baseline: impl Into<String>,
        ratio: f64,
    ) -> Row {
        Row {
            bench,
            name: name.into(),
            measured: measured.into(),
            baseline: baseline.into(),
            ratio: fmt_ratio(ratio),
            target: "—".into(),
            verdict: Verdict::Info,
        }
    }

    /// A row with a target of its own wording and verdict.
    #[allow(clippy::too_many_arguments)]
    pub fn custom(
        bench: u8,
        name: impl Into<String>,
        measured: impl Into<String>,
        baseline: impl Into<String>,
        ratio: impl Into<String>,
        target: impl Into<String>,
        met: bool,
    ) -> Row {
        Row {
            bench,
            name: name.into(),
            measured: measured.into(),
            baseline: baseline.into(),
            ratio: ratio.into(),
            target: target.into(),
            verdict: Verdict::of(met),
        }
    }
}

/// A ratio with a precision that suits its size.
pub fn fmt_ratio(r: f64) -> String {
    if !r.is_finite() {
        return "n/a".into();
    }
    if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.2}×")
    }
}

/// A rate, e.g. `31 250/s`.
pub fn fmt_rate(per_sec: f64, unit: &str) -> String {
    format!("{} {unit}/s", group(per_sec.round() as u64))
}

/// Milliseconds with a precision that suits them.
pub fn fmt_ms(ms: f64) -> String {
    if ms.abs() >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms.abs() >= 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

/// A count with thin spaces between thousands, e.g. `100 000`.
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// A whole run: context, the table, timings and notes.
#[derive(Debug, Default)]
pub struct Report {
    /// Lines describing the run (machine, settings, sizes).
    pub context: Vec<String>,
    /// The table.
    pub rows: Vec<Row>,
    /// Wall time per benchmark.
    pub timings: Vec<(u8, &'static str, Duration)>,
    /// Remarks the benchmarks made (settings, caps, observations).
    pub notes: Vec<String>,
}

impl Report {
    /// Misses in the table.
    pub fn misses(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Miss)
            .count()
    }

    /// The report as Markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = String::from("# outbox benchmarks\n\n");
        for line in &self.context {
            let _ = writeln!(out, "- {line}");
        }
        out.push('\n');
        out.push_str(
            "| # | benchmark | measured | baseline (same run) | ratio | target | result |\n",
        );
        out.push_str("|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.bench,
                r.name,
                r.measured,
                r.baseline,
                r.ratio,
                r.target,
                r.verdict.label()
            );
        }
        let passed = self
            .rows
            .iter()
            .filter(|r| r.verdict == Verdict::Pass)
            .count();
        let _ = writeln!(
            out,
            "\n{passed} PASS, {} MISS, {} info.\n",
            self.misses(),
            self.rows.len() - passed - self.misses()
        );
        if !self.timings.is_empty() {
            out.push_str("Timings:");
            let total: Duration = self.timings.iter().map(|t| t.2).sum();
            for (n, name, d) in &self.timings {
                let _ = write!(out, " {n}. {name} {:.1} s;", d.as_secs_f64());
            }
            let _ = writeln!(out, " total {:.1} s.\n", total.as_secs_f64());
        }
        if !self.notes.is_empty() {
            out.push_str("Notes:\n\n");
            for n in &self.notes {
                let _ = writeln!(out, "- {n}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(group(100_000), "100 000");
        assert_eq!(group(999), "999");
        assert_eq!(fmt_ratio(0.714), "0.71×");
        assert_eq!(fmt_ratio(23.4), "23×");
        assert_eq!(fmt_rate(31_250.4, "ev"), "31 250 ev/s");
    }

    #[test]
    fn verdicts() {
        assert_eq!(
            Row::at_least(1, "", "", "", 0.7, 0.7).verdict,
            Verdict::Pass
        );
        assert_eq!(
            Row::at_least(1, "", "", "", 0.69, 0.7).verdict,
            Verdict::Miss
        );
        assert_eq!(
            Row::at_most(3, "", "", "", 1.31, 1.3).verdict,
            Verdict::Miss
        );
    }
}
