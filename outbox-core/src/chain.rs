//! One way to print an error with its causes, for every crate of the workspace.

use std::borrow::Cow;
use std::error::Error as StdError;

/// Where AWS error messages start quoting the request they expected (SigV4's canonical request
/// and string to sign), which name every signed header with its value: the session token too.
const SIGNED_REQUEST_ECHOES: &[&str] = &[
    "The Canonical String for this request should have been",
    "The String-to-Sign should have been",
];

/// Headers and query parameters whose values are secrets wherever they appear.
const SECRET_NAMES: &[&str] = &["x-amz-security-token", "authorization"];

/// The messages of `error` and of its [sources](StdError::source), joined by `": "`, on one line.
/// A message already contained in the text so far is skipped (many errors repeat their source's
/// message in their own), so each cause shows once. A PostgreSQL error shows its message and hint,
/// never its detail, which can quote a row's values (an event's payload among them).
///
/// ```
/// let io = std::io::Error::other("connection reset");
/// let e = outbox_core::Error::new(outbox_core::ErrorKind::Database, "LISTEN failed").with_source(io);
/// assert_eq!(outbox_core::error_chain(&e), "database error: LISTEN failed: connection reset");
/// ```
pub fn error_chain(error: &(dyn StdError + 'static)) -> String {
    // Trimmed: deadpool ends its hook errors with a newline (a log line showed a literal `\n`).
    let mut text = error.to_string().trim_end().to_owned();
    let mut source = error.source();
    while let Some(cause) = source {
        let db = cause.downcast_ref::<tokio_postgres::error::DbError>();
        let cause_text = match db {
            // The server's message and hint, never its detail: that can quote a row's values
            // ("Failing row contains (…)", a key's value), payloads included.
            Some(db) => match db.hint().or_else(|| pooler_hint(db)) {
                Some(hint) => format!("{}: {} (hint: {hint})", db.severity(), db.message()),
                None => format!("{}: {}", db.severity(), db.message()),
            },
            // tokio-postgres' own words for a server error ("db error") say nothing its source
            // does not.
            None if cause
                .downcast_ref::<tokio_postgres::Error>()
                .is_some_and(|e| e.as_db_error().is_some()) =>
            {
                String::new()
            }
            None => cause.to_string().trim_end().to_owned(),
        };
        let already =
            text.contains(&cause_text) || db.is_some_and(|db| text.contains(db.message()));
        if !cause_text.is_empty() && !already {
            text.push_str(": ");
            text.push_str(&cause_text);
        } else if let Some(hint) = db.and_then(|db| db.hint().or_else(|| pooler_hint(db))) {
            // The message was told already (our errors quote it), its hint not (black-box run:
            // the pooler's hint never showed).
            if !text.contains(hint) {
                text.push_str(&format!(" (hint: {hint})"));
            }
        }
        source = cause.source();
    }
    match redact_signed_request(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(redacted) => redacted,
    }
}

/// What the server's errors about prepared statements mean when they come at all: a pooler in
/// transaction mode that hands a statement prepared on one server connection to another
/// (black-box run: behind PgBouncer 1.18 the relay published nothing for minutes, and every
/// command failed, with a bare SQLSTATE 26000 or 42P05).
fn pooler_hint(db: &tokio_postgres::error::DbError) -> Option<&'static str> {
    use tokio_postgres::error::SqlState;
    let code = db.code();
    (*code == SqlState::INVALID_SQL_STATEMENT_NAME || *code == SqlState::DUPLICATE_PSTATEMENT)
        .then_some(
            "behind a pooler in transaction mode that does not keep prepared statements (PgBouncer \
         before 1.21, or without max_prepared_statements): set max_prepared_statements, or use \
         session mode",
        )
}

/// `text` without what would disclose a credential: an AWS error message that quotes the signed
/// request it expected (`InvalidSignatureException`, `SignatureDoesNotMatch`: the canonical
/// request carries the `x-amz-security-token` header's value) is cut where the quote starts, and
/// any `x-amz-security-token` or `authorization` header or query value left is replaced by
/// `<redacted>`. [`error_chain`] applies it; so do the publishers to the error messages they
/// store with an event.
///
/// ```
/// let m = "The request signature we calculated does not match. The Canonical String for this \
///          request should have been\nPOST\n/\n\nx-amz-security-token:IQoJb3JpZ2luX2VjE\n";
/// assert_eq!(
///     outbox_core::redact_signed_request(m),
///     "The request signature we calculated does not match. (the signed request it quoted is left out)"
/// );
/// ```
pub fn redact_signed_request(text: &str) -> Cow<'_, str> {
    let mut text = Cow::Borrowed(text);
    if let Some(at) = SIGNED_REQUEST_ECHOES
        .iter()
        .filter_map(|echo| text.find(echo))
        .min()
    {
        let kept = text[..at].trim_end();
        text = Cow::Owned(format!(
            "{kept}{}(the signed request it quoted is left out)",
            if kept.is_empty() { "" } else { " " }
        ));
    }
    for name in SECRET_NAMES {
        let mut from = 0;
        while let Some(found) = find_ignore_case(&text[from..], name) {
            let start = from + found + name.len();
            // `name: value`, `name=value`, `"name":"value"`: the value runs to the line's end, or
            // to the `&` or `"` that ends it in a query or JSON.
            let rest = &text[start..];
            let Some(value_at) = rest
                .char_indices()
                .find(|(_, c)| !matches!(c, ':' | '=' | ' ' | '"'))
                .map(|(i, _)| i)
                .filter(|&i| rest[..i].contains([':', '=']))
            else {
                from = start;
                continue;
            };
            let value_len = rest[value_at..]
                .find(['\n', '\r', '&', '"'])
                .unwrap_or(rest.len() - value_at);
            let (a, b) = (start + value_at, start + value_at + value_len);
            if &text[a..b] == "<redacted>" {
                from = b;
                continue;
            }
            let mut owned = text.into_owned();
            owned.replace_range(a..b, "<redacted>");
            from = a + "<redacted>".len();
            text = Cow::Owned(owned);
        }
    }
    text
}

