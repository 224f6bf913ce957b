// This file was generated with `cornucopia`. Do not modify.

#[derive(Clone, Copy, Debug)]
pub struct FetchOutboxBatchParams {
    pub batch_size: i64,
    pub max_bytes: i64,
}
#[derive(Debug)]
pub struct FetchOutboxHeadsParams<T1: crate::ArraySql<Item = i64>> {
    pub window: i64,
    pub held: T1,
    pub batch_size: i64,
    pub workers: i64,
    pub slot: i64,
    pub max_bytes: i64,
}
#[derive(Debug)]
pub struct FetchOutboxHeadsByAggregateParams<T1: crate::ArraySql<Item = uuid::Uuid>> {
    pub after: i64,
    pub exclude: T1,
    pub batch_size: i64,
    pub max_bytes: i64,
}
#[derive(Debug)]
pub struct FetchOutboxFollowersParams<
    T1: crate::StringSql,
    T2: crate::ArraySql<Item = T1>,
    T3: crate::StringSql,
    T4: crate::ArraySql<Item = T3>,
    T5: crate::ArraySql<Item = i64>,
> {
    pub aggregate_types: T2,
    pub aggregate_ids: T4,
    pub head_seqs: T5,
    pub limit: i64,
    pub max_bytes: i64,
}
#[derive(Debug)]
pub struct MarkOutboxProcessedParams<T1: crate::ArraySql<Item = uuid::Uuid>> {
    pub ids: T1,
    pub oldest: chrono::DateTime<chrono::Utc>,
    pub newest: chrono::DateTime<chrono::Utc>,
}
#[derive(Debug)]
pub struct RecordOutboxFailuresParams<
    T1: crate::ArraySql<Item = uuid::Uuid>,
    T2: crate::ArraySql<Item = chrono::DateTime<chrono::Utc>>,
    T3: crate::StringSql,
    T4: crate::ArraySql<Item = T3>,
    T5: crate::ArraySql<Item = f64>,
    T6: crate::ArraySql<Item = bool>,
    T7: crate::ArraySql<Item = bool>,
