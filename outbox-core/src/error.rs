//! The library's one error type, and the skeleton every crate of the outbox builds its own on.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;

/// What went wrong, as a category a caller can match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The event's payload could not be serialised to JSON. Nothing was written.
    Serialize,
    /// The message (payload and attributes) is larger than the configured limit. Nothing was written.
    TooLarge,
    /// A text field or the payload holds characters that SQS or PostgreSQL's `jsonb` would reject.
    /// Nothing was written.
    InvalidText,
    /// The event's aggregate id is empty or only whitespace. Nothing was written.
    EmptyAggregateId,
    /// The payload is nested deeper than [`MAX_JSON_DEPTH`](crate::message::MAX_JSON_DEPTH)
    /// levels (consumers' JSON parsers refuse it). Nothing was written.
    TooDeep,
    /// PostgreSQL returned an error or the connection failed.
    Database,
    /// No connection could be taken from the pool.
    Pool,
    /// The schema migrations failed.
    Migration,
    /// A setting is invalid (reported by a builder's `build()`).
    Config,
    /// The publisher failed as a whole.
    Publish,
    /// An operation did not finish within its time limit.
    Timeout,
    /// A received event's type is not one the target type decodes (see
    /// [`DecodeEvent`](crate::DecodeEvent)).
    UnknownEventType,
    /// A received event's body does not decode into the type its event type names.
    Decode,
    /// A task panicked (a bug, e.g. in a publisher). The relay records what it can, logs it and
    /// restarts the worker.
    Panic,
}

impl ErrorKind {
    /// Whether an operation that failed with this kind may succeed when tried again unchanged.
    ///
    /// This is the one place the library decides it: invalid input and invalid configuration are
    /// final; the database, the pool, the publisher and time-outs are worth another try.
    pub fn is_retryable(self) -> bool {
        match self {
            ErrorKind::Serialize
            | ErrorKind::TooLarge
            | ErrorKind::InvalidText
            | ErrorKind::EmptyAggregateId
            | ErrorKind::TooDeep
            | ErrorKind::Migration
            | ErrorKind::Config
            | ErrorKind::UnknownEventType
            | ErrorKind::Decode => false,
            ErrorKind::Database
            | ErrorKind::Pool
            | ErrorKind::Publish
            | ErrorKind::Timeout
            | ErrorKind::Panic => true,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Serialize => "payload does not serialise",
            ErrorKind::TooLarge => "message too large",
            ErrorKind::InvalidText => "invalid text",
            ErrorKind::EmptyAggregateId => "empty aggregate id",
            ErrorKind::TooDeep => "payload nested too deep",
            ErrorKind::Database => "database error",
            ErrorKind::Pool => "connection pool error",
            ErrorKind::Migration => "migration failed",
            ErrorKind::Config => "invalid configuration",
            ErrorKind::Publish => "publisher failed",
            ErrorKind::Timeout => "timed out",
            ErrorKind::UnknownEventType => "unknown event type",
            ErrorKind::Decode => "event does not decode",
            ErrorKind::Panic => "panicked",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A category of errors, as each crate of the outbox defines its own ([`ErrorKind`] here,
/// `outbox_sqs::ErrorKind` for SQS): what [`Error`] is generic over.
pub trait Kind:
    Copy + Eq + std::hash::Hash + fmt::Debug + fmt::Display + Send + Sync + 'static
{
    /// Whether an operation that failed with this kind may succeed when tried again unchanged:
    /// each crate decides it in this one place.
    fn is_retryable(self) -> bool;
}

impl Kind for ErrorKind {
    fn is_retryable(self) -> bool {
        ErrorKind::is_retryable(self)
    }
}

/// The error of every fallible operation in this crate (and, with its own kind, of
/// `outbox_sqs`): a [`kind`](Error::kind), a message, and the underlying error as
/// [`source`](StdError::source) where there is one.
///
/// `Display` prints `kind: message`, followed by `: source` unless the message already says it;
/// [`error_chain`](crate::error_chain) prints every cause.
pub struct Error<K: Kind = ErrorKind> {
    kind: K,
    message: Cow<'static, str>,
    source: Option<Box<dyn StdError + Send + Sync>>,
    /// The relay's publisher failed (or ran out of time), not the database: how the relay tells
    /// the two apart when the kind does not (a time-out).
    publisher: bool,
}

impl<K: Kind> Error<K> {
    /// An error of `kind` with a message.
    pub fn new(kind: K, message: impl Into<Cow<'static, str>>) -> Self {
        Error {
            kind,
            message: message.into(),
            source: None,
            publisher: false,
        }
    }

    /// Attaches the underlying error.
    pub fn with_source(mut self, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The same error with `context` put in front of the message.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message).into();
        self
    }

    /// The category of the error.
    pub fn kind(&self) -> K {
        self.kind
    }

    /// The message, without the kind and the source.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether trying again unchanged may succeed: the kind's answer ([`Kind::is_retryable`]),
    /// except that an error the PostgreSQL server answered with a [`sqlstate`](Self::sqlstate)
    /// of a class no retry changes is final — data exceptions (`22…`), integrity constraint
    /// violations (`23…`), syntax errors and access rule violations (`42…`: a permission
    /// refused, a table missing), features not supported (`0A…`), and the like. A deadlock
    /// (`40P01`), a serialisation failure (`40001`), a lost connection, a server shutting down
    /// and a refused login (`28…`: a password or an RDS IAM token being rotated) stay
    /// retryable. A unique key taken by a concurrent transaction (`23505`) is final here — the
    /// same insert fails again — though a transaction that checks before it inserts may pass
    /// when run again; under `SERIALIZABLE`, PostgreSQL reports such races as `40001`.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable() && !self.sqlstate().is_some_and(sqlstate_is_final)
    }

    /// The SQLSTATE the PostgreSQL server answered with, when this error is (or was caused by)
    /// the server's error: `40P01` for a deadlock, `42501` for a permission refused, …
    pub fn sqlstate(&self) -> Option<&str> {
        let mut next = self
            .source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static));
        while let Some(e) = next {
            if let Some(db) = e.downcast_ref::<tokio_postgres::error::DbError>() {
                return Some(db.code().code());
            }
            if let Some(code) = e
                .downcast_ref::<tokio_postgres::Error>()
                .and_then(tokio_postgres::Error::code)
            {
                return Some(code.code());
            }
            next = e.source();
        }
        None
    }
}

