// This file was generated with `cornucopia`. Do not modify.

#[derive(Debug)]
pub struct InsertSummaryParams<T1: crate::StringSql> {
    pub order_id: uuid::Uuid,
    pub customer: T1,
    pub line_count: i32,
    pub total_cents: i64,
    pub version: i32,
}
#[derive(Clone, Copy, Debug)]
pub struct ApplyLineChangeParams {
    pub line_delta: i32,
    pub amount_cents: i64,
    pub version: i32,
    pub order_id: uuid::Uuid,
}
#[derive(Clone, Copy, Debug)]
pub struct ApplyShippedParams {
    pub version: i32,
    pub order_id: uuid::Uuid,
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FindSummary {
    pub order_id: uuid::Uuid,
    pub customer: String,
    pub status: String,
    pub line_count: i32,
    pub total_cents: i64,
    pub version: i32,
}
pub struct FindSummaryBorrowed<'a> {
    pub order_id: uuid::Uuid,
    pub customer: &'a str,
    pub status: &'a str,
    pub line_count: i32,
    pub total_cents: i64,
    pub version: i32,
}
impl<'a> From<FindSummaryBorrowed<'a>> for FindSummary {
    fn from(
        FindSummaryBorrowed {
            order_id,
            customer,
            status,
            line_count,
            total_cents,
            version,
        }: FindSummaryBorrowed<'a>,
    ) -> Self {
        Self {
            order_id,
            customer: customer.into(),
            status: status.into(),
            line_count,
            total_cents,
            version,
        }
    }
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
pub struct FindSummaryQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<FindSummaryBorrowed, tokio_postgres::Error>,
    mapper: fn(FindSummaryBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> FindSummaryQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(FindSummaryBorrowed) -> R,
    ) -> FindSummaryQuery<'c, 'a, 's, C, R, N> {
        FindSummaryQuery {
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
pub struct InsertSummaryStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn insert_summary() -> InsertSummaryStmt {
    InsertSummaryStmt(
        "INSERT INTO order_summaries (order_id, customer, status, line_count, total_cents, version) VALUES ($1, $2, 'placed', $3, $4, $5) ON CONFLICT (order_id) DO NOTHING RETURNING order_id",
        None,
    )
}
impl InsertSummaryStmt {
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
        order_id: &'a uuid::Uuid,
        customer: &'a T1,
        line_count: &'a i32,
        total_cents: &'a i64,
        version: &'a i32,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 5> {
        UuidUuidQuery {
            client,
            params: [order_id, customer, line_count, total_cents, version],
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
        InsertSummaryParams<T1>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 5>,
        C,
    > for InsertSummaryStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a InsertSummaryParams<T1>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 5> {
        self.bind(
            client,
            &params.order_id,
            &params.customer,
            &params.line_count,
            &params.total_cents,
            &params.version,
        )
    }
}
pub struct ApplyLineChangeStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn apply_line_change() -> ApplyLineChangeStmt {
    ApplyLineChangeStmt(
        "UPDATE order_summaries SET line_count = line_count + $1, total_cents = total_cents + $2, version = $3, updated_at = now() WHERE order_id = $4 AND version = $3 - 1 RETURNING order_id",
        None,
    )
}
impl ApplyLineChangeStmt {
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
        line_delta: &'a i32,
        amount_cents: &'a i64,
        version: &'a i32,
        order_id: &'a uuid::Uuid,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4> {
        UuidUuidQuery {
            client,
            params: [line_delta, amount_cents, version, order_id],
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
        ApplyLineChangeParams,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4>,
        C,
    > for ApplyLineChangeStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a ApplyLineChangeParams,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 4> {
        self.bind(
            client,
            &params.line_delta,
            &params.amount_cents,
            &params.version,
            &params.order_id,
        )
    }
}
pub struct ApplyShippedStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn apply_shipped() -> ApplyShippedStmt {
    ApplyShippedStmt(
        "UPDATE order_summaries SET status = 'shipped', version = $1, updated_at = now() WHERE order_id = $2 AND version = $1 - 1 RETURNING order_id",
        None,
    )
}
impl ApplyShippedStmt {
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
        version: &'a i32,
        order_id: &'a uuid::Uuid,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2> {
        UuidUuidQuery {
            client,
            params: [version, order_id],
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
        ApplyShippedParams,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2>,
        C,
    > for ApplyShippedStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a ApplyShippedParams,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 2> {
        self.bind(client, &params.version, &params.order_id)
    }
}
pub struct FindSummaryStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn find_summary() -> FindSummaryStmt {
    FindSummaryStmt(
        "SELECT order_id, customer, status, line_count, total_cents, version FROM order_summaries WHERE order_id = $1",
        None,
    )
}
impl FindSummaryStmt {
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
        order_id: &'a uuid::Uuid,
    ) -> FindSummaryQuery<'c, 'a, 's, C, FindSummary, 1> {
        FindSummaryQuery {
            client,
            params: [order_id],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<FindSummaryBorrowed, tokio_postgres::Error> {
                    Ok(FindSummaryBorrowed {
                        order_id: row.try_get(0)?,
                        customer: row.try_get(1)?,
                        status: row.try_get(2)?,
                        line_count: row.try_get(3)?,
                        total_cents: row.try_get(4)?,
                        version: row.try_get(5)?,
                    })
                },
            mapper: |it| FindSummary::from(it),
        }
    }
}
pub struct CountStaleSummariesStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn count_stale_summaries() -> CountStaleSummariesStmt {
    CountStaleSummariesStmt(
        "SELECT count(*) AS stale FROM orders o LEFT JOIN order_summaries s ON s.order_id = o.id WHERE s.order_id IS NULL OR s.version <> o.version OR s.status <> o.status OR s.total_cents <> o.total_cents OR s.line_count <> (SELECT count(*) FROM order_lines l WHERE l.order_id = o.id)",
        None,
    )
}
impl CountStaleSummariesStmt {
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
