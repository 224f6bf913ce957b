// This file was generated with `cornucopia`. Do not modify.

#[derive(Clone, Copy, Debug)]
pub struct EndStalledSessionParams {
    pub pid: i32,
    pub started_us: i64,
}
#[derive(Clone, Copy, Debug)]
pub struct SessionStateParams {
    pub pid: i32,
    pub started_us: i64,
}
#[derive(Clone, Copy, Debug)]
pub struct EndIdleSessionParams {
    pub pid: i32,
    pub started_us: i64,
    pub state_change_us: i64,
}
#[derive(Debug, Clone, PartialEq, Copy, serde::Serialize)]
pub struct ThisSession {
    pub pid: i32,
    pub started_us: i64,
}
#[derive(Debug, Clone, PartialEq, Copy, serde::Serialize)]
pub struct SessionState {
    pub idle_us: Option<i64>,
    pub in_transaction: bool,
    pub state_change_us: Option<i64>,
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
pub struct ThisSessionQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<ThisSession, tokio_postgres::Error>,
    mapper: fn(ThisSession) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> ThisSessionQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(ThisSession) -> R) -> ThisSessionQuery<'c, 'a, 's, C, R, N> {
        ThisSessionQuery {
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
pub struct SessionStateQuery<'c, 'a, 's, C: GenericClient, T, const N: usize> {
    client: &'c C,
    params: [&'a (dyn postgres_types::ToSql + Sync); N],
    query: &'static str,
    cached: Option<&'s tokio_postgres::Statement>,
    extractor: fn(&tokio_postgres::Row) -> Result<SessionState, tokio_postgres::Error>,
    mapper: fn(SessionState) -> T,
}
impl<'c, 'a, 's, C, T: 'c, const N: usize> SessionStateQuery<'c, 'a, 's, C, T, N>
where
    C: GenericClient,
{
    pub fn map<R>(self, mapper: fn(SessionState) -> R) -> SessionStateQuery<'c, 'a, 's, C, R, N> {
        SessionStateQuery {
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
pub struct ListenOutboxEventsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn listen_outbox_events() -> ListenOutboxEventsStmt {
    ListenOutboxEventsStmt("LISTEN outbox_events", None)
}
impl ListenOutboxEventsStmt {
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
pub struct ListenerAliveStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn listener_alive() -> ListenerAliveStmt {
    ListenerAliveStmt("SELECT 1 AS alive", None)
}
impl ListenerAliveStmt {
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
    ) -> I32Query<'c, 'a, 's, C, i32, 0> {
        I32Query {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row| Ok(row.try_get(0)?),
            mapper: |it| it,
        }
    }
}
pub struct AdvertiseWaitingStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn advertise_waiting() -> AdvertiseWaitingStmt {
    AdvertiseWaitingStmt(
        "SELECT count(*) AS n FROM (SELECT pg_advisory_lock(1869968504, 1)) l",
        None,
    )
}
impl AdvertiseWaitingStmt {
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
pub struct StopAdvertisingWaitingStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn stop_advertising_waiting() -> StopAdvertisingWaitingStmt {
    StopAdvertisingWaitingStmt("SELECT pg_advisory_unlock(1869968504, 1) AS released", None)
}
impl StopAdvertisingWaitingStmt {
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
pub struct ThisSessionStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn this_session() -> ThisSessionStmt {
    ThisSessionStmt(
        "SELECT pid, (extract(epoch FROM backend_start) * 1000000)::bigint AS started_us FROM pg_stat_activity WHERE pid = pg_backend_pid()",
        None,
    )
}
impl ThisSessionStmt {
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
    ) -> ThisSessionQuery<'c, 'a, 's, C, ThisSession, 0> {
        ThisSessionQuery {
            client,
            params: [],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row: &tokio_postgres::Row| -> Result<ThisSession, tokio_postgres::Error> {
                Ok(ThisSession {
                    pid: row.try_get(0)?,
                    started_us: row.try_get(1)?,
                })
            },
            mapper: |it| ThisSession::from(it),
        }
    }
}
pub struct EndStalledSessionStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn end_stalled_session() -> EndStalledSessionStmt {
    EndStalledSessionStmt(
        "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE pid = $1 AND (extract(epoch FROM backend_start) * 1000000)::bigint = $2",
        None,
    )
}
impl EndStalledSessionStmt {
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
        pid: &'a i32,
        started_us: &'a i64,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 2> {
        BoolQuery {
            client,
            params: [pid, started_us],
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
        EndStalledSessionParams,
        BoolQuery<'c, 'a, 's, C, bool, 2>,
        C,
    > for EndStalledSessionStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a EndStalledSessionParams,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 2> {
        self.bind(client, &params.pid, &params.started_us)
    }
}
pub struct SessionStateStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn session_state() -> SessionStateStmt {
    SessionStateStmt(
        "SELECT CASE WHEN state LIKE 'idle%' THEN (extract(epoch FROM clock_timestamp() - state_change) * 1000000)::bigint END AS idle_us, coalesce(state LIKE 'idle in transaction%', false) AS in_transaction, (extract(epoch FROM state_change) * 1000000)::bigint AS state_change_us FROM pg_stat_activity WHERE pid = $1 AND (extract(epoch FROM backend_start) * 1000000)::bigint = $2",
        None,
    )
}
impl SessionStateStmt {
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
        pid: &'a i32,
        started_us: &'a i64,
    ) -> SessionStateQuery<'c, 'a, 's, C, SessionState, 2> {
        SessionStateQuery {
            client,
            params: [pid, started_us],
            query: self.0,
            cached: self.1.as_ref(),
            extractor: |row: &tokio_postgres::Row| -> Result<SessionState, tokio_postgres::Error> {
                Ok(SessionState {
                    idle_us: row.try_get(0)?,
                    in_transaction: row.try_get(1)?,
                    state_change_us: row.try_get(2)?,
                })
            },
            mapper: |it| SessionState::from(it),
        }
    }
}
impl<'c, 'a, 's, C: GenericClient>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        SessionStateParams,
        SessionStateQuery<'c, 'a, 's, C, SessionState, 2>,
        C,
    > for SessionStateStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a SessionStateParams,
    ) -> SessionStateQuery<'c, 'a, 's, C, SessionState, 2> {
        self.bind(client, &params.pid, &params.started_us)
    }
}
pub struct EndIdleSessionStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn end_idle_session() -> EndIdleSessionStmt {
    EndIdleSessionStmt(
        "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE pid = $1 AND (extract(epoch FROM backend_start) * 1000000)::bigint = $2 AND state LIKE 'idle%' AND (extract(epoch FROM state_change) * 1000000)::bigint = $3",
        None,
    )
}
impl EndIdleSessionStmt {
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
        pid: &'a i32,
        started_us: &'a i64,
        state_change_us: &'a i64,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 3> {
        BoolQuery {
            client,
            params: [pid, started_us, state_change_us],
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
        EndIdleSessionParams,
        BoolQuery<'c, 'a, 's, C, bool, 3>,
        C,
    > for EndIdleSessionStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a EndIdleSessionParams,
    ) -> BoolQuery<'c, 'a, 's, C, bool, 3> {
        self.bind(
            client,
            &params.pid,
            &params.started_us,
            &params.state_change_us,
        )
    }
}
