//! Statistics over rounds: quantiles, medians, spreads, rates.

use std::time::Duration;

use super::*;

/// The `q`-quantile (0.0–1.0) of `samples` (sorted in place), nearest rank.
pub fn quantile(samples: &mut [f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(f64::total_cmp);
    let rank = (q * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// The median of `samples`.
pub fn median(samples: &mut [f64]) -> f64 {
    quantile(samples, 0.5)
}

/// The median of several figures, with their spread: how every throughput and latency figure of the
/// table is reported (the median of `--rounds` rounds, min and max beside it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The median (the mean of the two middle values for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// How many values.
    pub n: usize,
}

impl Spread {
    /// The spread of `values` (NaN figures for none).
    pub fn of(values: &[f64]) -> Spread {
        let mut v: Vec<f64> = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Spread {
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
                n,
            };
        }
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        }
    }

    /// A rate, e.g. `30 011 ev/s (min 28 100, max 31 900)`; min and max only for several rounds.
    pub fn rate(&self, unit: &str) -> String {
        let median = crate::report::fmt_rate(self.median, unit);
        if self.n <= 1 {
            return median;
        }
        let g = |x: f64| crate::report::group(x.max(0.0).round() as u64);
        format!("{median} (min {}, max {})", g(self.min), g(self.max))
    }

    /// Milliseconds, e.g. `0.42 ms (min 0.40, max 0.47)`; min and max only for several rounds.
    pub fn ms(&self) -> String {
        let median = crate::report::fmt_ms(self.median);
        if self.n <= 1 {
            return median;
        }
        let strip = |x: f64| crate::report::fmt_ms(x).trim_end_matches(" ms").to_owned();
        format!(
            "{median} (min {}, max {})",
            strip(self.min),
            strip(self.max)
        )
    }
}

/// The median rate of several drains: the spread of their rates and the drain whose rate is the
/// median (the lower middle one for an even count), for its other figures.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// The spread of the rates (events per second).
    pub spread: Spread,
    /// The median drain.
    pub drain: Drain,
}

impl std::ops::Deref for Rates {
    type Target = Spread;
    fn deref(&self) -> &Spread {
        &self.spread
    }
}

impl Rates {
    /// The median rate with min and max, e.g. `30 011 ev/s (min 28 100, max 31 900)`.
    pub fn describe(&self, unit: &str) -> String {
        self.spread.rate(unit)
    }
}

/// The median of several drains' rates (see [`Rates`]).
pub fn median_rate(runs: &[Drain]) -> Rates {
    let rates: Vec<f64> = runs.iter().map(Drain::rate).collect();
    let mut sorted: Vec<Drain> = runs.to_vec();
    sorted.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let drain = sorted
        .get(sorted.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(Drain {
            events: 0,
            elapsed: Duration::ZERO,
            capped: false,
            cpu: None,
            fixture_cpu: None,
            max_batches: None,
            db_cpu: None,
        });
    Rates {
        spread: Spread::of(&rates),
        drain,
    }
}
