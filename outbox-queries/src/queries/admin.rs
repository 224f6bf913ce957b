// This file was generated with `cornucopia`. Do not modify.

#[derive(Debug)]
pub struct ListDeadLettersParams<
    T1: crate::ArraySql<Item = uuid::Uuid>,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::StringSql,
> {
    pub ids: Option<T1>,
    pub event_type: Option<T2>,
    pub aggregate_type: Option<T3>,
    pub aggregate_id: Option<T4>,
    pub limit: i64,
}
#[derive(Debug)]
pub struct RetryDeadLettersParams<
    T1: crate::ArraySql<Item = uuid::Uuid>,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::StringSql,
> {
    pub ids: Option<T1>,
    pub event_type: Option<T2>,
    pub aggregate_type: Option<T3>,
    pub aggregate_id: Option<T4>,
}
#[derive(Debug)]
pub struct PurgeDeadLettersParams<
    T1: crate::ArraySql<Item = uuid::Uuid>,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::StringSql,
> {
    pub ids: Option<T1>,
    pub event_type: Option<T2>,
    pub aggregate_type: Option<T3>,
    pub aggregate_id: Option<T4>,
}
#[derive(Debug)]
pub struct DeadLetterIdsParams<
    T1: crate::ArraySql<Item = uuid::Uuid>,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::StringSql,
