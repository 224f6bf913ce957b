// This file was generated with `cornucopia`. Do not modify.

#[derive(Debug)]
pub struct InsertOrderParams<T1: crate::StringSql> {
    pub id: uuid::Uuid,
    pub customer: T1,
    pub total_cents: i64,
}
#[derive(Debug)]
pub struct InsertOrderLineParams<T1: crate::StringSql> {
    pub order_id: uuid::Uuid,
    pub line_no: i32,
    pub sku: T1,
    pub quantity: i32,
    pub unit_price_cents: i64,
}
#[derive(Clone, Copy, Debug)]
pub struct ChangeOpenOrderParams {
    pub amount_cents: i64,
    pub id: uuid::Uuid,
}
#[derive(Debug)]
pub struct AppendOrderLineParams<T1: crate::StringSql> {
    pub order_id: uuid::Uuid,
    pub sku: T1,
    pub quantity: i32,
    pub unit_price_cents: i64,
}
#[derive(Clone, Copy, Debug)]
pub struct RemoveOrderLineParams {
    pub order_id: uuid::Uuid,
    pub line_no: i32,
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RemoveOrderLine {
    pub version: i32,
    pub sku: String,
    pub quantity: i32,
    pub unit_price_cents: i64,
}
pub struct RemoveOrderLineBorrowed<'a> {
    pub version: i32,
    pub sku: &'a str,
    pub quantity: i32,
    pub unit_price_cents: i64,
}
impl<'a> From<RemoveOrderLineBorrowed<'a>> for RemoveOrderLine {
    fn from(
        RemoveOrderLineBorrowed {
            version,
            sku,
            quantity,
            unit_price_cents,
        }: RemoveOrderLineBorrowed<'a>,
    ) -> Self {
        Self {
            version,
            sku: sku.into(),
            quantity,
            unit_price_cents,
        }
    }
}
#[derive(Debug, Clone, PartialEq, Copy, serde::Serialize)]
pub struct ShipOrder {
    pub version: i32,
    pub shipped_at: chrono::DateTime<chrono::Utc>,
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FindOrder {
    pub id: uuid::Uuid,
    pub customer: String,
    pub status: String,
    pub total_cents: i64,
    pub version: i32,
    pub placed_at: chrono::DateTime<chrono::Utc>,
    pub shipped_at: Option<chrono::DateTime<chrono::Utc>>,
}
pub struct FindOrderBorrowed<'a> {
    pub id: uuid::Uuid,
    pub customer: &'a str,
    pub status: &'a str,
    pub total_cents: i64,
    pub version: i32,
    pub placed_at: chrono::DateTime<chrono::Utc>,
    pub shipped_at: Option<chrono::DateTime<chrono::Utc>>,
}
impl<'a> From<FindOrderBorrowed<'a>> for FindOrder {
    fn from(
        FindOrderBorrowed {
            id,
            customer,
            status,
            total_cents,
            version,
            placed_at,
            shipped_at,
        }: FindOrderBorrowed<'a>,
    ) -> Self {
        Self {
            id,
            customer: customer.into(),
            status: status.into(),
            total_cents,
            version,
            placed_at,
            shipped_at,
        }
    }
}
use crate::client::async_::GenericClient;
use futures::{self, StreamExt, TryStreamExt};
pub struct I32Query<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<i32, tokio_postgres::Error>,
    mapper: fn(i32) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> I32Query<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(i32) -> R) -> I32Query<'c, 'a, 's, C, R, N> {
        I32Query {
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
pub struct RemoveOrderLineQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<RemoveOrderLineBorrowed, tokio_postgres::Error>,
    mapper: fn(RemoveOrderLineBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> RemoveOrderLineQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(RemoveOrderLineBorrowed) -> R,
    ) -> RemoveOrderLineQuery<'c, 'a, 's, C, R, N> {
        RemoveOrderLineQuery {
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
pub struct ShipOrderQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<ShipOrder, tokio_postgres::Error>,
    mapper: fn(ShipOrder) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> ShipOrderQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(ShipOrder) -> R) -> ShipOrderQuery<'c, 'a, 's, C, R, N> {
        ShipOrderQuery {
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
pub struct FindOrderQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<FindOrderBorrowed, tokio_postgres::Error>,
    mapper: fn(FindOrderBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> FindOrderQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(FindOrderBorrowed) -> R) -> FindOrderQuery<'c, 'a, 's, C, R, N> {
        FindOrderQuery {
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
pub struct InsertOrderStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn insert_order() -> InsertOrderStmt {
    InsertOrderStmt(
        "INSERT INTO orders (id, customer, total_cents) VALUES ($1, $2, $3) RETURNING version",
        None,
    )
}
impl InsertOrderStmt {
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
        id: &'a uuid::Uuid,
        customer: &'a T1,
        total_cents: &'a i64,
    ) -> I32Query<'c, 'a, 's, C, i32, 3> {
        I32Query {
            client,
            params: [id, customer, total_cents],
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
        InsertOrderParams<T1>,
        I32Query<'c, 'a, 's, C, i32, 3>,
        C,
    > for InsertOrderStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a InsertOrderParams<T1>,
    ) -> I32Query<'c, 'a, 's, C, i32, 3> {
        self.bind(client, &params.id, &params.customer, &params.total_cents)
    }
}
pub struct InsertOrderLineStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn insert_order_line() -> InsertOrderLineStmt {
    InsertOrderLineStmt(
        "INSERT INTO order_lines (order_id, line_no, sku, quantity, unit_price_cents) VALUES ($1, $2, $3, $4, $5) RETURNING line_no",
        None,
    )
}
impl InsertOrderLineStmt {
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
        line_no: &'a i32,
        sku: &'a T1,
        quantity: &'a i32,
        unit_price_cents: &'a i64,
    ) -> I32Query<'c, 'a, 's, C, i32, 5> {
        I32Query {
            client,
            params: [order_id, line_no, sku, quantity, unit_price_cents],
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
        InsertOrderLineParams<T1>,
        I32Query<'c, 'a, 's, C, i32, 5>,
        C,
    > for InsertOrderLineStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a InsertOrderLineParams<T1>,
    ) -> I32Query<'c, 'a, 's, C, i32, 5> {
        self.bind(
            client,
            &params.order_id,
            &params.line_no,
            &params.sku,
            &params.quantity,
            &params.unit_price_cents,
        )
    }
}
pub struct ChangeOpenOrderStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn change_open_order() -> ChangeOpenOrderStmt {
    ChangeOpenOrderStmt(
        "UPDATE orders SET total_cents = total_cents + $1, version = version + 1 WHERE id = $2 AND status = 'placed' RETURNING version",
        None,
    )
}
impl ChangeOpenOrderStmt {
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
        amount_cents: &'a i64,
        id: &'a uuid::Uuid,
    ) -> I32Query<'c, 'a, 's, C, i32, 2> {
        I32Query {
            client,
            params: [amount_cents, id],
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
        ChangeOpenOrderParams,
        I32Query<'c, 'a, 's, C, i32, 2>,
        C,
    > for ChangeOpenOrderStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a ChangeOpenOrderParams,
    ) -> I32Query<'c, 'a, 's, C, i32, 2> {
        self.bind(client, &params.amount_cents, &params.id)
    }
}
pub struct AppendOrderLineStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn append_order_line() -> AppendOrderLineStmt {
    AppendOrderLineStmt(
        "INSERT INTO order_lines (order_id, line_no, sku, quantity, unit_price_cents) SELECT $1::uuid, COALESCE(max(line_no), 0) + 1, $2::text, $3::int, $4::bigint FROM order_lines WHERE order_id = $1::uuid RETURNING line_no",
        None,
    )
}
impl AppendOrderLineStmt {
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
        sku: &'a T1,
        quantity: &'a i32,
        unit_price_cents: &'a i64,
    ) -> I32Query<'c, 'a, 's, C, i32, 4> {
        I32Query {
            client,
            params: [order_id, sku, quantity, unit_price_cents],
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
        AppendOrderLineParams<T1>,
        I32Query<'c, 'a, 's, C, i32, 4>,
        C,
    > for AppendOrderLineStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a AppendOrderLineParams<T1>,
    ) -> I32Query<'c, 'a, 's, C, i32, 4> {
        self.bind(
            client,
            &params.order_id,
            &params.sku,
            &params.quantity,
            &params.unit_price_cents,
        )
    }
}
pub struct RemoveOrderLineStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn remove_order_line() -> RemoveOrderLineStmt {
    RemoveOrderLineStmt(
        "WITH removed AS ( DELETE FROM order_lines WHERE order_id = $1 AND line_no = $2 RETURNING sku, quantity, unit_price_cents ) UPDATE orders o SET total_cents = o.total_cents - removed.quantity * removed.unit_price_cents, version = o.version + 1 FROM removed WHERE o.id = $1 AND o.status = 'placed' RETURNING o.version, removed.sku, removed.quantity, removed.unit_price_cents",
        None,
    )
}
impl RemoveOrderLineStmt {
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
        line_no: &'a i32,
    ) -> RemoveOrderLineQuery<'c, 'a, 's, C, RemoveOrderLine, 2> {
        RemoveOrderLineQuery {
            client,
            params: [order_id, line_no],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |
                row: &tokio_postgres::Row,
            | -> Result<RemoveOrderLineBorrowed, tokio_postgres::Error> {
                Ok(RemoveOrderLineBorrowed {
                    version: row.try_get(0)?,
                    sku: row.try_get(1)?,
                    quantity: row.try_get(2)?,
                    unit_price_cents: row.try_get(3)?,
                })
            },
            mapper: |it| RemoveOrderLine::from(it),
        }
    }
}
impl<'c, 'a, 's, C: GenericClient>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        RemoveOrderLineParams,
        RemoveOrderLineQuery<'c, 'a, 's, C, RemoveOrderLine, 2>,
        C,
    > for RemoveOrderLineStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a RemoveOrderLineParams,
    ) -> RemoveOrderLineQuery<'c, 'a, 's, C, RemoveOrderLine, 2> {
        self.bind(client, &params.order_id, &params.line_no)
    }
}
pub struct ShipOrderStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn ship_order() -> ShipOrderStmt {
    ShipOrderStmt(
        "UPDATE orders SET status = 'shipped', shipped_at = now(), version = version + 1 WHERE id = $1 AND status = 'placed' RETURNING version, shipped_at",
        None,
    )
}
impl ShipOrderStmt {
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
    ) -> ShipOrderQuery<'c, 'a, 's, C, ShipOrder, 1> {
        ShipOrderQuery {
            client,
            params: [id],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row: &tokio_postgres::Row| -> Result<ShipOrder, tokio_postgres::Error> {
                Ok(ShipOrder {
                    version: row.try_get(0)?,
                    shipped_at: row.try_get(1)?,
                })
            },
            mapper: |it| ShipOrder::from(it),
        }
    }
}
pub struct FindOrderStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn find_order() -> FindOrderStmt {
    FindOrderStmt(
        "SELECT id, customer, status, total_cents, version, placed_at, shipped_at FROM orders WHERE id = $1",
        None,
    )
}
impl FindOrderStmt {
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
    ) -> FindOrderQuery<'c, 'a, 's, C, FindOrder, 1> {
        FindOrderQuery {
            client,
            params: [id],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<FindOrderBorrowed, tokio_postgres::Error> {
                    Ok(FindOrderBorrowed {
                        id: row.try_get(0)?,
                        customer: row.try_get(1)?,
                        status: row.try_get(2)?,
                        total_cents: row.try_get(3)?,
                        version: row.try_get(4)?,
                        placed_at: row.try_get(5)?,
                        shipped_at: row.try_get(6)?,
                    })
                },
            mapper: |it| FindOrder::from(it),
        }
    }
}
