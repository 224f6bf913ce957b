// This file was generated with `cornucopia`. Do not modify.

#[derive(Debug)]
pub struct RecordProcessedEventParams<T1: crate::StringSql> {
    pub consumer: T1,
    pub event_id: uuid::Uuid,
}
#[derive(Debug)]
pub struct ProcessedEventExistsParams<T1: crate::StringSql> {
    pub consumer: T1,
    pub event_id: uuid::Uuid,
}
#[derive(Debug)]
pub struct RecordIsThisTransactionsParams<T1: crate::StringSql> {
    pub consumer: T1,
    pub event_id: uuid::Uuid,
}
#[derive(Clone, Copy, Debug)]
pub struct DeleteProcessedEventsBeforeParams {
    pub older_than_secs: f64,
    pub batch_size: i64,
}
use crate::client::async_::GenericClient;
use futures::{self, StreamExt, TryStreamExt};
pub struct UuidUuidQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<uuid::Uuid, tokio_postgres::Error>,
    mapper: fn(uuid::Uuid) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> UuidUuidQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(uuid::Uuid) -> R) -> UuidUuidQuery<'c, 'a, 's, C, R, N> {
        UuidUuidQuery {
            client: self.client,
            params: self.params,
            query: self.query,
            cached: self.cached,
            extractor: self.extractor,
            mapper,
        }
    }
    pub async fn one(self) -> Result<T, tokio_postgres::Error> {
        let row =
            crate::client::async_::one(self.client, self.query, &self.params, self.cached).await?;
        Ok((self.mapper)((self.extractor)(&row)?))
    }
    pub async fn all(self) -> Result<Vec<T>, tokio_postgres::Error> {
        self.iter().await?.try_collect().await
    }
    pub async fn opt(self) -> Result<Option<T>, tokio_postgres::Error> {
        let opt_row =
            crate::client::async_::opt(self.client, self.query, &self.params, self.cached).await?;
        Ok(opt_row
            .map(|row| {
                let extracted = (self.extractor)(&row)?;
                Ok((self.mapper)(extracted))
            })
            .transpose()?)
    }
    pub async fn iter(
        self,
    ) -> Result<
        impl futures::Stream<Item = Result<T, tokio_postgres::Error>> + 'c,
        tokio_postgres::Error,
    > {
        let stream = crate::client::async_::raw(
            self.client,
            self.query,
            crate::slice_iter(&self.params),
            self.cached,
        )
        .await?;
        let mapped = stream
            .map(move |res| {
                res.and_then(|row| {
                    let extracted = (self.extractor)(&row)?;
                    Ok((self.mapper)(extracted))
                })
            })
            .into_stream();
        Ok(mapped)
    }
}
pub struct BoolQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<bool, tokio_postgres::Error>,
    mapper: fn(bool) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> BoolQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(bool) -> R) -> BoolQuery<'c, 'a, 's, C, R, N> {
        BoolQuery {
            client: self.client,
            params: self.params,
            query: self.query,
            cached: self.cached,
            extractor: self.extractor,
            mapper,
        }
    }
    pub async fn one(self) -> Result<T, tokio_postgres::Error> {
        let row =
            crate::client::async_::one(self.client, self.query, &self.params, self.cached).await?;
        Ok((self.mapper)((self.extractor)(&row)?))
    }
    pub async fn all(self) -> Result<Vec<T>, tokio_postgres::Error> {
        self.iter().await?.try_collect().await
    }
    pub async fn opt(self) -> Result<Option<T>, tokio_postgres::Error> {
        let opt_row =
            crate::client::async_::opt(self.client, self.query, &self.params, self.cached).await?;
        Ok(opt_row
            .map(|row| {
                let extracted = (self.extractor)(&row)?;
                Ok((self.mapper)(extracted))
            })
            .transpose()?)
    }
    pub async fn iter(
        self,
    ) -> Result<
        impl futures::Stream<Item = Result<T, tokio_postgres::Error>> + 'c,
        tokio_postgres::Error,
    > {
        let stream = crate::client::async_::raw(
            self.client,
            self.query,
            crate::slice_iter(&self.params),
            self.cached,
        )
        .await?;
        let mapped = stream
            .map(move |res| {
                res.and_then(|row| {
                    let extracted = (self.extractor)(&row)?;
                    Ok((self.mapper)(extracted))
                })
            })
            .into_stream();
        Ok(mapped)
    }
}
pub struct RecordProcessedEventStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn record_processed_event() -> RecordProcessedEventStmt {
    RecordProcessedEventStmt(
        "INSERT INTO processed_events (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING event_id",
        None,
    )
}
impl RecordProcessedEventStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<'c, 'a, 's, C: GenericClient, T1: crate::StringSql>(
        &'s self,
        client: &'c C,
        consumer: &'a T1,
        event_id: &'a uuid::Uuid,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2> {
        UuidUuidQuery {
            client,
            params: [consumer, event_id],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
impl<'c, 'a, 's, C: GenericClient, T1: crate::StringSql>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        RecordProcessedEventParams<T1>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2>,
        C,
    > for RecordProcessedEventStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a RecordProcessedEventParams<T1>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2> {
        self.bind(client, &params.consumer, &params.event_id)
    }
}
pub struct ProcessedEventExistsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn processed_event_exists() -> ProcessedEventExistsStmt {
    ProcessedEventExistsStmt(
        "SELECT EXISTS (SELECT 1 FROM processed_events WHERE consumer = $1 AND event_id = $2) AS found",
        None,
    )
}
impl ProcessedEventExistsStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<'c, 'a, 's, C: GenericClient, T1: crate::StringSql>(
        &'s self,
        client: &'c C,
        consumer: &'a T1,
        event_id: &'a uuid::Uuid,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 2> {
        BoolQuery {
            client,
            params: [consumer, event_id],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
impl<'c, 'a, 's, C: GenericClient, T1: crate::StringSql>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        ProcessedEventExistsParams<T1>,
        BoolQuery<'c, 'a, 's, C, bool, 2>,
        C,
    > for ProcessedEventExistsStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a ProcessedEventExistsParams<T1>,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 2> {
        self.bind(client, &params.consumer, &params.event_id)
    }
}
pub struct TransactionIsUsableStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn transaction_is_usable() -> TransactionIsUsableStmt {
    TransactionIsUsableStmt("SELECT true AS usable", None)
}
impl TransactionIsUsableStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<'c, 'a, 's, C: GenericClient>(
        &'s self,
        client: &'c C,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 0> {
        BoolQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct RecordIsThisTransactionsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn record_is_this_transactions() -> RecordIsThisTransactionsStmt {
    RecordIsThisTransactionsStmt(
        "SELECT EXISTS (SELECT 1 FROM processed_events WHERE consumer = $1 AND event_id = $2 AND txid_status(((txid_current_if_assigned() >> 32) << 32) + xmin::text::bigint) = 'in progress') AS ours",
        None,
    )
}
impl RecordIsThisTransactionsStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<'c, 'a, 's, C: GenericClient, T1: crate::StringSql>(
        &'s self,
        client: &'c C,
        consumer: &'a T1,
        event_id: &'a uuid::Uuid,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 2> {
        BoolQuery {
            client,
            params: [consumer, event_id],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
impl<'c, 'a, 's, C: GenericClient, T1: crate::StringSql>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        RecordIsThisTransactionsParams<T1>,
        BoolQuery<'c, 'a, 's, C, bool, 2>,
        C,
    > for RecordIsThisTransactionsStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a RecordIsThisTransactionsParams<T1>,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 2> {
        self.bind(client, &params.consumer, &params.event_id)
    }
}
pub struct DeleteProcessedEventsBeforeStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn delete_processed_events_before() -> DeleteProcessedEventsBeforeStmt {
    DeleteProcessedEventsBeforeStmt(
        "DELETE FROM processed_events WHERE (consumer, event_id) IN (SELECT consumer, event_id FROM processed_events WHERE processed_at < now() - make_interval(secs => $1) ORDER BY processed_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING event_id",
        None,
    )
}
impl DeleteProcessedEventsBeforeStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<'c, 'a, 's, C: GenericClient>(
        &'s self,
        client: &'c C,
        older_than_secs: &'a f64,
        batch_size: &'a i64,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2> {
        UuidUuidQuery {
            client,
            params: [older_than_secs, batch_size],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
impl<'c, 'a, 's, C: GenericClient>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        DeleteProcessedEventsBeforeParams,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2>,
        C,
    > for DeleteProcessedEventsBeforeStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a DeleteProcessedEventsBeforeParams,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2> {
        self.bind(client, &params.older_than_secs, &params.batch_size)
    }
}
