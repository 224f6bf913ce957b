//! Event type → queue.

use std::collections::HashMap;

/// Routes compiled for look-up: exact types, prefixes (longest first) and the default.
#[derive(Debug)]
pub(crate) struct Router<T> {
    exact: HashMap<String, T>,
    /// Sorted by prefix length, longest first.
    prefixes: Vec<(String, T)>,
    default: Option<T>,
}

impl<T> Router<T> {
    /// Compiles `(pattern, target)` pairs. Fails, naming the pattern, on an empty pattern, a `*`
    /// anywhere but at the end, or a pattern given twice.
    pub(crate) fn new(
        routes: impl IntoIterator<Item = (String, T)>,
        default: Option<T>,
    ) -> Result<Self, String> {
        let mut exact = HashMap::new();
        let mut prefixes: Vec<(String, T)> = Vec::new();
        for (pattern, target) in routes {
            if pattern.is_empty() {
                return Err("a route has an empty pattern".into());
            }
            let (prefix, is_prefix) = match pattern.strip_suffix('*') {
                Some(prefix) => (prefix, true),
                None => (pattern.as_str(), false),
            };
            if prefix.contains('*') {
                return Err(format!(
                    "route pattern `{pattern}`: `*` is only allowed at the end"
                ));
            }
            let duplicate = if is_prefix {
                prefixes.iter().any(|(p, _)| p == prefix)
            } else {
                exact.contains_key(prefix)
            };
            if duplicate {
                return Err(format!("route pattern `{pattern}` is given twice"));
            }
            if is_prefix {
                prefixes.push((prefix.to_owned(), target));
            } else {
                exact.insert(pattern, target);
            }
        }
        prefixes.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        Ok(Router {
            exact,
            prefixes,
            default,
        })
    }

    /// The target of `event_type`: an exact route, else the longest matching prefix, else the
    /// default.
    pub(crate) fn route(&self, event_type: &str) -> Option<&T> {
        // No exact routes (one default queue, the common set-up): no hash per event.
        let exact = if self.exact.is_empty() {
            None
        } else {
            self.exact.get(event_type)
        };
        exact
            .or_else(|| {
                self.prefixes
                    .iter()
                    .find(|(prefix, _)| event_type.starts_with(prefix.as_str()))
                    .map(|(_, target)| target)
            })
            .or(self.default.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(
        routes: &[(&str, &'static str)],
        default: Option<&'static str>,
    ) -> Router<&'static str> {
        Router::new(routes.iter().map(|(p, t)| (p.to_string(), *t)), default).unwrap()
    }

    #[test]
    fn exact_beats_prefix_and_longer_prefix_beats_shorter() {
        let r = router(
            &[
                ("order.*", "orders"),
                ("order.line.*", "lines"),
                ("order.created", "created"),
                ("*", "everything"),
            ],
            Some("default"),
        );
        assert_eq!(r.route("order.created"), Some(&"created"));
        assert_eq!(r.route("order.line.added"), Some(&"lines"));
        assert_eq!(r.route("order.shipped"), Some(&"orders"));
        assert_eq!(r.route("payment.captured"), Some(&"everything"));
    }

    #[test]
    fn order_of_declaration_does_not_matter() {
        let r = router(&[("order.line.*", "lines"), ("order.*", "orders")], None);
        assert_eq!(r.route("order.line.added"), Some(&"lines"));
        let r = router(&[("order.*", "orders"), ("order.line.*", "lines")], None);
        assert_eq!(r.route("order.line.added"), Some(&"lines"));
    }

    #[test]
    fn default_comes_last_and_no_route_is_none() {
        let r = router(&[("order.*", "orders")], Some("default"));
        assert_eq!(r.route("payment.captured"), Some(&"default"));
        // A prefix is a plain prefix: `order.*` does not match `order` itself.
        assert_eq!(r.route("order"), Some(&"default"));
        let r = router(&[("order.*", "orders")], None);
        assert_eq!(r.route("payment.captured"), None);
    }

    #[test]
    fn invalid_patterns_are_refused() {
        let bad = |routes: &[(&str, &str)]| {
            Router::new(routes.iter().map(|(p, t)| (p.to_string(), *t)), None).unwrap_err()
        };
        assert!(bad(&[("", "q")]).contains("empty"));
        assert!(bad(&[("order.*.created", "q")]).contains("only allowed at the end"));
        assert!(bad(&[("order.*", "a"), ("order.*", "b")]).contains("given twice"));
        assert!(bad(&[("x", "a"), ("x", "b")]).contains("given twice"));
    }
}
