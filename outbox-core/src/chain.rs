//! One way to print an error with its causes, for every crate of the workspace.

use std::error::Error as StdError;

/// The messages of `error` and of its [sources](StdError::source), joined by `": "`, on one line.
/// A message already contained in the text so far is skipped (many errors repeat their source's
/// message in their own), so each cause shows once.
///
/// ```
/// let io = std::io::Error::other("connection reset");
/// let e = outbox_core::Error::new(outbox_core::ErrorKind::Database, "LISTEN failed").with_source(io);
/// assert_eq!(outbox_core::error_chain(&e), "database error: LISTEN failed: connection reset");
/// ```
pub fn error_chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl StdError for Layer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            self.1.as_deref().map(|l| l as &(dyn StdError + 'static))
        }
    }

    #[test]
    fn every_cause_once() {
        let e = Layer(
            "db error: timeout",
            Some(Box::new(Layer(
                "timeout",
                Some(Box::new(Layer("os error 110", None))),
            ))),
        );
        assert_eq!(error_chain(&e), "db error: timeout: os error 110");
    }
}