> {
    pub ids: T1,
    pub created_ats: T2,
    pub errors: T4,
    pub delay_secs: T5,
    pub dead: T6,
    pub counted: T7,
    pub oldest: chrono::DateTime<chrono::Utc>,
    pub newest: chrono::DateTime<chrono::Utc>,
}
#[derive(Debug)]
pub struct DeleteOutboxPublishedParams<T1: crate::ArraySql<Item = uuid::Uuid>> {
    pub ids: T1,
    pub oldest: chrono::DateTime<chrono::Utc>,
    pub newest: chrono::DateTime<chrono::Utc>,
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ClaimedRow {
    pub id: uuid::Uuid,
    pub seq: i64,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub event_type: String,
    pub payload: String,
    pub metadata: String,
    pub attempts: i32,
    pub created_at: chrono::DateTime<chrono::Utc>,
}
pub struct ClaimedRowBorrowed<'a> {
    pub id: uuid::Uuid,
    pub seq: i64,
    pub aggregate_type: &'a str,
    pub aggregate_id: &'a str,
    pub event_type: &'a str,
    pub payload: &'a str,
    pub metadata: &'a str,
    pub attempts: i32,
    pub created_at: chrono::DateTime<chrono::Utc>,
}
impl<'a> From<ClaimedRowBorrowed<'a>> for ClaimedRow {
    fn from(
        ClaimedRowBorrowed {
            id,
            seq,
            aggregate_type,
            aggregate_id,
            event_type,
            payload,
            metadata,
            attempts,
            created_at,
        }: ClaimedRowBorrowed<'a>,
    ) -> Self {
        Self {
            id,
            seq,
            aggregate_type: aggregate_type.into(),
            aggregate_id: aggregate_id.into(),
            event_type: event_type.into(),
            payload: payload.into(),
            metadata: metadata.into(),
            attempts,
            created_at,
        }
    }
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HeadRow {
    pub id: uuid::Uuid,
    pub seq: i64,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub event_type: String,
    pub payload: String,
    pub metadata: String,
    pub attempts: i32,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub share: i64,
    pub window_end: i64,
    pub window_rows: i64,
    pub in_window: i64,
}
pub struct HeadRowBorrowed<'a> {
    pub id: uuid::Uuid,
    pub seq: i64,
    pub aggregate_type: &'a str,
    pub aggregate_id: &'a str,
    pub event_type: &'a str,
    pub payload: &'a str,
    pub metadata: &'a str,
    pub attempts: i32,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub share: i64,
    pub window_end: i64,
    pub window_rows: i64,
    pub in_window: i64,
}
impl<'a> From<HeadRowBorrowed<'a>> for HeadRow {
    fn from(
        HeadRowBorrowed {
            id,
            seq,
            aggregate_type,
            aggregate_id,
            event_type,
            payload,
            metadata,
            attempts,
            created_at,
            share,
            window_end,
            window_rows,
            in_window,
        }: HeadRowBorrowed<'a>,
    ) -> Self {
        Self {
            id,
            seq,
            aggregate_type: aggregate_type.into(),
            aggregate_id: aggregate_id.into(),
            event_type: event_type.into(),
            payload: payload.into(),
            metadata: metadata.into(),
            attempts,
            created_at,
            share,
            window_end,
            window_rows,
            in_window,
        }
    }
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SettledRow {
    pub event_type: String,
    pub age_secs: f64,
}
pub struct SettledRowBorrowed<'a> {
    pub event_type: &'a str,
    pub age_secs: f64,
}
impl<'a> From<SettledRowBorrowed<'a>> for SettledRow {
    fn from(
        SettledRowBorrowed {
            event_type,
            age_secs,
        }: SettledRowBorrowed<'a>,
    ) -> Self {
        Self {
            event_type: event_type.into(),
            age_secs,
        }
    }
}
use crate::client::async_::GenericClient;
use futures::{self, StreamExt, TryStreamExt};
pub struct ClaimedRowQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<ClaimedRowBorrowed, tokio_postgres::Error>,
    mapper: fn(ClaimedRowBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> ClaimedRowQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(ClaimedRowBorrowed) -> R,
    ) -> ClaimedRowQuery<'c, 'a, 's, C, R, N> {
        ClaimedRowQuery {
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
pub struct HeadRowQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<HeadRowBorrowed, tokio_postgres::Error>,
    mapper: fn(HeadRowBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> HeadRowQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(HeadRowBorrowed) -> R) -> HeadRowQuery<'c, 'a, 's, C, R, N> {
        HeadRowQuery {
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
pub struct SettledRowQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<SettledRowBorrowed, tokio_postgres::Error>,
    mapper: fn(SettledRowBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> SettledRowQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(SettledRowBorrowed) -> R,
    ) -> SettledRowQuery<'c, 'a, 's, C, R, N> {
        SettledRowQuery {
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
pub struct FetchOutboxBatchStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn fetch_outbox_batch() -> FetchOutboxBatchStmt {
    FetchOutboxBatchStmt(
        "SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, created_at FROM (SELECT c.*, sum(octet_length(c.payload)) OVER (ORDER BY c.seq) AS running_bytes FROM ( SELECT id, seq, aggregate_type, aggregate_id, event_type, payload::text AS payload, metadata::text AS metadata, attempts, created_at FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NULL AND (retry_after IS NULL OR retry_after <= now()) ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED ) c) w WHERE w.running_bytes - octet_length(w.payload) < $2 ORDER BY w.seq",
        None,
    )
}
impl FetchOutboxBatchStmt {
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
        batch_size: &'a i64,
        max_bytes: &'a i64,
    ) -> ClaimedRowQuery<'c, 'a, 's, C, ClaimedRow, 2> {
        ClaimedRowQuery {
            client,
            params: [batch_size, max_bytes],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<ClaimedRowBorrowed, tokio_postgres::Error> {
                    Ok(ClaimedRowBorrowed {
                        id: row.try_get(0)?,
                        seq: row.try_get(1)?,
                        aggregate_type: row.try_get(2)?,
                        aggregate_id: row.try_get(3)?,
                        event_type: row.try_get(4)?,
                        payload: row.try_get(5)?,
                        metadata: row.try_get(6)?,
                        attempts: row.try_get(7)?,
                        created_at: row.try_get(8)?,
                    })
                },
            mapper: |it| ClaimedRow::from(it),
        }
    }
}
impl<'c, 'a, 's, C: GenericClient>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        FetchOutboxBatchParams,
        ClaimedRowQuery<'c, 'a, 's, C, ClaimedRow, 2>,
        C,
    > for FetchOutboxBatchStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a FetchOutboxBatchParams,
    ) -> ClaimedRowQuery<'c, 'a, 's, C, ClaimedRow, 2> {
        self.bind(client, &params.batch_size, &params.max_bytes)
    }
}
pub struct FetchOutboxHeadsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn fetch_outbox_heads() -> FetchOutboxHeadsStmt {
    FetchOutboxHeadsStmt(
        "SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, created_at, share, window_end, window_rows, in_window FROM (SELECT c.*, sum(octet_length(c.payload)) OVER (ORDER BY c.seq) AS running_bytes FROM ( WITH win AS MATERIALIZED ( SELECT id, created_at, seq, aggregate_type, aggregate_id FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NULL ORDER BY seq LIMIT $1), firsts AS MATERIALIZED ( SELECT min(seq) AS seq, count(*) AS n FROM win GROUP BY aggregate_type, aggregate_id), free AS MATERIALIZED ( SELECT seq FROM firsts EXCEPT SELECT unnest($2::bigint[])), share AS ( SELECT CASE WHEN (SELECT count(*) FROM win) < $3 * $4::bigint THEN $3 ELSE least($3, greatest(1, (count(*) + $4::bigint - 1) / $4::bigint)) END AS n FROM firsts) SELECT e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload::text AS payload, e.metadata::text AS metadata, e.attempts, e.created_at, (SELECT n FROM share) AS share, (SELECT max(seq) FROM win) AS window_end, (SELECT count(*) FROM win) AS window_rows, firsts.in_window FROM (SELECT r.id, r.created_at, r.seq, r.in_window, (r.i + r.n - ($5::bigint * ((r.n + $4::bigint - 1) / $4::bigint)) % r.n) % r.n AS k FROM (SELECT w.id, w.created_at, w.seq, fi.n AS in_window, row_number() OVER (ORDER BY w.seq) - 1 AS i, count(*) OVER () AS n FROM win w JOIN free f ON f.seq = w.seq JOIN firsts fi ON fi.seq = w.seq) r ORDER BY k) firsts JOIN outbox_events e ON e.id = firsts.id AND e.created_at = firsts.created_at WHERE e.processed_at IS NULL AND e.dead_lettered_at IS NULL AND (e.retry_after IS NULL OR e.retry_after <= now()) AND NOT EXISTS ( SELECT 1 FROM outbox_events b WHERE b.aggregate_type = e.aggregate_type AND b.aggregate_id = e.aggregate_id AND b.processed_at IS NULL AND b.dead_lettered_at IS NOT NULL AND b.seq < e.seq) ORDER BY firsts.k LIMIT (SELECT n FROM share) FOR UPDATE OF e SKIP LOCKED ) c) w WHERE w.running_bytes - octet_length(w.payload) < $6 ORDER BY w.seq",
        None,
    )
}
impl FetchOutboxHeadsStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub fn bind<'c, 'a, 's, C: GenericClient, T1: crate::ArraySql<Item = i64>>(
        &'s self,
        client: &'c C,
        window: &'a i64,
        held: &'a T1,
        batch_size: &'a i64,
        workers: &'a i64,
        slot: &'a i64,
        max_bytes: &'a i64,
    ) -> HeadRowQuery<'c, 'a, 's, C, HeadRow, 6> {
        HeadRowQuery {
            client,
            params: [window, held, batch_size, workers, slot, max_bytes],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<HeadRowBorrowed, tokio_postgres::Error> {
                    Ok(HeadRowBorrowed {
                        id: row.try_get(0)?,
                        seq: row.try_get(1)?,
                        aggregate_type: row.try_get(2)?,
                        aggregate_id: row.try_get(3)?,
                        event_type: row.try_get(4)?,
                        payload: row.try_get(5)?,
                        metadata: row.try_get(6)?,
                        attempts: row.try_get(7)?,
                        created_at: row.try_get(8)?,
                        share: row.try_get(9)?,
                        window_end: row.try_get(10)?,
                        window_rows: row.try_get(11)?,
                        in_window: row.try_get(12)?,
                    })
                },
            mapper: |it| HeadRow::from(it),
        }
    }
}
impl<'c, 'a, 's, C: GenericClient, T1: crate::ArraySql<Item = i64>>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        FetchOutboxHeadsParams<T1>,
        HeadRowQuery<'c, 'a, 's, C, HeadRow, 6>,
        C,
    > for FetchOutboxHeadsStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a FetchOutboxHeadsParams<T1>,
    ) -> HeadRowQuery<'c, 'a, 's, C, HeadRow, 6> {
        self.bind(
            client,
            &params.window,
            &params.held,
            &params.batch_size,
            &params.workers,
            &params.slot,
            &params.max_bytes,
        )
    }
}
pub struct OutboxPendingBeyondStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn outbox_pending_beyond() -> OutboxPendingBeyondStmt {
    OutboxPendingBeyondStmt(
        "SELECT EXISTS ( SELECT 1 FROM outbox_events WHERE processed_at IS NULL AND dead_lettered_at IS NULL ORDER BY seq OFFSET $1 LIMIT 1) AS beyond",
        None,
    )
}
impl OutboxPendingBeyondStmt {
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
        window: &'a i64,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 1> {
        BoolQuery {
            client,
            params: [window],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct FetchOutboxHeadsByAggregateStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn fetch_outbox_heads_by_aggregate() -> FetchOutboxHeadsByAggregateStmt {
    FetchOutboxHeadsByAggregateStmt(
        "SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, created_at FROM (SELECT c.*, sum(octet_length(c.payload)) OVER (ORDER BY c.seq) AS running_bytes FROM ( WITH RECURSIVE firsts AS ( (SELECT aggregate_type, aggregate_id, seq FROM outbox_events WHERE processed_at IS NULL ORDER BY aggregate_type, aggregate_id, seq LIMIT 1) UNION ALL (SELECT n.aggregate_type, n.aggregate_id, n.seq FROM firsts f, LATERAL (SELECT o.aggregate_type, o.aggregate_id, o.seq FROM outbox_events o WHERE o.processed_at IS NULL AND (o.aggregate_type, o.aggregate_id) > (f.aggregate_type, f.aggregate_id) ORDER BY o.aggregate_type, o.aggregate_id, o.seq LIMIT 1) n) ) SELECT e.* FROM (SELECT aggregate_type, aggregate_id, seq FROM firsts WHERE seq > $1 ORDER BY seq) f, LATERAL (SELECT o.id, o.seq, o.aggregate_type, o.aggregate_id, o.event_type, o.payload::text AS payload, o.metadata::text AS metadata, o.attempts, o.created_at FROM outbox_events o WHERE o.aggregate_type = f.aggregate_type AND o.aggregate_id = f.aggregate_id AND o.seq = f.seq AND o.processed_at IS NULL AND o.dead_lettered_at IS NULL AND (o.retry_after IS NULL OR o.retry_after <= now()) AND o.id <> ALL($2) FOR UPDATE SKIP LOCKED) e ORDER BY f.seq LIMIT $3 ) c) w WHERE w.running_bytes - octet_length(w.payload) < $4 ORDER BY w.seq",
        None,
    )
}
impl FetchOutboxHeadsByAggregateStmt {
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
        after: &'a i64,
        exclude: &'a T1,
        batch_size: &'a i64,
        max_bytes: &'a i64,
    ) -> ClaimedRowQuery<'c, 'a, 's, C, ClaimedRow, 4> {
        ClaimedRowQuery {
            client,
            params: [after, exclude, batch_size, max_bytes],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<ClaimedRowBorrowed, tokio_postgres::Error> {
                    Ok(ClaimedRowBorrowed {
                        id: row.try_get(0)?,
                        seq: row.try_get(1)?,
                        aggregate_type: row.try_get(2)?,
                        aggregate_id: row.try_get(3)?,
                        event_type: row.try_get(4)?,
                        payload: row.try_get(5)?,
                        metadata: row.try_get(6)?,
                        attempts: row.try_get(7)?,
                        created_at: row.try_get(8)?,
                    })
                },
            mapper: |it| ClaimedRow::from(it),
        }
    }
}
impl<'c, 'a, 's, C: GenericClient, T1: crate::ArraySql<Item = uuid::Uuid>>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        FetchOutboxHeadsByAggregateParams<T1>,
        ClaimedRowQuery<'c, 'a, 's, C, ClaimedRow, 4>,
        C,
    > for FetchOutboxHeadsByAggregateStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a FetchOutboxHeadsByAggregateParams<T1>,
    ) -> ClaimedRowQuery<'c, 'a, 's, C, ClaimedRow, 4> {
        self.bind(
            client,
            &params.after,
            &params.exclude,
            &params.batch_size,
            &params.max_bytes,
        )
    }
}
pub struct FetchOutboxFollowersStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn fetch_outbox_followers() -> FetchOutboxFollowersStmt {
    FetchOutboxFollowersStmt(
        "WITH chosen AS MATERIALIZED ( SELECT f.id, f.created_at, f.seq, h.aggregate_type, h.aggregate_id FROM unnest($1::text[], $2::text[], $3::bigint[]) AS h(aggregate_type, aggregate_id, seq) CROSS JOIN LATERAL ( SELECT coalesce(min(b.seq), 9223372036854775807) AS seq FROM outbox_events b WHERE b.aggregate_type = h.aggregate_type AND b.aggregate_id = h.aggregate_id AND b.processed_at IS NULL AND (b.dead_lettered_at IS NOT NULL OR b.retry_after IS NOT NULL) AND b.seq > h.seq AND (b.dead_lettered_at IS NOT NULL OR b.retry_after > now())) blocked CROSS JOIN LATERAL ( SELECT r.id, r.created_at, r.seq, row_number() OVER (ORDER BY r.seq) AS rank FROM (SELECT o.id, o.created_at, o.seq FROM outbox_events o WHERE o.aggregate_type = h.aggregate_type AND o.aggregate_id = h.aggregate_id AND (o.aggregate_type, o.aggregate_id, o.seq) > (h.aggregate_type, h.aggregate_id, h.seq) AND (o.aggregate_type, o.aggregate_id, o.seq) < (h.aggregate_type, h.aggregate_id, blocked.seq) AND o.processed_at IS NULL AND o.dead_lettered_at IS NULL AND (o.retry_after IS NULL OR o.retry_after <= now()) ORDER BY o.aggregate_type, o.aggregate_id, o.seq LIMIT $4) r) f ORDER BY f.rank, f.seq LIMIT $4), locked AS ( SELECT e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload::text AS payload, e.metadata::text AS metadata, e.attempts, e.created_at FROM chosen JOIN outbox_events e ON e.id = chosen.id AND e.created_at = chosen.created_at WHERE e.processed_at IS NULL AND e.dead_lettered_at IS NULL FOR UPDATE OF e SKIP LOCKED), gaps AS ( SELECT c.aggregate_type, c.aggregate_id, min(c.seq) AS seq FROM chosen c WHERE NOT EXISTS (SELECT 1 FROM locked l WHERE l.id = c.id AND l.created_at = c.created_at) GROUP BY c.aggregate_type, c.aggregate_id) SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, created_at FROM (SELECT l.*, sum(octet_length(l.payload)) OVER (ORDER BY l.seq) AS running_bytes FROM locked l LEFT JOIN gaps g ON g.aggregate_type = l.aggregate_type AND g.aggregate_id = l.aggregate_id WHERE g.seq IS NULL OR l.seq < g.seq) w WHERE w.running_bytes - octet_length(w.payload) < $5 ORDER BY w.seq",
        None,
    )
}
impl FetchOutboxFollowersStmt {
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
        T1: crate::StringSql,
        T2: crate::ArraySql<Item = T1>,
        T3: crate::StringSql,
        T4: crate::ArraySql<Item = T3>,
        T5: crate::ArraySql<Item = i64>,
    >(
        &'s self,
        client: &'c C,
        aggregate_types: &'a T2,
        aggregate_ids: &'a T4,
        head_seqs: &'a T5,
        limit: &'a i64,
        max_bytes: &'a i64,
    ) -> ClaimedRowQuery<'c, 'a, 's, C, ClaimedRow, 5> {
        ClaimedRowQuery {
            client,
            params: [aggregate_types, aggregate_ids, head_seqs, limit, max_bytes],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<ClaimedRowBorrowed, tokio_postgres::Error> {
                    Ok(ClaimedRowBorrowed {
                        id: row.try_get(0)?,
                        seq: row.try_get(1)?,
                        aggregate_type: row.try_get(2)?,
                        aggregate_id: row.try_get(3)?,
                        event_type: row.try_get(4)?,
                        payload: row.try_get(5)?,
                        metadata: row.try_get(6)?,
                        attempts: row.try_get(7)?,
                        created_at: row.try_get(8)?,
                    })
                },
            mapper: |it| ClaimedRow::from(it),
        }
    }
}
impl<
    'c,
    'a,
    's,
    C: GenericClient,
    T1: crate::StringSql,
    T2: crate::ArraySql<Item = T1>,
    T3: crate::StringSql,
    T4: crate::ArraySql<Item = T3>,
    T5: crate::ArraySql<Item = i64>,