/// Where `needle` (ASCII, lower case) starts in `haystack`, ignoring ASCII case.
fn find_ignore_case(haystack: &str, needle: &str) -> Option<usize> {
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new pool connection whose hook gave up reads as one line (deadpool ends the hook's error
    /// with a newline, shown as a literal `\n` in the relay's log lines).
    #[test]
    fn a_pool_hook_failure_is_one_line() {
        let hook = deadpool_postgres::HookError::message("the new connection did not answer");
        let e = crate::Error::from(deadpool_postgres::PoolError::PostCreateHook(hook));
        let chain = error_chain(&e);
        assert_eq!(
            chain,
            "connection pool error: could not get a connection from the pool: `post_create` hook \
             failed: the new connection did not answer"
        );
    }

    /// An error about a prepared statement, as a pooler in transaction mode without prepared
    /// statements causes, says what to do.
    #[tokio::test]
    async fn an_unknown_prepared_statement_names_the_pooler_setting() {
        let mut pg = tokio_postgres::Config::new();
        pg.host("127.0.0.1")
            .port(5432)
            .user("postgres")
            .dbname("postgres");
        let (client, connection) = match pg.connect(tokio_postgres::NoTls).await {
            Ok(c) => c,
            Err(e) => {
                panic!("PostgreSQL at 127.0.0.1:5432: {e}; start it: bash scripts/services.sh")
            }
        };
        tokio::spawn(connection);
        let e = client
            .batch_execute("EXECUTE no_such_statement")
            .await
            .unwrap_err();
        let text = error_chain(&e);
        assert!(text.contains("no_such_statement"), "{text}");
        assert!(text.contains("max_prepared_statements"), "{text}");
        // As the relay and the CLI report it: their error quotes the server's message already.
        let ours = crate::Error::from(e);
        let text = error_chain(&ours);
        assert!(text.contains("SQLSTATE 26000"), "{text}");
        assert!(text.contains("max_prepared_statements"), "{text}");
        let other = client.batch_execute("SELECT 1/0").await.unwrap_err();
        assert!(!error_chain(&other).contains("pooler"));
    }

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

    #[test]
    fn signed_requests_and_tokens_are_left_out() {
        // SQS's answer to a request signed with a wrong secret quotes the canonical request,
        // session token included (it reached the log and the event's last_error).
        let e = Layer(
            "SendMessageBatch: InvalidSignatureException (HTTP 400)",
            Some(Box::new(Layer(
                "The request signature we calculated does not match the signature you provided.\n\n\
                 The Canonical String for this request should have been\n'POST\n/\n\n\
                 host:sqs.eu-west-1.amazonaws.com\nx-amz-security-token:IQoJb3JpZ2luSECRET\n'\n\n\
                 The String-to-Sign should have been\n'AWS4-HMAC-SHA256'",
                None,
            ))),
        );
        let text = error_chain(&e);
        assert!(!text.contains("SECRET"), "{text}");
        assert!(!text.contains("host:"), "{text}");
        assert!(
            text.ends_with("does not match the signature you provided. (the signed request it quoted is left out)"),
            "{text}"
        );
        for (given, expected) in [
            (
                "bad X-Amz-Security-Token=abc&Action=x",
                "bad X-Amz-Security-Token=<redacted>&Action=x",
            ),
            (
                r#"{"x-amz-security-token":"abc","n":1}"#,
                r#"{"x-amz-security-token":"<redacted>","n":1}"#,
            ),
            (
                "authorization: AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=f\nnext",
                "authorization: <redacted>\nnext",
            ),
            // Words that merely contain a name are left alone.
            (
                "AuthorizationError (HTTP 403): not authorized",
                "AuthorizationError (HTTP 403): not authorized",
            ),
            ("x-amz-security-token", "x-amz-security-token"),
        ] {
            assert_eq!(redact_signed_request(given), expected, "{given}");
        }
    }
}
