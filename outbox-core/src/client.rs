//! The database handles the library's functions run on.

mod sealed {
    use std::future::Future;

    use tokio_postgres::types::{ToSql, Type};
    use tokio_postgres::{Error, Row};

    /// Implemented for the handles the generated queries run on; not nameable outside the crate,
    /// so [`GenericClient`](super::GenericClient) cannot be implemented elsewhere.
    pub trait Sealed: outbox_queries::client::GenericClient {
        /// Whether the handle prepares through a per-connection statement cache (deadpool's), so
        /// that a warm connection runs a statement without a prepare round trip.
        const CACHES_STATEMENTS: bool;

        /// Runs `query` as an unnamed statement with parameters of the given types: parse, bind
        /// and execute in one round trip, sent when the future is first polled.
        fn query_typed(
            &self,
            query: &str,
            params: &[(&(dyn ToSql + Sync), Type)],
        ) -> impl Future<Output = Result<Vec<Row>, Error>> + Send;
    }
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

/// Implements the sealed trait for a handle whose `query_typed` is reached through `Deref`.
macro_rules! handle {
    ($ty:ty, caches: $caches:literal) => {
        impl sealed::Sealed for $ty {
            const CACHES_STATEMENTS: bool = $caches;

            fn query_typed(
                &self,
                query: &str,
                params: &[(
                    &(dyn tokio_postgres::types::ToSql + Sync),
                    tokio_postgres::types::Type,
                )],
            ) -> impl std::future::Future<
                Output = Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>,
            > + Send {
                (**self).query_typed(query, params)
            }
        }
        impl GenericClient for $ty {}
    };
}

handle!(deadpool_postgres::Client, caches: true);
handle!(deadpool_postgres::Transaction<'_>, caches: true);

impl sealed::Sealed for tokio_postgres::Client {
    const CACHES_STATEMENTS: bool = false;

    fn query_typed(
        &self,
        query: &str,
        params: &[(
            &(dyn tokio_postgres::types::ToSql + Sync),
            tokio_postgres::types::Type,
        )],
    ) -> impl std::future::Future<Output = Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>> + Send
    {
        tokio_postgres::Client::query_typed(self, query, params)
    }
}
impl GenericClient for tokio_postgres::Client {}

impl sealed::Sealed for tokio_postgres::Transaction<'_> {
    const CACHES_STATEMENTS: bool = false;

    fn query_typed(
        &self,
        query: &str,
        params: &[(
            &(dyn tokio_postgres::types::ToSql + Sync),
            tokio_postgres::types::Type,
        )],
    ) -> impl std::future::Future<Output = Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>> + Send
    {
        tokio_postgres::Transaction::query_typed(self, query, params)
    }
}
impl GenericClient for tokio_postgres::Transaction<'_> {}
