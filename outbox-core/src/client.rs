//! The database handles the library's functions run on.

mod sealed {
    /// Implemented for the handles the generated queries run on; not nameable outside the crate,
    /// so [`GenericClient`](super::GenericClient) cannot be implemented elsewhere.
    pub trait Sealed: outbox_queries::client::GenericClient {}
}

/// A PostgreSQL connection or transaction that [`emit`](crate::emit()),
/// [`process_once`](crate::process_once) and the operator functions run on:
/// a `tokio_postgres` [`Client`](tokio_postgres::Client) or
/// [`Transaction`](tokio_postgres::Transaction), or a `deadpool_postgres`
/// [`Client`](deadpool_postgres::Client) or [`Transaction`](deadpool_postgres::Transaction).
///
/// The trait is sealed, as `tokio_postgres::GenericClient` is: it cannot be implemented outside
/// this crate, so its internals can change without breaking callers.
pub trait GenericClient: sealed::Sealed {}

impl sealed::Sealed for tokio_postgres::Client {}
impl GenericClient for tokio_postgres::Client {}
impl sealed::Sealed for tokio_postgres::Transaction<'_> {}
impl GenericClient for tokio_postgres::Transaction<'_> {}
impl sealed::Sealed for deadpool_postgres::Client {}
impl GenericClient for deadpool_postgres::Client {}
impl sealed::Sealed for deadpool_postgres::Transaction<'_> {}
impl GenericClient for deadpool_postgres::Transaction<'_> {}
