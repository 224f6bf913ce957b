// This file was generated with `cornucopia`. Do not modify.

#[derive(Debug)]
pub struct PartitionsConvertParams<T1: crate::StringSql> {
    pub granularity: T1,
    pub ahead: i32,
}
#[derive(Clone, Copy, Debug)]
pub struct PartitionsDrainTailParams {
    pub wanted: chrono::DateTime<chrono::Utc>,
    pub lock_timeout_ms: i32,
}
#[derive(Debug)]
pub struct PartitionDropDetachedParams<T1: crate::StringSql> {
    pub name: T1,
    pub lo: Option<chrono::DateTime<chrono::Utc>>,
    pub hi: chrono::DateTime<chrono::Utc>,
    pub retention_secs: f64,
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PartitioningSettings {
    pub granularity: String,
    pub ahead: i32,
    pub maintained_at: Option<chrono::DateTime<chrono::Utc>>,
    pub retention_secs: Option<f64>,
    pub kept_partitions: i32,
    pub kept_events: i64,
}
pub struct PartitioningSettingsBorrowed<'a> {
    pub granularity: &'a str,
    pub ahead: i32,
    pub maintained_at: Option<chrono::DateTime<chrono::Utc>>,
    pub retention_secs: Option<f64>,
    pub kept_partitions: i32,
    pub kept_events: i64,
}
impl<'a> From<PartitioningSettingsBorrowed<'a>> for PartitioningSettings {
    fn from(
        PartitioningSettingsBorrowed {
            granularity,
            ahead,
            maintained_at,
            retention_secs,
            kept_partitions,
            kept_events,
        }: PartitioningSettingsBorrowed<'a>,
    ) -> Self {
        Self {
            granularity: granularity.into(),
            ahead,
            maintained_at,
            retention_secs,
            kept_partitions,
            kept_events,
        }
    }
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PartitionsTail {
    pub granularity: Option<String>,
    pub wanted: Option<chrono::DateTime<chrono::Utc>>,
    pub tail_lo: Option<chrono::DateTime<chrono::Utc>>,
    pub tail_rows: Option<bool>,
    pub tail_detach_pending: Option<bool>,
    pub carve_safe: Option<bool>,
}
pub struct PartitionsTailBorrowed<'a> {
    pub granularity: Option<&'a str>,
    pub wanted: Option<chrono::DateTime<chrono::Utc>>,
    pub tail_lo: Option<chrono::DateTime<chrono::Utc>>,
    pub tail_rows: Option<bool>,
    pub tail_detach_pending: Option<bool>,
    pub carve_safe: Option<bool>,
}
impl<'a> From<PartitionsTailBorrowed<'a>> for PartitionsTail {
    fn from(
        PartitionsTailBorrowed {
            granularity,
            wanted,
            tail_lo,
            tail_rows,
            tail_detach_pending,
            carve_safe,
        }: PartitionsTailBorrowed<'a>,
    ) -> Self {
        Self {
            granularity: granularity.map(|v| v.into()),
            wanted,
            tail_lo,
            tail_rows,
            tail_detach_pending,
            carve_safe,
        }
    }
}
#[derive(Debug, Clone, PartialEq, Copy, serde::Serialize)]
pub struct PartitionsSettle {
    pub settled_before: Option<chrono::DateTime<chrono::Utc>>,
    pub needed: Option<chrono::DateTime<chrono::Utc>>,
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PartitionsExpired {
    pub name: String,
    pub lo: Option<chrono::DateTime<chrono::Utc>>,
    pub hi: chrono::DateTime<chrono::Utc>,
    pub droppable: bool,
    pub leftovers: i64,
    pub detach_pending: bool,
    pub settling: bool,
    pub unpublished: i64,
}
pub struct PartitionsExpiredBorrowed<'a> {
    pub name: &'a str,
    pub lo: Option<chrono::DateTime<chrono::Utc>>,
    pub hi: chrono::DateTime<chrono::Utc>,
    pub droppable: bool,
    pub leftovers: i64,
    pub detach_pending: bool,
    pub settling: bool,
    pub unpublished: i64,
}
impl<'a> From<PartitionsExpiredBorrowed<'a>> for PartitionsExpired {
    fn from(
        PartitionsExpiredBorrowed {
            name,
            lo,
            hi,
            droppable,
            leftovers,
            detach_pending,
            settling,
            unpublished,
        }: PartitionsExpiredBorrowed<'a>,
    ) -> Self {
        Self {
            name: name.into(),
            lo,
            hi,
            droppable,
            leftovers,
            detach_pending,
            settling,
            unpublished,
        }
    }
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PartitionsOrphaned {
    pub name: String,
    pub lo: Option<chrono::DateTime<chrono::Utc>>,
    pub hi: chrono::DateTime<chrono::Utc>,
}
pub struct PartitionsOrphanedBorrowed<'a> {
    pub name: &'a str,
    pub lo: Option<chrono::DateTime<chrono::Utc>>,
    pub hi: chrono::DateTime<chrono::Utc>,
}
impl<'a> From<PartitionsOrphanedBorrowed<'a>> for PartitionsOrphaned {
    fn from(PartitionsOrphanedBorrowed { name, lo, hi }: PartitionsOrphanedBorrowed<'a>) -> Self {
        Self {
            name: name.into(),
            lo,
            hi,
        }
    }
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PartitionList {
    pub name: String,
    pub lo: Option<chrono::DateTime<chrono::Utc>>,
    pub hi: Option<chrono::DateTime<chrono::Utc>>,
    pub detach_pending: bool,
    pub estimated_rows: Option<i64>,
}
pub struct PartitionListBorrowed<'a> {
    pub name: &'a str,
    pub lo: Option<chrono::DateTime<chrono::Utc>>,
    pub hi: Option<chrono::DateTime<chrono::Utc>>,
    pub detach_pending: bool,
    pub estimated_rows: Option<i64>,
}
impl<'a> From<PartitionListBorrowed<'a>> for PartitionList {
    fn from(
        PartitionListBorrowed {
            name,
            lo,
            hi,
            detach_pending,
            estimated_rows,
        }: PartitionListBorrowed<'a>,
    ) -> Self {
        Self {
            name: name.into(),
            lo,
            hi,
            detach_pending,
            estimated_rows,
        }
    }
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PartitionStats {
    pub granularity: String,
    pub partitions: i64,
    pub tail_events: i64,
    pub kept_partitions: i32,
    pub kept_events: i64,
    pub maintained_at: Option<chrono::DateTime<chrono::Utc>>,
    pub legacy_table: bool,
    pub tail_attached: bool,
}
pub struct PartitionStatsBorrowed<'a> {
    pub granularity: &'a str,
    pub partitions: i64,
    pub tail_events: i64,
    pub kept_partitions: i32,
    pub kept_events: i64,
    pub maintained_at: Option<chrono::DateTime<chrono::Utc>>,
    pub legacy_table: bool,
    pub tail_attached: bool,
}
impl<'a> From<PartitionStatsBorrowed<'a>> for PartitionStats {
    fn from(
        PartitionStatsBorrowed {
            granularity,
            partitions,
            tail_events,
            kept_partitions,
            kept_events,
            maintained_at,
            legacy_table,
            tail_attached,
        }: PartitionStatsBorrowed<'a>,
    ) -> Self {
        Self {
            granularity: granularity.into(),
            partitions,
            tail_events,
            kept_partitions,
            kept_events,
            maintained_at,
            legacy_table,
            tail_attached,
        }
    }
}
#[derive(Debug, Clone, PartialEq, Copy, serde::Serialize)]
pub struct PartitionLockBudget {
    pub partitions: i64,
    pub indexes: i64,
    pub lock_slots: i64,
}
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MaintainerRole {
    pub role: String,
    pub owner: String,
    pub may: bool,
}
pub struct MaintainerRoleBorrowed<'a> {
    pub role: &'a str,
    pub owner: &'a str,
    pub may: bool,
}
impl<'a> From<MaintainerRoleBorrowed<'a>> for MaintainerRole {
    fn from(MaintainerRoleBorrowed { role, owner, may }: MaintainerRoleBorrowed<'a>) -> Self {
        Self {
            role: role.into(),
            owner: owner.into(),
            may,
        }
    }
}
use crate::client::async_::GenericClient;
use futures::{self, StreamExt, TryStreamExt};
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
pub struct PartitioningSettingsQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor:
        fn(&tokio_postgres::Row) -> Result<PartitioningSettingsBorrowed, tokio_postgres::Error>,
    mapper: fn(PartitioningSettingsBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> PartitioningSettingsQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(PartitioningSettingsBorrowed) -> R,
    ) -> PartitioningSettingsQuery<'c, 'a, 's, C, R, N> {
        PartitioningSettingsQuery {
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
pub struct PartitionsTailQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<PartitionsTailBorrowed, tokio_postgres::Error>,
    mapper: fn(PartitionsTailBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> PartitionsTailQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(PartitionsTailBorrowed) -> R,
    ) -> PartitionsTailQuery<'c, 'a, 's, C, R, N> {
        PartitionsTailQuery {
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
pub struct PartitionsSettleQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<PartitionsSettle, tokio_postgres::Error>,
    mapper: fn(PartitionsSettle) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> PartitionsSettleQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(PartitionsSettle) -> R,
    ) -> PartitionsSettleQuery<'c, 'a, 's, C, R, N> {
        PartitionsSettleQuery {
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
pub struct PartitionsExpiredQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<PartitionsExpiredBorrowed, tokio_postgres::Error>,
    mapper: fn(PartitionsExpiredBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> PartitionsExpiredQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(PartitionsExpiredBorrowed) -> R,
    ) -> PartitionsExpiredQuery<'c, 'a, 's, C, R, N> {
        PartitionsExpiredQuery {
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
pub struct PartitionsOrphanedQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor:
        fn(&tokio_postgres::Row) -> Result<PartitionsOrphanedBorrowed, tokio_postgres::Error>,
    mapper: fn(PartitionsOrphanedBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> PartitionsOrphanedQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(PartitionsOrphanedBorrowed) -> R,
    ) -> PartitionsOrphanedQuery<'c, 'a, 's, C, R, N> {
        PartitionsOrphanedQuery {
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
pub struct PartitionListQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<PartitionListBorrowed, tokio_postgres::Error>,
    mapper: fn(PartitionListBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> PartitionListQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(PartitionListBorrowed) -> R,
    ) -> PartitionListQuery<'c, 'a, 's, C, R, N> {
        PartitionListQuery {
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
pub struct PartitionStatsQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<PartitionStatsBorrowed, tokio_postgres::Error>,
    mapper: fn(PartitionStatsBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> PartitionStatsQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(PartitionStatsBorrowed) -> R,
    ) -> PartitionStatsQuery<'c, 'a, 's, C, R, N> {
        PartitionStatsQuery {
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
pub struct VecStringQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor:
        fn(&tokio_postgres::Row) -> Result<crate::ArrayIterator<'_, &str>, tokio_postgres::Error>,
    mapper: fn(crate::ArrayIterator<'_, &str>) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> VecStringQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(crate::ArrayIterator<'_, &str>) -> R,
    ) -> VecStringQuery<'c, 'a, 's, C, R, N> {
        VecStringQuery {
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
pub struct PartitionLockBudgetQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<PartitionLockBudget, tokio_postgres::Error>,
    mapper: fn(PartitionLockBudget) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> PartitionLockBudgetQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(PartitionLockBudget) -> R,
    ) -> PartitionLockBudgetQuery<'c, 'a, 's, C, R, N> {
        PartitionLockBudgetQuery {
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
pub struct MaintainerRoleQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<MaintainerRoleBorrowed, tokio_postgres::Error>,
    mapper: fn(MaintainerRoleBorrowed) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> MaintainerRoleQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(
        self,
        mapper: fn(MaintainerRoleBorrowed) -> R,
    ) -> MaintainerRoleQuery<'c, 'a, 's, C, R, N> {
        MaintainerRoleQuery {
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
pub struct PartitionsConvertStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitions_convert() -> PartitionsConvertStmt {
    PartitionsConvertStmt(
        "SELECT outbox_partitions_convert($1::text, $2::int) AS report",
        None,
    )
}
impl PartitionsConvertStmt {
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
        granularity: &'a T1,
        ahead: &'a i32,
    ) -> StringQuery<'c, 'a, 's, C, String, 2> {
        StringQuery {
            client,
            params: [granularity, ahead],
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
        PartitionsConvertParams<T1>,
        StringQuery<'c, 'a, 's, C, String, 2>,
        C,
    > for PartitionsConvertStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a PartitionsConvertParams<T1>,
    ) -> StringQuery<'c, 'a, 's, C, String, 2> {
        self.bind(client, &params.granularity, &params.ahead)
    }
}
pub struct EnsureChecksStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn ensure_checks() -> EnsureChecksStmt {
    EnsureChecksStmt("SELECT outbox_events_ensure_checks()::text AS done", None)
}
impl EnsureChecksStmt {
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
    ) -> StringQuery<'c, 'a, 's, C, String, 0> {
        StringQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it.into(),
        }
    }
}
pub struct PartitioningSettingsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitioning_settings() -> PartitioningSettingsStmt {
    PartitioningSettingsStmt(
        "SELECT granularity, ahead, maintained_at, retention_secs, kept_partitions, kept_events FROM outbox_partitioning",
        None,
    )
}
impl PartitioningSettingsStmt {
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
    ) -> PartitioningSettingsQuery<'c, 'a, 's, C, PartitioningSettings, 0> {
        PartitioningSettingsQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |
                row: &tokio_postgres::Row,
            | -> Result<PartitioningSettingsBorrowed, tokio_postgres::Error> {
                Ok(PartitioningSettingsBorrowed {
                    granularity: row.try_get(0)?,
                    ahead: row.try_get(1)?,
                    maintained_at: row.try_get(2)?,
                    retention_secs: row.try_get(3)?,
                    kept_partitions: row.try_get(4)?,
                    kept_events: row.try_get(5)?,
                })
            },
            mapper: |it| PartitioningSettings::from(it),
        }
    }
}
pub struct PartitionsMaintainedStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitions_maintained() -> PartitionsMaintainedStmt {
    PartitionsMaintainedStmt("UPDATE outbox_partitioning SET maintained_at = now()", None)
}
impl PartitionsMaintainedStmt {
    pub async fn prepare<'a, C: GenericClient>(
        mut self,
        client: &'a C,
    ) -> Result<Self, tokio_postgres::Error> {
        self.1 = Some(client.prepare(self.0).await?);
        Ok(self)
    }
    pub async fn bind<'c, 'a, 's, C: GenericClient>(
        &'s self,
        client: &'c C,
    ) -> Result<u64, tokio_postgres::Error> {
        client.execute(self.0, &[]).await
    }
}
pub struct PartitionsTailStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitions_tail() -> PartitionsTailStmt {
    PartitionsTailStmt(
        "SELECT granularity, wanted, tail_lo, tail_rows, tail_detach_pending, carve_safe FROM outbox_partitions_tail()",
        None,
    )
}
impl PartitionsTailStmt {
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
    ) -> PartitionsTailQuery<'c, 'a, 's, C, PartitionsTail, 0> {
        PartitionsTailQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |
                row: &tokio_postgres::Row,
            | -> Result<PartitionsTailBorrowed, tokio_postgres::Error> {
                Ok(PartitionsTailBorrowed {
                    granularity: row.try_get(0)?,
                    wanted: row.try_get(1)?,
                    tail_lo: row.try_get(2)?,
                    tail_rows: row.try_get(3)?,
                    tail_detach_pending: row.try_get(4)?,
                    carve_safe: row.try_get(5)?,
                })
            },
            mapper: |it| PartitionsTail::from(it),
        }
    }
}
pub struct PartitionsCarveStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitions_carve() -> PartitionsCarveStmt {
    PartitionsCarveStmt("SELECT outbox_partitions_carve($1) AS created", None)
}
impl PartitionsCarveStmt {
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
        wanted: &'a chrono::DateTime<chrono::Utc>,
    ) -> I32Query<'c, 'a, 's, C, i32, 1> {
        I32Query {
            client,
            params: [wanted],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct PartitionsDrainTailStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitions_drain_tail() -> PartitionsDrainTailStmt {
    PartitionsDrainTailStmt(
        "SELECT outbox_partitions_drain_tail($1, $2::int) AS moved",
        None,
    )
}
impl PartitionsDrainTailStmt {
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
        wanted: &'a chrono::DateTime<chrono::Utc>,
        lock_timeout_ms: &'a i32,
    ) -> I64Query<'c, 'a, 's, C, i64, 2> {
        I64Query {
            client,
            params: [wanted, lock_timeout_ms],
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
        PartitionsDrainTailParams,
        I64Query<'c, 'a, 's, C, i64, 2>,
        C,
    > for PartitionsDrainTailStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a PartitionsDrainTailParams,
    ) -> I64Query<'c, 'a, 's, C, i64, 2> {
        self.bind(client, &params.wanted, &params.lock_timeout_ms)
    }
}
pub struct PartitionsTailRowsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitions_tail_rows() -> PartitionsTailRowsStmt {
    PartitionsTailRowsStmt(
        "SELECT count(*) AS n FROM outbox_events WHERE created_at >= (SELECT lo FROM outbox_partition_list() WHERE name = 'outbox_events_p_tail')",
        None,
    )
}
impl PartitionsTailRowsStmt {
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
pub struct PartitionsSettleStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitions_settle() -> PartitionsSettleStmt {
    PartitionsSettleStmt(
        "SELECT settled_before, needed FROM outbox_partitions_settle($1::float8)",
        None,
    )
}
impl PartitionsSettleStmt {
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
        retention_secs: &'a f64,
    ) -> PartitionsSettleQuery<'c, 'a, 's, C, PartitionsSettle, 1> {
        PartitionsSettleQuery {
            client,
            params: [retention_secs],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<PartitionsSettle, tokio_postgres::Error> {
                    Ok(PartitionsSettle {
                        settled_before: row.try_get(0)?,
                        needed: row.try_get(1)?,
                    })
                },
            mapper: |it| PartitionsSettle::from(it),
        }
    }
}
pub struct PartitionsExpiredStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitions_expired() -> PartitionsExpiredStmt {
    PartitionsExpiredStmt(
        "SELECT name, lo, hi, droppable, leftovers, detach_pending, settling, CASE WHEN leftovers > 0 THEN outbox_partition_unpublished(name) ELSE 0 END AS unpublished FROM outbox_partitions_expired($1::float8)",
        None,
    )
}
impl PartitionsExpiredStmt {
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
        retention_secs: &'a f64,
    ) -> PartitionsExpiredQuery<'c, 'a, 's, C, PartitionsExpired, 1> {
        PartitionsExpiredQuery {
            client,
            params: [retention_secs],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |
                row: &tokio_postgres::Row,
            | -> Result<PartitionsExpiredBorrowed, tokio_postgres::Error> {
                Ok(PartitionsExpiredBorrowed {
                    name: row.try_get(0)?,
                    lo: row.try_get(1)?,
                    hi: row.try_get(2)?,
                    droppable: row.try_get(3)?,
                    leftovers: row.try_get(4)?,
                    detach_pending: row.try_get(5)?,
                    settling: row.try_get(6)?,
                    unpublished: row.try_get(7)?,
                })
            },
            mapper: |it| PartitionsExpired::from(it),
        }
    }
}
pub struct PartitionUnpublishedStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partition_unpublished() -> PartitionUnpublishedStmt {
    PartitionUnpublishedStmt(
        "SELECT outbox_partition_unpublished($1::text) AS unpublished",
        None,
    )
}
impl PartitionUnpublishedStmt {
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
        name: &'a T1,
    ) -> I64Query<'c, 'a, 's, C, i64, 1> {
        I64Query {
            client,
            params: [name],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct PartitionsOrphanedStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitions_orphaned() -> PartitionsOrphanedStmt {
    PartitionsOrphanedStmt(
        "SELECT name, lo, hi FROM outbox_partitions_orphaned($1::float8)",
        None,
    )
}
impl PartitionsOrphanedStmt {
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
        retention_secs: &'a f64,
    ) -> PartitionsOrphanedQuery<'c, 'a, 's, C, PartitionsOrphaned, 1> {
        PartitionsOrphanedQuery {
            client,
            params: [retention_secs],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |
                row: &tokio_postgres::Row,
            | -> Result<PartitionsOrphanedBorrowed, tokio_postgres::Error> {
                Ok(PartitionsOrphanedBorrowed {
                    name: row.try_get(0)?,
                    lo: row.try_get(1)?,
                    hi: row.try_get(2)?,
                })
            },
            mapper: |it| PartitionsOrphaned::from(it),
        }
    }
}
pub struct PartitionDropDetachedStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partition_drop_detached() -> PartitionDropDetachedStmt {
    PartitionDropDetachedStmt(
        "SELECT outbox_partition_drop_detached($1::text, $2::timestamptz, $3::timestamptz, $4::float8) AS dropped",
        None,
    )
}
impl PartitionDropDetachedStmt {
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
        name: &'a T1,
        lo: &'a Option<chrono::DateTime<chrono::Utc>>,
        hi: &'a chrono::DateTime<chrono::Utc>,
        retention_secs: &'a f64,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 4> {
        BoolQuery {
            client,
            params: [name, lo, hi, retention_secs],
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
        PartitionDropDetachedParams<T1>,
        BoolQuery<'c, 'a, 's, C, bool, 4>,
        C,
    > for PartitionDropDetachedStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a PartitionDropDetachedParams<T1>,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 4> {
        self.bind(
            client,
            &params.name,
            &params.lo,
            &params.hi,
            &params.retention_secs,
        )
    }
}
pub struct PartitionsDropLegacyStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partitions_drop_legacy() -> PartitionsDropLegacyStmt {
    PartitionsDropLegacyStmt(
        "SELECT outbox_partitions_drop_legacy($1::float8) AS dropped",
        None,
    )
}
impl PartitionsDropLegacyStmt {
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
        retention_secs: &'a f64,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 1> {
        BoolQuery {
            client,
            params: [retention_secs],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct TryMaintenanceLockStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn try_maintenance_lock() -> TryMaintenanceLockStmt {
    TryMaintenanceLockStmt("SELECT pg_try_advisory_lock($1) AS locked", None)
}
impl TryMaintenanceLockStmt {
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
        key: &'a i64,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 1> {
        BoolQuery {
            client,
            params: [key],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct MaintenanceUnlockStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn maintenance_unlock() -> MaintenanceUnlockStmt {
    MaintenanceUnlockStmt("SELECT pg_advisory_unlock($1) AS unlocked", None)
}
impl MaintenanceUnlockStmt {
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
        key: &'a i64,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 1> {
        BoolQuery {
            client,
            params: [key],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct PartitionListStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partition_list() -> PartitionListStmt {
    PartitionListStmt(
        "SELECT l.name, l.lo, l.hi, l.detach_pending, CASE WHEN pg_relation_size(c.oid) = 0 THEN 0 WHEN c.reltuples < 0 THEN nullif(pg_stat_get_live_tuples(c.oid), 0) ELSE c.reltuples::int8 END AS estimated_rows FROM outbox_partition_list() l JOIN pg_class c ON c.oid = to_regclass(l.name) ORDER BY l.lo NULLS FIRST",
        None,
    )
}
impl PartitionListStmt {
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
    ) -> PartitionListQuery<'c, 'a, 's, C, PartitionList, 0> {
        PartitionListQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<PartitionListBorrowed, tokio_postgres::Error> {
                    Ok(PartitionListBorrowed {
                        name: row.try_get(0)?,
                        lo: row.try_get(1)?,
                        hi: row.try_get(2)?,
                        detach_pending: row.try_get(3)?,
                        estimated_rows: row.try_get(4)?,
                    })
                },
            mapper: |it| PartitionList::from(it),
        }
    }
}
pub struct EventsPartitionedStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn events_partitioned() -> EventsPartitionedStmt {
    EventsPartitionedStmt(
        "SELECT coalesce((SELECT c.relkind = 'p' FROM pg_class c WHERE c.oid = to_regclass('outbox_events')), false) AS partitioned",
        None,
    )
}
impl EventsPartitionedStmt {
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
pub struct PartitionStatsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partition_stats() -> PartitionStatsStmt {
    PartitionStatsStmt(
        "SELECT p.granularity, (SELECT count(*) FROM outbox_partition_list() l WHERE l.name <> 'outbox_events_p_tail') AS partitions, (SELECT count(*) FROM outbox_events e WHERE e.created_at >= (SELECT l.lo FROM outbox_partition_list() l WHERE l.name = 'outbox_events_p_tail')) AS tail_events, p.kept_partitions, p.kept_events, p.maintained_at, to_regclass('outbox_events_legacy') IS NOT NULL AS legacy_table, EXISTS (SELECT 1 FROM outbox_partition_list() l WHERE l.name = 'outbox_events_p_tail' AND NOT l.detach_pending) AS tail_attached FROM outbox_partitioning p",
        None,
    )
}
impl PartitionStatsStmt {
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
    ) -> PartitionStatsQuery<'c, 'a, 's, C, PartitionStats, 0> {
        PartitionStatsQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |
                row: &tokio_postgres::Row,
            | -> Result<PartitionStatsBorrowed, tokio_postgres::Error> {
                Ok(PartitionStatsBorrowed {
                    granularity: row.try_get(0)?,
                    partitions: row.try_get(1)?,
                    tail_events: row.try_get(2)?,
                    kept_partitions: row.try_get(3)?,
                    kept_events: row.try_get(4)?,
                    maintained_at: row.try_get(5)?,
                    legacy_table: row.try_get(6)?,
                    tail_attached: row.try_get(7)?,
                })
            },
            mapper: |it| PartitionStats::from(it),
        }
    }
}
pub struct TableLockersStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn table_lockers() -> TableLockersStmt {
    TableLockersStmt("SELECT outbox_events_lockers() AS lockers", None)
}
impl TableLockersStmt {
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
    ) -> VecStringQuery<'c, 'a, 's, C, Vec<String>, 0> {
        VecStringQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it.map(|v| v.into()).collect(),
        }
    }
}
pub struct PartitionLockBudgetStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn partition_lock_budget() -> PartitionLockBudgetStmt {
    PartitionLockBudgetStmt(
        "SELECT (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = 'outbox_events'::regclass) AS partitions, (SELECT count(*) FROM pg_index x WHERE x.indrelid = 'outbox_events'::regclass) AS indexes, current_setting('max_locks_per_transaction')::int8 * (current_setting('max_connections')::int8 + current_setting('max_prepared_transactions')::int8) AS lock_slots",
        None,
    )
}
impl PartitionLockBudgetStmt {
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
    ) -> PartitionLockBudgetQuery<'c, 'a, 's, C, PartitionLockBudget, 0> {
        PartitionLockBudgetQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor:
                |row: &tokio_postgres::Row| -> Result<PartitionLockBudget, tokio_postgres::Error> {
                    Ok(PartitionLockBudget {
                        partitions: row.try_get(0)?,
                        indexes: row.try_get(1)?,
                        lock_slots: row.try_get(2)?,
                    })
                },
            mapper: |it| PartitionLockBudget::from(it),
        }
    }
}
pub struct MaintainerRoleStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn maintainer_role() -> MaintainerRoleStmt {
    MaintainerRoleStmt(
        "SELECT current_user::text AS role, pg_get_userbyid(c.relowner)::text AS owner, pg_has_role(current_user, c.relowner, 'USAGE') AS may FROM pg_class c WHERE c.oid = 'outbox_events'::regclass",
        None,
    )
}
impl MaintainerRoleStmt {
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
    ) -> MaintainerRoleQuery<'c, 'a, 's, C, MaintainerRole, 0> {
        MaintainerRoleQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |
                row: &tokio_postgres::Row,
            | -> Result<MaintainerRoleBorrowed, tokio_postgres::Error> {
                Ok(MaintainerRoleBorrowed {
                    role: row.try_get(0)?,
                    owner: row.try_get(1)?,
                    may: row.try_get(2)?,
                })
            },
            mapper: |it| MaintainerRole::from(it),
        }
    }
}
pub struct ReownPartitionsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn reown_partitions() -> ReownPartitionsStmt {
    ReownPartitionsStmt("SELECT outbox_partitions_reown() AS left_over", None)
}
impl ReownPartitionsStmt {
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
    ) -> VecStringQuery<'c, 'a, 's, C, Vec<String>, 0> {
        VecStringQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it.map(|v| v.into()).collect(),
        }
    }
}
pub struct SetAheadStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn set_ahead() -> SetAheadStmt {
    SetAheadStmt(
        "UPDATE outbox_partitioning p SET ahead = $1::int FROM (SELECT ahead AS former FROM outbox_partitioning) f WHERE p.ahead <> $1::int RETURNING f.former",
        None,
    )
}
impl SetAheadStmt {
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
        ahead: &'a i32,
    ) -> I32Query<'c, 'a, 's, C, i32, 1> {
        I32Query {
            client,
            params: [ahead],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