> {
    pub ids: Option<T1>,
    pub event_type: Option<T2>,
    pub aggregate_type: Option<T3>,
    pub aggregate_id: Option<T4>,
}
#[derive(Clone, Copy, Debug)]
pub struct DeleteProcessedBeforeParams {
    pub older_than_secs: f64,
    pub batch_size: i64,
}
#[derive(Debug)]
pub struct LimitIdleSessionParams<T1: crate::StringSql> {
    pub millis: T1,
    pub pid: i32,
}
#[derive(Debug, Clone, PartialEq, Copy, serde::Serialize)]
pub struct OutboxStats {
    pub pending: i64,
    pub due_now: i64,
    pub held_back: i64,
    pub waiting_retry: i64,
    pub dead_letters: i64,
    pub oldest_pending_age_secs: Option<f64>,
    pub blocked_aggregates: i64,
    pub published_last_hour: i64,
}
#[derive(Debug, Clone, PartialEq, Copy, serde::Serialize)]
pub struct OutboxGauges {
    pub pending: i64,
    pub dead_letters: i64,
    pub oldest_pending_age_secs: Option<f64>,
    pub blocked_aggregates: i64,
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListDeadLetters {
    pub id: uuid::Uuid,
    pub seq: i64,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub event_type: String,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub dead_lettered_at: chrono::DateTime<chrono::Utc>,
}
pub struct ListDeadLettersBorrowed<'a> {
    pub id: uuid::Uuid,
    pub seq: i64,
    pub aggregate_type: &'a str,
    pub aggregate_id: &'a str,
    pub event_type: &'a str,
    pub attempts: i32,
    pub last_error: Option<&'a str>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub dead_lettered_at: chrono::DateTime<chrono::Utc>,
}
impl<'a> From<ListDeadLettersBorrowed<'a>> for ListDeadLetters {
    fn from(
        ListDeadLettersBorrowed {
            id,
            seq,
            aggregate_type,
            aggregate_id,
            event_type,
            attempts,
            last_error,
            created_at,
            dead_lettered_at,
        }: ListDeadLettersBorrowed<'a>,
    ) -> Self {
        Self {
            id,
            seq,
            aggregate_type: aggregate_type.into(),
            aggregate_id: aggregate_id.into(),
            event_type: event_type.into(),
            attempts,
            last_error: last_error.map(|v| v.into()),
            created_at,
            dead_lettered_at,
        }
    }
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GetOutboxEvent {
    pub id: uuid::Uuid,
    pub seq: i64,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub event_type: String,
    pub payload: serde_json::Value,
    pub metadata: serde_json::Value,
    pub attempts: i32,
    pub retry_after: Option<chrono::DateTime<chrono::Utc>>,
    pub last_error: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub processed_at: Option<chrono::DateTime<chrono::Utc>>,
    pub dead_lettered_at: Option<chrono::DateTime<chrono::Utc>>,
    pub waiting_for_retry: bool,
}
pub struct GetOutboxEventBorrowed<'a> {
    pub id: uuid::Uuid,
    pub seq: i64,
    pub aggregate_type: &'a str,
    pub aggregate_id: &'a str,
    pub event_type: &'a str,
    pub payload: postgres_types::Json<&'a serde_json::value::RawValue>,
    pub metadata: postgres_types::Json<&'a serde_json::value::RawValue>,
    pub attempts: i32,
    pub retry_after: Option<chrono::DateTime<chrono::Utc>>,
    pub last_error: Option<&'a str>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub processed_at: Option<chrono::DateTime<chrono::Utc>>,
    pub dead_lettered_at: Option<chrono::DateTime<chrono::Utc>>,
    pub waiting_for_retry: bool,
}
impl<'a> From<GetOutboxEventBorrowed<'a>> for GetOutboxEvent {
    fn from(
        GetOutboxEventBorrowed {
            id,
            seq,
            aggregate_type,
            aggregate_id,
            event_type,
            payload,
            metadata,
            attempts,
            retry_after,
            last_error,
            created_at,
            processed_at,
            dead_lettered_at,
            waiting_for_retry,
        }: GetOutboxEventBorrowed<'a>,
    ) -> Self {
        Self {
            id,
            seq,
            aggregate_type: aggregate_type.into(),
            aggregate_id: aggregate_id.into(),
            event_type: event_type.into(),
            payload: serde_json::from_str(payload.0.get()).unwrap(),
            metadata: serde_json::from_str(metadata.0.get()).unwrap(),
            attempts,
            retry_after,
            last_error: last_error.map(|v| v.into()),
            created_at,
            processed_at,
            dead_lettered_at,
            waiting_for_retry,
        }
    }
}
use crate::client::async_::GenericClient;
use futures::{self, StreamExt, TryStreamExt};
pub struct I64Query<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<i64, tokio_postgres::Error>,
    mapper: fn(i64) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> I64Query<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(i64) -> R) -> I64Query<'c, 'a, 's, C, R, N> {
        I64Query {
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
pub struct OutboxStatsQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<OutboxStats, tokio_postgres::Error>,
    mapper: fn(OutboxStats) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> OutboxStatsQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(OutboxStats) -> R) -> OutboxStatsQuery<'c, 'a, 's, C, R, N> {
        OutboxStatsQuery {
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
pub struct OutboxGaugesQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<OutboxGauges, tokio_postgres::Error>,
    mapper: fn(OutboxGauges) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> OutboxGaugesQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(OutboxGauges) -> R) -> OutboxGaugesQuery<'c, 'a, 's, C, R, N> {
        OutboxGaugesQuery {
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
pub struct ListDeadLettersQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<ListDeadLettersBorrowed, tokio_postgres::Error>,
    mapper: fn(ListDeadLettersBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> ListDeadLettersQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(ListDeadLettersBorrowed) -> R,
    ) -> ListDeadLettersQuery<'c, 'a, 's, C, R, N> {
        ListDeadLettersQuery {
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
pub struct GetOutboxEventQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<GetOutboxEventBorrowed, tokio_postgres::Error>,
    mapper: fn(GetOutboxEventBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> GetOutboxEventQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(GetOutboxEventBorrowed) -> R,
    ) -> GetOutboxEventQuery<'c, 'a, 's, C, R, N> {
        GetOutboxEventQuery {
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
pub struct StringQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<&str, tokio_postgres::Error>,
    mapper: fn(&str) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> StringQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(&str) -> R) -> StringQuery<'c, 'a, 's, C, R, N> {
        StringQuery {
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
pub struct ChronoDateTimechronoUtcQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor:
        fn(&tokio_postgres::Row) -> Result<chrono::DateTime<chrono::Utc>, tokio_postgres::Error>,
    mapper: fn(chrono::DateTime<chrono::Utc>) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> ChronoDateTimechronoUtcQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(chrono::DateTime<chrono::Utc>) -> R,
    ) -> ChronoDateTimechronoUtcQuery<'c, 'a, 's, C, R, N> {
        ChronoDateTimechronoUtcQuery {
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
pub struct OutboxPendingCountStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn outbox_pending_count() -> OutboxPendingCountStmt {
    OutboxPendingCountStmt(
        "SELECT count(*) AS pending FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NULL",
        None,
    )
}
impl OutboxPendingCountStmt {
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
    ) -> I64Query<'c, 'a, 's, C, i64, 0> {
        I64Query {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct OutboxStatsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn outbox_stats() -> OutboxStatsStmt {
    OutboxStatsStmt(
        "SELECT (SELECT count(*) FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NULL) AS pending, (SELECT count(*) FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NULL AND (retry_after IS NULL OR retry_after <= now())) - held.n AS due_now, held.n AS held_back, (SELECT count(*) FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NULL AND retry_after > now()) AS waiting_retry, (SELECT count(*) FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NOT NULL) AS dead_letters, (SELECT greatest(extract(epoch FROM now() - created_at), 0)::float8 FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NULL ORDER BY seq LIMIT 1) AS oldest_pending_age_secs, (SELECT count(*) FROM (SELECT DISTINCT aggregate_type, aggregate_id FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NOT NULL) d) AS blocked_aggregates, outbox_published_since(now() - interval '1 hour') AS published_last_hour FROM (SELECT count(*) AS n FROM (SELECT aggregate_type, aggregate_id, min(seq) AS seq FROM outbox_events WHERE processed_at IS NULL AND (dead_lettered_at IS NOT NULL OR retry_after IS NOT NULL) AND (dead_lettered_at IS NOT NULL OR retry_after > now()) GROUP BY aggregate_type, aggregate_id) d JOIN outbox_events e ON e.aggregate_type = d.aggregate_type AND e.aggregate_id = d.aggregate_id AND e.seq > d.seq WHERE e.processed_at IS NULL AND e.dead_lettered_at IS NULL AND (e.retry_after IS NULL OR e.retry_after <= now())) held",
        None,
    )
}
impl OutboxStatsStmt {
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
    ) -> OutboxStatsQuery<'c, 'a, 's, C, OutboxStats, 0> {
        OutboxStatsQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row: &tokio_postgres::Row| -> Result<OutboxStats, tokio_postgres::Error> {
                Ok(OutboxStats {
                    pending: row.try_get(0)?,
                    due_now: row.try_get(1)?,
                    held_back: row.try_get(2)?,
                    waiting_retry: row.try_get(3)?,
                    dead_letters: row.try_get(4)?,
                    oldest_pending_age_secs: row.try_get(5)?,
                    blocked_aggregates: row.try_get(6)?,
                    published_last_hour: row.try_get(7)?,
                })
            },
            mapper: |it| OutboxStats::from(it),
        }
    }
}
pub struct OutboxGaugesStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn outbox_gauges() -> OutboxGaugesStmt {
    OutboxGaugesStmt(
        "SELECT (SELECT count(*) FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NULL) AS pending, (SELECT count(*) FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NOT NULL) AS dead_letters, (SELECT greatest(extract(epoch FROM now() - created_at), 0)::float8 FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NULL ORDER BY seq LIMIT 1) AS oldest_pending_age_secs, (SELECT count(*) FROM (SELECT DISTINCT aggregate_type, aggregate_id FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NOT NULL) d) AS blocked_aggregates",
        None,
    )
}
impl OutboxGaugesStmt {
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
    ) -> OutboxGaugesQuery<'c, 'a, 's, C, OutboxGauges, 0> {
        OutboxGaugesQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row: &tokio_postgres::Row| -> Result<OutboxGauges, tokio_postgres::Error> {
                Ok(OutboxGauges {
                    pending: row.try_get(0)?,
                    dead_letters: row.try_get(1)?,
                    oldest_pending_age_secs: row.try_get(2)?,
                    blocked_aggregates: row.try_get(3)?,
                })
            },
            mapper: |it| OutboxGauges::from(it),
        }
    }
}
pub struct ListDeadLettersStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn list_dead_letters() -> ListDeadLettersStmt {
    ListDeadLettersStmt(
        "SELECT id, seq, aggregate_type, aggregate_id, event_type, attempts, last_error, created_at, dead_lettered_at FROM outbox_dead_letters WHERE ($1::uuid[] IS NULL OR id = ANY($1)) AND ($2::text IS NULL OR event_type = $2) AND ($3::text IS NULL OR aggregate_type = $3) AND ($4::text IS NULL OR aggregate_id = $4) ORDER BY seq LIMIT $5",
        None,
    )
}
impl ListDeadLettersStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<
        'c,
        'a,
        's,
        C: GenericClient,
        T1: crate::ArraySql<Item = uuid::Uuid>,
        T2: crate::StringSql,
        T3: crate::StringSql,
        T4: crate::StringSql,
    >(
        &'s self,
        client: &'c C,
        ids: &'a Option<T1>,
        event_type: &'a Option<T2>,
        aggregate_type: &'a Option<T3>,
        aggregate_id: &'a Option<T4>,
        limit: &'a i64,
    ) -> ListDeadLettersQuery<'c, 'a, 's, C, ListDeadLetters, 5> {
        ListDeadLettersQuery {
            client,
            params: [ids, event_type, aggregate_type, aggregate_id, limit],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |
                row: &tokio_postgres::Row,
            | -> Result<ListDeadLettersBorrowed, tokio_postgres::Error> {
                Ok(ListDeadLettersBorrowed {
                    id: row.try_get(0)?,
                    seq: row.try_get(1)?,
                    aggregate_type: row.try_get(2)?,
                    aggregate_id: row.try_get(3)?,
                    event_type: row.try_get(4)?,
                    attempts: row.try_get(5)?,
                    last_error: row.try_get(6)?,
                    created_at: row.try_get(7)?,
                    dead_lettered_at: row.try_get(8)?,
                })
            },
            mapper: |it| ListDeadLetters::from(it),
        }
    }
}
impl<
    'c,
    'a,
    's,
    C: GenericClient,
    T1: crate::ArraySql<Item = uuid::Uuid>,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::StringSql,
