//! Command-line parsing shared by the example's binaries (`demo`, `fanout`): `--flag value` pairs
//! with checked numbers, and the usage text with the right exit code when they do not parse.

use std::process::ExitCode;
use std::time::Duration;

/// An environment variable's value; `None` when it is unset or blank.
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The value given to one flag, with its checks.
pub struct Value {
    flag: String,
    value: String,
}

impl Value {
    fn number(&self, what: &str) -> Result<u64, String> {
        self.value
            .parse::<u64>()
            .map_err(|_| format!("{}: `{}` is not {what}", self.flag, self.value))
    }

    /// A plain number.
    pub fn count(&self) -> Result<u64, String> {
        self.number("a number")
    }

    /// A number of workers (writers, consumers, handlers): clamped to 1..=64.
    pub fn workers(&self) -> Result<usize, String> {
        Ok(self.count()?.clamp(1, 64) as usize)
    }

    /// A number of orders.
    pub fn orders(&self) -> Result<u32, String> {
        u32::try_from(self.number("a number of orders")?)
            .map_err(|_| format!("{}: too many", self.flag))
    }

    /// A number of seconds.
    pub fn seconds(&self) -> Result<Duration, String> {
        Ok(Duration::from_secs(self.number("a number of seconds")?))
    }

    /// The value as given.
    pub fn text(self) -> String {
        self.value
    }
}

/// The error for a flag the binary does not know.
pub fn unknown(flag: &str) -> String {
    format!("unknown argument `{flag}`")
}

/// Reads the process's arguments as `--flag value` pairs (see [`parse_from`]).
pub fn parse(apply: impl FnMut(&str, Value) -> Result<(), String>) -> Result<(), String> {
    parse_from(std::env::args().skip(1), apply)
}

/// Reads `args` as `--flag value` pairs, handing each to `apply`, which takes it or refuses it
/// ([`unknown`] for a flag it does not know). `Err` with an empty message means help was asked for
/// (`-h`, `--help`).
pub fn parse_from(
    args: impl IntoIterator<Item = String>,
    mut apply: impl FnMut(&str, Value) -> Result<(), String>,
) -> Result<(), String> {
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        apply(
            &flag,
            Value {
                flag: flag.clone(),
                value,
            },
        )?;
    }
    Ok(())
}

/// What `program` does when its arguments did not parse: prints `error` (none when help was asked
/// for) and `usage` on stderr; exit code 0 for help, 2 for a usage error.
pub fn usage_exit(program: &str, error: &str, usage: &str) -> ExitCode {
    if !error.is_empty() {
        eprintln!("{program}: {error}\n");
    }
    eprintln!("{usage}");
    ExitCode::from(if error.is_empty() { 0 } else { 2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &[&str]) -> Result<(u32, usize, String), String> {
        let (mut orders, mut workers, mut name) = (0, 0, String::new());
        parse_from(args.iter().map(|a| a.to_string()), |flag, value| {
            match flag {
                "--orders" => orders = value.orders()?,
                "--writers" => workers = value.workers()?,
                "--database" => name = value.text(),
                _ => return Err(unknown(flag)),
            }
            Ok(())
        })?;
        Ok((orders, workers, name))
    }

    #[test]
    fn flags_are_checked_and_applied() {
        assert_eq!(
            parsed(&["--orders", "12", "--writers", "500", "--database", "d"]),
            Ok((12, 64, "d".to_string()))
        );
        assert_eq!(parsed(&["--help"]), Err(String::new()));
        assert_eq!(
            parsed(&["--orders", "x"]),
            Err("--orders: `x` is not a number of orders".to_string())
        );
        assert_eq!(
            parsed(&["--orders", "5000000000"]),
            Err("--orders: too many".to_string())
        );
        assert_eq!(
            parsed(&["--writers"]),
            Err("--writers needs a value".to_string())
        );
        assert_eq!(
            parsed(&["--what", "1"]),
            Err("unknown argument `--what`".to_string())
        );
    }
}
