//! Row values in log lines, cut to a length a log pipeline keeps.

use std::fmt;

/// The characters of a row value (an event type, an aggregate id) a log line shows.
pub(crate) const MAX_LOGGED_CHARS: usize = 200;

/// A row value as a log field: its first [`MAX_LOGGED_CHARS`] characters, then `…(N more)`.
/// A hand-written row's 100 000-character event type made a 100 kB log line, which log shippers
/// split or drop (Docker splits lines at 16 KiB). Written without allocating.
#[derive(Clone, Copy)]
pub(crate) struct Clipped<'a>(pub(crate) &'a str);

impl fmt::Display for Clipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.char_indices().nth(MAX_LOGGED_CHARS) {
            None => f.write_str(self.0),
            Some((end, _)) => {
                let more = self.0[end..].chars().count();
                write!(f, "{}…({more} more)", &self.0[..end])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_short_ones_kept() {
        assert_eq!(Clipped("order.created").to_string(), "order.created");
        let exact = "é".repeat(MAX_LOGGED_CHARS);
        assert_eq!(Clipped(&exact).to_string(), exact);
        let long = format!("{}{}", "u".repeat(MAX_LOGGED_CHARS), "é".repeat(99_800));
        assert_eq!(
            Clipped(&long).to_string(),
            format!("{}…(99800 more)", "u".repeat(MAX_LOGGED_CHARS))
        );
    }
}