>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        ListDeadLettersParams<T1, T2, T3, T4>,
        ListDeadLettersQuery<'c, 'a, 's, C, ListDeadLetters, 5>,
        C,
    > for ListDeadLettersStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a ListDeadLettersParams<T1, T2, T3, T4>,
    ) -> ListDeadLettersQuery<'c, 'a, 's, C, ListDeadLetters, 5> {
        self.bind(
            client,
            &params.ids,
            &params.event_type,
            &params.aggregate_type,
            &params.aggregate_id,
            &params.limit,
        )
    }
}
pub struct RetryDeadLettersStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn retry_dead_letters() -> RetryDeadLettersStmt {
    RetryDeadLettersStmt(
        "WITH retried AS ( UPDATE outbox_events SET dead_lettered_at = NULL, attempts = 0, retry_after = NULL WHERE dead_lettered_at IS NOT NULL AND processed_at IS NULL AND ($1::uuid[] IS NULL OR id = ANY($1)) AND ($2::text IS NULL OR event_type = $2) AND ($3::text IS NULL OR aggregate_type = $3) AND ($4::text IS NULL OR aggregate_id = $4) RETURNING id ), woken AS ( SELECT count(pg_notify('outbox_events', '')) AS n FROM (SELECT 1 FROM retried LIMIT 1) any_retried ) SELECT id FROM retried, woken",
        None,
    )
}
impl RetryDeadLettersStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<
        'c,
        'a,
        's,
        C: GenericClient,
        T1: crate::ArraySql<Item = uuid::Uuid>,
        T2: crate::StringSql,
        T3: crate::StringSql,
        T4: crate::StringSql,
    >(
        &'s self,
        client: &'c C,
        ids: &'a Option<T1>,
        event_type: &'a Option<T2>,
        aggregate_type: &'a Option<T3>,
        aggregate_id: &'a Option<T4>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4> {
        UuidUuidQuery {
            client,
            params: [ids, event_type, aggregate_type, aggregate_id],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
impl<
    'c,
    'a,
    's,
    C: GenericClient,
    T1: crate::ArraySql<Item = uuid::Uuid>,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::StringSql,
>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        RetryDeadLettersParams<T1, T2, T3, T4>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4>,
        C,
    > for RetryDeadLettersStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a RetryDeadLettersParams<T1, T2, T3, T4>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4> {
        self.bind(
            client,
            &params.ids,
            &params.event_type,
            &params.aggregate_type,
            &params.aggregate_id,
        )
    }
}
pub struct PurgeDeadLettersStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn purge_dead_letters() -> PurgeDeadLettersStmt {
    PurgeDeadLettersStmt(
        "WITH purged AS ( DELETE FROM outbox_events WHERE dead_lettered_at IS NOT NULL AND processed_at IS NULL AND ($1::uuid[] IS NULL OR id = ANY($1)) AND ($2::text IS NULL OR event_type = $2) AND ($3::text IS NULL OR aggregate_type = $3) AND ($4::text IS NULL OR aggregate_id = $4) RETURNING id ), woken AS ( SELECT count(pg_notify('outbox_events', '')) AS n FROM (SELECT 1 FROM purged LIMIT 1) any_purged ) SELECT id FROM purged, woken",
        None,
    )
}
impl PurgeDeadLettersStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<
        'c,
        'a,
        's,
        C: GenericClient,
        T1: crate::ArraySql<Item = uuid::Uuid>,
        T2: crate::StringSql,
        T3: crate::StringSql,
        T4: crate::StringSql,
    >(
        &'s self,
        client: &'c C,
        ids: &'a Option<T1>,
        event_type: &'a Option<T2>,
        aggregate_type: &'a Option<T3>,
        aggregate_id: &'a Option<T4>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4> {
        UuidUuidQuery {
            client,
            params: [ids, event_type, aggregate_type, aggregate_id],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
impl<
    'c,
    'a,
    's,
    C: GenericClient,
    T1: crate::ArraySql<Item = uuid::Uuid>,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::StringSql,
>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        PurgeDeadLettersParams<T1, T2, T3, T4>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4>,
        C,
    > for PurgeDeadLettersStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a PurgeDeadLettersParams<T1, T2, T3, T4>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4> {
        self.bind(
            client,
            &params.ids,
            &params.event_type,
            &params.aggregate_type,
            &params.aggregate_id,
        )
    }
}
pub struct DeadLetterIdsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn dead_letter_ids() -> DeadLetterIdsStmt {
    DeadLetterIdsStmt(
        "SELECT id FROM outbox_dead_letters WHERE ($1::uuid[] IS NULL OR id = ANY($1)) AND ($2::text IS NULL OR event_type = $2) AND ($3::text IS NULL OR aggregate_type = $3) AND ($4::text IS NULL OR aggregate_id = $4) ORDER BY seq",
        None,
    )
}
impl DeadLetterIdsStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<
        'c,
        'a,
        's,
        C: GenericClient,
        T1: crate::ArraySql<Item = uuid::Uuid>,
        T2: crate::StringSql,
        T3: crate::StringSql,
        T4: crate::StringSql,
    >(
        &'s self,
        client: &'c C,
        ids: &'a Option<T1>,
        event_type: &'a Option<T2>,
        aggregate_type: &'a Option<T3>,
        aggregate_id: &'a Option<T4>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4> {
        UuidUuidQuery {
            client,
            params: [ids, event_type, aggregate_type, aggregate_id],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
impl<
    'c,
    'a,
    's,
    C: GenericClient,
    T1: crate::ArraySql<Item = uuid::Uuid>,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::StringSql,
>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        DeadLetterIdsParams<T1, T2, T3, T4>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4>,
        C,
    > for DeadLetterIdsStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a DeadLetterIdsParams<T1, T2, T3, T4>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4> {
        self.bind(
            client,
            &params.ids,
            &params.event_type,
            &params.aggregate_type,
            &params.aggregate_id,
        )
    }
}
pub struct PurgeDeadLettersByIdStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn purge_dead_letters_by_id() -> PurgeDeadLettersByIdStmt {
    PurgeDeadLettersByIdStmt(
        "DELETE FROM outbox_events WHERE id = ANY($1) AND dead_lettered_at IS NOT NULL AND processed_at IS NULL RETURNING id",
        None,
    )
}
impl PurgeDeadLettersByIdStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<'c, 'a, 's, C: GenericClient, T1: crate::ArraySql<Item = uuid::Uuid>>(
        &'s self,
        client: &'c C,
        ids: &'a T1,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 1> {
        UuidUuidQuery {
            client,
            params: [ids],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct DeleteProcessedBeforeStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn delete_processed_before() -> DeleteProcessedBeforeStmt {
    DeleteProcessedBeforeStmt(
        "DELETE FROM outbox_events WHERE (id, created_at) IN (SELECT id, created_at FROM outbox_events WHERE processed_at < now() - make_interval(secs => $1) ORDER BY processed_at LIMIT $2 FOR UPDATE SKIP LOCKED) AND processed_at < now() - make_interval(secs => $1) RETURNING id",
        None,
    )
}
impl DeleteProcessedBeforeStmt {
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
        DeleteProcessedBeforeParams,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2>,
        C,
    > for DeleteProcessedBeforeStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a DeleteProcessedBeforeParams,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2> {
        self.bind(client, &params.older_than_secs, &params.batch_size)
    }
}
pub struct GetOutboxEventStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn get_outbox_event() -> GetOutboxEventStmt {
    GetOutboxEventStmt(
        "SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, retry_after, last_error, created_at, processed_at, dead_lettered_at, retry_after IS NOT NULL AND retry_after > now() AS waiting_for_retry FROM outbox_events WHERE id = $1",
        None,
    )
}
impl GetOutboxEventStmt {
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
        id: &'a uuid::Uuid,
    ) -> GetOutboxEventQuery<'c, 'a, 's, C, GetOutboxEvent, 1> {
        GetOutboxEventQuery {
            client,
            params: [id],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |
                row: &tokio_postgres::Row,
            | -> Result<GetOutboxEventBorrowed, tokio_postgres::Error> {
                Ok(GetOutboxEventBorrowed {
                    id: row.try_get(0)?,
                    seq: row.try_get(1)?,
                    aggregate_type: row.try_get(2)?,
                    aggregate_id: row.try_get(3)?,
                    event_type: row.try_get(4)?,
                    payload: row.try_get(5)?,
                    metadata: row.try_get(6)?,
                    attempts: row.try_get(7)?,
                    retry_after: row.try_get(8)?,
                    last_error: row.try_get(9)?,
                    created_at: row.try_get(10)?,
                    processed_at: row.try_get(11)?,
                    dead_lettered_at: row.try_get(12)?,
                    waiting_for_retry: row.try_get(13)?,
                })
            },
            mapper: |it| GetOutboxEvent::from(it),
        }
    }
}
pub struct LimitTransactionStatementsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn limit_transaction_statements() -> LimitTransactionStatementsStmt {
    LimitTransactionStatementsStmt(
        "SELECT set_config('statement_timeout', $1::text, true) AS applied",
        None,
    )
}
impl LimitTransactionStatementsStmt {
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
        millis: &'a T1,
    ) -> StringQuery<'c, 'a, 's, C, String, 1> {
        StringQuery {
            client,
            params: [millis],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it.into(),
        }
    }
}
pub struct DatabaseClockStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn database_clock() -> DatabaseClockStmt {
    DatabaseClockStmt("SELECT clock_timestamp() AS now", None)
}
impl DatabaseClockStmt {
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
    ) -> ChronoDateTimechronoUtcQuery<'c, 'a, 's, C, chrono::DateTime<chrono::Utc>, 0> {
        ChronoDateTimechronoUtcQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct LimitIdleSessionStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn limit_idle_session() -> LimitIdleSessionStmt {
    LimitIdleSessionStmt(
        "SELECT set_config('idle_session_timeout', $1::text, false) AS applied WHERE current_setting('server_version_num')::int >= 140000 AND pg_backend_pid() = $2",
        None,
    )
}
impl LimitIdleSessionStmt {
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
        millis: &'a T1,
        pid: &'a i32,
    ) -> StringQuery<'c, 'a, 's, C, String, 2> {
        StringQuery {
            client,
            params: [millis, pid],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it.into(),
        }
    }
}
impl<'c, 'a, 's, C: GenericClient, T1: crate::StringSql>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        LimitIdleSessionParams<T1>,
        StringQuery<'c, 'a, 's, C, String, 2>,
        C,
    > for LimitIdleSessionStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a LimitIdleSessionParams<T1>,
    ) -> StringQuery<'c, 'a, 's, C, String, 2> {
        self.bind(client, &params.millis, &params.pid)
    }
}
