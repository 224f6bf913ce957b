//! Human durations on the command line: `7d`, `12h`, `90m`, `45s`, `500ms`, or sums like `1h30m`.

use std::time::Duration;

/// Parses a duration such as `7d`, `1h30m` or `250ms`.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("a duration is needed, e.g. 7d, 12h, 30m, 45s".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("`{text}`: expected a number before `{rest}`"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{text}`: number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let secs_per_unit: f64 = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "w" => 604_800.0,
            "" => return Err(format!("`{text}`: a unit is needed (ms, s, m, h, d, w)")),
            other => {
                return Err(format!(
                    "`{text}`: unknown unit `{other}` (use ms, s, m, h, d, w)"
                ));
            }
        };
        total += Duration::from_secs_f64(number as f64 * secs_per_unit);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
