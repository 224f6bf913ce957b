//! How long one partition is.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// The length of one partition of `outbox_events` (UTC periods).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Granularity {
    /// One partition per UTC day (`outbox_events_pYYYYMMDD`): for retentions of days.
    #[default]
    Daily,
    /// One partition per UTC hour (`outbox_events_pYYYYMMDDHH`): for retentions of hours, or
    /// volumes where a day is too large to hold.
    Hourly,
}

impl Granularity {
    /// The name stored in `outbox_partitioning` and taken by `--partitioned=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Daily => "daily",
            Granularity::Hourly => "hourly",
        }
    }

    /// Partitions kept ready beyond the current one unless told otherwise: 3 days, 12 hours —
    /// room for maintenance to be down that long before rows reach the tail partition (which
    /// catches them: no insert fails), and few partitions for lookups by id to probe.
    pub fn default_ahead(self) -> u32 {
        match self {
            Granularity::Daily => 3,
            Granularity::Hourly => 12,
        }
    }
}

/// The numbers of partitions ahead that [`migrate_partitioned`](super::migrate_partitioned)
/// accepts. Every partition adds its table and indexes (about six relations) to the locks each
/// claim holds: 1 000 ahead made each claim take 6 000 locks, beyond what a default server's lock
/// table holds for a few claims at once (black-box run); 100 days ahead is more than maintenance
/// ever needs.
pub const AHEAD: std::ops::RangeInclusive<u32> = 2..=100;

impl fmt::Display for Granularity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Granularity {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim() {
            "daily" => Ok(Granularity::Daily),
            "hourly" => Ok(Granularity::Hourly),
            other => Err(Error::config(format!(
                "granularity must be daily or hourly, got `{other}`"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints() {
        for g in [Granularity::Daily, Granularity::Hourly] {
            assert_eq!(g.as_str().parse::<Granularity>().unwrap(), g);
        }
        assert!("weekly".parse::<Granularity>().is_err());
    }
}
