//! Human durations on the command line: `7d`, `12h`, `90m`, `45s`, `500ms`, or sums like `1h30m`.

use std::time::Duration;

/// The longest duration accepted: 100 years (anything longer is surely a typo, and could overflow
/// the clocks and intervals it is added to).
pub const MAX: Duration = Duration::from_secs(100 * 365 * 86_400);

/// `d` as [`parse`] reads it, in its largest units: `7d`, `1h30m`, `250ms`, `0s`.
pub fn display(d: Duration) -> String {
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    let mut text = String::new();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ] {
        if ms >= size {
            text.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    text
}

/// A retention (`--retention`, `--older-than`): a duration of at most
/// [`outbox_core::MAX_RETENTION`], as the relay's setting (`partitions maintain` and `cleanup`
/// took up to 100 years).
pub fn parse_retention(text: &str) -> Result<Duration, String> {
    let d = parse(text)?;
    if d > outbox_core::MAX_RETENTION {
        return Err(format!(
            "`{}`: a retention is at most {} days",
            text.trim(),
            outbox_core::MAX_RETENTION.as_secs() / 86_400
        ));
    }
    Ok(d)
}

/// Parses a duration such as `7d`, `1h30m` or `250ms`, of at most [`MAX`]. Integer arithmetic
/// throughout: an overflowing number is an error, never a panic.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("a duration is needed, e.g. 7d, 12h, 30m, 45s".into());
    }
    if text.starts_with('-') {
        return Err(format!("`{text}`: a duration cannot be negative"));
    }
    // In the unit the limit is checked in: "100 years" read as 36 524 days (a black-box run).
    let too_large = || format!("`{text}`: too large (at most {})", display(MAX));
    let mut total_ms: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("`{text}`: expected a number before `{rest}`"));
        }
        let number: u64 = rest[..digits].parse().map_err(|_| too_large())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let ms_per_unit: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            "" => return Err(format!("`{text}`: a unit is needed (ms, s, m, h, d, w)")),
            other => {
                return Err(format!(
                    "`{text}`: unknown unit `{other}` (use ms, s, m, h, d, w)"
                ));
            }
        };
        total_ms = number
            .checked_mul(ms_per_unit)
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or_else(too_large)?;
    }
    let total = Duration::from_millis(total_ms);
    if total > MAX {
        return Err(too_large());
    }
    Ok(total)
}

/// [`parse`], refusing zero: for time limits where 0 would mean "no limit" or "never".
pub fn parse_positive(text: &str) -> Result<Duration, String> {
    let d = parse(text)?;
    if d.is_zero() {
        return Err(format!("`{}`: must be more than 0, e.g. 1ms", text.trim()));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_refuses_only_zero() {
        assert!(parse_positive("0s").is_err());
        assert!(parse_positive("0ms").is_err());
        assert_eq!(parse_positive("1ms").unwrap(), Duration::from_millis(1));
    }

    #[test]
    fn parses_units_and_sums() {
        assert_eq!(parse("7d").unwrap(), Duration::from_secs(7 * 86_400));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("2w").unwrap(), Duration::from_secs(14 * 86_400));
        assert_eq!(parse(" 45s ").unwrap(), Duration::from_secs(45));
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        for bad in ["", "7", "d", "7x", "1h-3m", "99999999999999999999s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("-1s").unwrap_err().contains("cannot be negative"));
    }

    #[test]
    fn overflow_is_an_error_not_a_panic() {
        for bad in [
            "99999999999999w",
            "18446744073709551615ms1ms",
            "30000000000000000d",
            "5200w400d",
            "18446744073709551615s",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("too large"), "{bad}: {e}");
        }
        assert_eq!(parse("5200w").unwrap(), Duration::from_secs(5200 * 604_800));
        assert_eq!(parse("36500d").unwrap(), MAX);
        assert_eq!(
            parse("36524d").unwrap_err(),
            "`36524d`: too large (at most 36500d)"
        );
    }

    #[test]
    fn display_reads_back_as_the_same_duration() {
        for text in ["7d", "1h30m", "250ms", "0s", "1d1h1m1s1ms", "45s"] {
            let d = parse(text).unwrap();
            assert_eq!(display(d), text);
            assert_eq!(parse(&display(d)).unwrap(), d);
        }
        assert_eq!(display(parse("1w").unwrap()), "7d");
        assert_eq!(display(parse("90m").unwrap()), "1h30m");
    }
}