/// Whether a server error of SQLSTATE `code` comes back however often the same statement is
/// tried again: its class is about the statement, the data or the rights, not the moment.
fn sqlstate_is_final(code: &str) -> bool {
    const FINAL_CLASSES: &[&str] = &[
        "0A", // feature not supported
        "22", // data exception
        "23", // integrity constraint violation
        "2B", // dependent privilege descriptors still exist
        "3F", // invalid schema name
        "42", // syntax error or access rule violation
        "44", // WITH CHECK OPTION violation
    ];
    FINAL_CLASSES.iter().any(|class| code.starts_with(class))
}

impl Error {
    /// The same error, marked as the publisher's failure (see [`Error::is_publishers`]).
    pub(crate) fn publishers(mut self) -> Self {
        self.publisher = true;
        self
    }

    /// Whether the relay's publisher failed (or ran out of time), not the database.
    pub(crate) fn is_publishers(&self) -> bool {
        self.publisher || self.kind == ErrorKind::Publish
    }

    pub(crate) fn config(message: impl Into<Cow<'static, str>>) -> Self {
        Error::new(ErrorKind::Config, message)
    }
}

impl<K: Kind> fmt::Debug for Error<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("message", &self.message);
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl<K: Kind> fmt::Display for Error<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)?;
        if let Some(source) = &self.source {
            // tokio-postgres says "db error" for a server error whose words the message carries.
            let server_error = source
                .downcast_ref::<tokio_postgres::Error>()
                .is_some_and(|e| e.as_db_error().is_some());
            let source = source.to_string();
            if !server_error && !self.message.contains(&source) {
                write!(f, ": {source}")?;
            }
        }
        Ok(())
    }
}

impl<K: Kind> StdError for Error<K> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

/// What a tokio-postgres error says: the server's own words (its `Display` says only "db
/// error"), what a log line needs to tell "permission denied" from "out of shared memory" — not
/// their detail, which can quote a row's values.
pub(crate) fn pg_message(e: &tokio_postgres::Error) -> String {
    match (e.code(), e.as_db_error()) {
        (Some(code), Some(db)) => format!("SQLSTATE {}: {}", code.code(), db.message()),
        (Some(code), None) => format!("SQLSTATE {}", code.code()),
        (None, _) => "connection or protocol failure".to_string(),
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        Error::new(ErrorKind::Database, pg_message(&e)).with_source(e)
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        // A new connection the server refused says why ("too many connections for role"): the
        // pool's own words stopped at "db error".
        let message = match &e {
            deadpool_postgres::PoolError::Backend(pg) if pg.as_db_error().is_some() => format!(
                "could not get a connection from the pool: opening one failed: {}",
                pg_message(pg)
            ),
            _ => "could not get a connection from the pool".to_string(),
        };
        Error::new(ErrorKind::Pool, message).with_source(e)
    }
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_errors_are_final_and_infrastructure_errors_retryable() {
        assert!(!ErrorKind::TooLarge.is_retryable());
        assert!(!ErrorKind::Config.is_retryable());
        assert!(ErrorKind::Database.is_retryable());
        assert!(ErrorKind::Timeout.is_retryable());
    }

    #[test]
    fn display_includes_kind_message_and_source() {
        let io = std::io::Error::other("boom");
        let e = Error::new(ErrorKind::Publish, "batch failed").with_source(io);
        assert_eq!(e.to_string(), "publisher failed: batch failed: boom");
        assert!(e.source().is_some());
        // A message that already quotes its source does not repeat it.
        let io = std::io::Error::other("boom");
        let e = Error::new(ErrorKind::Publish, "batch failed: boom").with_source(io);
        assert_eq!(e.to_string(), "publisher failed: batch failed: boom");
        assert_eq!(e.context("relay").message(), "relay: batch failed: boom");
    }
}