>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        FetchOutboxFollowersParams<T1, T2, T3, T4, T5>,
        ClaimedRowQuery<'c, 'a, 's, C, ClaimedRow, 5>,
        C,
    > for FetchOutboxFollowersStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a FetchOutboxFollowersParams<T1, T2, T3, T4, T5>,
    ) -> ClaimedRowQuery<'c, 'a, 's, C, ClaimedRow, 5> {
        self.bind(
            client,
            &params.aggregate_types,
            &params.aggregate_ids,
            &params.head_seqs,
            &params.limit,
            &params.max_bytes,
        )
    }
}
pub struct MarkOutboxProcessedStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn mark_outbox_processed() -> MarkOutboxProcessedStmt {
    MarkOutboxProcessedStmt(
        "UPDATE outbox_events SET processed_at = clock_timestamp(), retry_after = NULL, last_error = NULL WHERE id = ANY($1) AND created_at >= $2::timestamptz + interval '0 s' AND created_at <= $3::timestamptz + interval '0 s' AND processed_at IS NULL RETURNING id",
        None,
    )
}
impl MarkOutboxProcessedStmt {
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
        oldest: &'a chrono::DateTime<chrono::Utc>,
        newest: &'a chrono::DateTime<chrono::Utc>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 3> {
        UuidUuidQuery {
            client,
            params: [ids, oldest, newest],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
impl<'c, 'a, 's, C: GenericClient, T1: crate::ArraySql<Item = uuid::Uuid>>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        MarkOutboxProcessedParams<T1>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 3>,
        C,
    > for MarkOutboxProcessedStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a MarkOutboxProcessedParams<T1>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 3> {
        self.bind(client, &params.ids, &params.oldest, &params.newest)
    }
}
pub struct RecordOutboxFailuresStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn record_outbox_failures() -> RecordOutboxFailuresStmt {
    RecordOutboxFailuresStmt(
        "UPDATE outbox_events e SET attempts = e.attempts + CASE WHEN f.counted AND e.attempts < 2147483647 THEN 1 ELSE 0 END, last_error = f.error, retry_after = CASE WHEN f.dead THEN NULL ELSE clock_timestamp() + make_interval(secs => f.delay_secs) END, dead_lettered_at = CASE WHEN f.dead THEN clock_timestamp() ELSE NULL END FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::float8[], $5::bool[], $6::bool[]) AS f(id, created_at, error, delay_secs, dead, counted) WHERE e.id = f.id AND e.created_at = f.created_at AND e.created_at >= $7::timestamptz + interval '0 s' AND e.created_at <= $8::timestamptz + interval '0 s' AND e.processed_at IS NULL RETURNING e.id",
        None,
    )
}
impl RecordOutboxFailuresStmt {
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
        T2: crate::ArraySql<Item = chrono::DateTime<chrono::Utc>>,
        T3: crate::StringSql,
        T4: crate::ArraySql<Item = T3>,
        T5: crate::ArraySql<Item = f64>,
        T6: crate::ArraySql<Item = bool>,
        T7: crate::ArraySql<Item = bool>,
    >(
        &'s self,
        client: &'c C,
        ids: &'a T1,
        created_ats: &'a T2,
        errors: &'a T4,
        delay_secs: &'a T5,
        dead: &'a T6,
        counted: &'a T7,
        oldest: &'a chrono::DateTime<chrono::Utc>,
        newest: &'a chrono::DateTime<chrono::Utc>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 8> {
        UuidUuidQuery {
            client,
            params: [
                ids,
                created_ats,
                errors,
                delay_secs,
                dead,
                counted,
                oldest,
                newest,
            ],
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
    T2: crate::ArraySql<Item = chrono::DateTime<chrono::Utc>>,
    T3: crate::StringSql,
    T4: crate::ArraySql<Item = T3>,
    T5: crate::ArraySql<Item = f64>,
    T6: crate::ArraySql<Item = bool>,
    T7: crate::ArraySql<Item = bool>,
>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        RecordOutboxFailuresParams<T1, T2, T3, T4, T5, T6, T7>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 8>,
        C,
    > for RecordOutboxFailuresStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a RecordOutboxFailuresParams<T1, T2, T3, T4, T5, T6, T7>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 8> {
        self.bind(
            client,
            &params.ids,
            &params.created_ats,
            &params.errors,
            &params.delay_secs,
            &params.dead,
            &params.counted,
            &params.oldest,
            &params.newest,
        )
    }
}
pub struct DeleteOutboxPublishedStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn delete_outbox_published() -> DeleteOutboxPublishedStmt {
    DeleteOutboxPublishedStmt(
        "DELETE FROM outbox_events WHERE id = ANY($1) AND created_at >= $2::timestamptz + interval '0 s' AND created_at <= $3::timestamptz + interval '0 s' AND processed_at IS NULL RETURNING id",
        None,
    )
}
impl DeleteOutboxPublishedStmt {
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
        oldest: &'a chrono::DateTime<chrono::Utc>,
        newest: &'a chrono::DateTime<chrono::Utc>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 3> {
        UuidUuidQuery {
            client,
            params: [ids, oldest, newest],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
impl<'c, 'a, 's, C: GenericClient, T1: crate::ArraySql<Item = uuid::Uuid>>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        DeleteOutboxPublishedParams<T1>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 3>,
        C,
    > for DeleteOutboxPublishedStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a DeleteOutboxPublishedParams<T1>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 3> {
        self.bind(client, &params.ids, &params.oldest, &params.newest)
    }
}
pub struct MarkOutboxSettledStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn mark_outbox_settled() -> MarkOutboxSettledStmt {
    MarkOutboxSettledStmt(
        "UPDATE outbox_events e SET processed_at = clock_timestamp(), retry_after = NULL, last_error = NULL WHERE e.id IN (SELECT id FROM outbox_events WHERE id = ANY($1) AND processed_at IS NULL FOR UPDATE SKIP LOCKED) AND e.processed_at IS NULL RETURNING e.event_type, extract(epoch FROM clock_timestamp() - e.created_at)::float8 AS age_secs",
        None,
    )
}
impl MarkOutboxSettledStmt {
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
    ) -> SettledRowQuery<'c, 'a, 's, C, SettledRow, 1> {
        SettledRowQuery {
            client,
            params: [ids],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<SettledRowBorrowed, tokio_postgres::Error> {
                    Ok(SettledRowBorrowed {
                        event_type: row.try_get(0)?,
                        age_secs: row.try_get(1)?,
                    })
                },
            mapper: |it| SettledRow::from(it),
        }
    }
}
pub struct DeleteOutboxSettledStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn delete_outbox_settled() -> DeleteOutboxSettledStmt {
    DeleteOutboxSettledStmt(
        "DELETE FROM outbox_events e WHERE e.id IN (SELECT id FROM outbox_events WHERE id = ANY($1) AND processed_at IS NULL FOR UPDATE SKIP LOCKED) AND e.processed_at IS NULL RETURNING e.event_type, extract(epoch FROM clock_timestamp() - e.created_at)::float8 AS age_secs",
        None,
    )
}
impl DeleteOutboxSettledStmt {
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
    ) -> SettledRowQuery<'c, 'a, 's, C, SettledRow, 1> {
        SettledRowQuery {
            client,
            params: [ids],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<SettledRowBorrowed, tokio_postgres::Error> {
                    Ok(SettledRowBorrowed {
                        event_type: row.try_get(0)?,
                        age_secs: row.try_get(1)?,
                    })
                },
            mapper: |it| SettledRow::from(it),
        }
    }
}
pub struct ServerTakesAnyTextStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn server_takes_any_text() -> ServerTakesAnyTextStmt {
    ServerTakesAnyTextStmt(
        "SELECT current_setting('server_encoding') IN ('UTF8', 'SQL_ASCII') AS any_text",
        None,
    )
}
impl ServerTakesAnyTextStmt {
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
pub struct SessionWritableStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn session_writable() -> SessionWritableStmt {
    SessionWritableStmt(
        "SELECT current_setting('transaction_read_only') = 'off' AS writable",
        None,
    )
}
impl SessionWritableStmt {
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
