// This file was generated with `cornucopia`. Do not modify.

#[derive(Debug)]
pub struct InsertOutboxEventParams<
    T1: crate::StringSql,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::JsonSql,
    T5: crate::JsonSql,
> {
    pub aggregate_type: T1,
    pub aggregate_id: T2,
    pub id: uuid::Uuid,
    pub event_type: T3,
    pub payload: T4,
    pub metadata: T5,
}
#[derive(Debug)]
pub struct InsertOutboxEventsParams<
    T1: crate::StringSql,
    T2: crate::ArraySql<Item = T1>,
    T3: crate::StringSql,
    T4: crate::ArraySql<Item = T3>,
    T5: crate::ArraySql<Item = uuid::Uuid>,
    T6: crate::StringSql,
    T7: crate::ArraySql<Item = T6>,
    T8: crate::JsonSql,
    T9: crate::ArraySql<Item = T8>,
    T10: crate::JsonSql,
    T11: crate::ArraySql<Item = T10>,
> {
    pub aggregate_types: T2,
    pub aggregate_ids: T4,
    pub ids: T5,
    pub event_types: T7,
    pub payloads: T9,
    pub metadata: T11,
}
#[derive(Debug)]
pub struct InsertOutboxEventUnorderedParams<
    T1: crate::StringSql,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::JsonSql,
    T5: crate::JsonSql,
> {
    pub aggregate_type: T1,
    pub aggregate_id: T2,
    pub id: uuid::Uuid,
    pub event_type: T3,
    pub payload: T4,
    pub metadata: T5,
}
#[derive(Debug)]
pub struct InsertOutboxEventsUnorderedParams<
    T1: crate::StringSql,
    T2: crate::ArraySql<Item = T1>,
    T3: crate::StringSql,
    T4: crate::ArraySql<Item = T3>,
    T5: crate::ArraySql<Item = uuid::Uuid>,
    T6: crate::StringSql,
    T7: crate::ArraySql<Item = T6>,
    T8: crate::JsonSql,
    T9: crate::ArraySql<Item = T8>,
    T10: crate::JsonSql,
    T11: crate::ArraySql<Item = T10>,
> {
    pub aggregate_types: T2,
    pub aggregate_ids: T4,
    pub ids: T5,
    pub event_types: T7,
    pub payloads: T9,
    pub metadata: T11,
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
pub struct InsertOutboxEventStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn insert_outbox_event() -> InsertOutboxEventStmt {
    InsertOutboxEventStmt(
        "WITH aggregate_lock AS ( SELECT pg_advisory_xact_lock(hashtextextended($1::text || E'\\x1f' || $2::text, 0)) ) INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload, metadata) SELECT $3::uuid, $1::text, $2::text, $4::text, $5::jsonb, $6::jsonb FROM aggregate_lock RETURNING id",
        None,
    )
}
impl InsertOutboxEventStmt {
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
        T2: crate::StringSql,
        T3: crate::StringSql,
        T4: crate::JsonSql,
        T5: crate::JsonSql,
    >(
        &'s self,
        client: &'c C,
        aggregate_type: &'a T1,
        aggregate_id: &'a T2,
        id: &'a uuid::Uuid,
        event_type: &'a T3,
        payload: &'a T4,
        metadata: &'a T5,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6> {
        UuidUuidQuery {
            client,
            params: [
                aggregate_type,
                aggregate_id,
                id,
                event_type,
                payload,
                metadata,
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
    T1: crate::StringSql,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::JsonSql,
    T5: crate::JsonSql,
>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        InsertOutboxEventParams<T1, T2, T3, T4, T5>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6>,
        C,
    > for InsertOutboxEventStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a InsertOutboxEventParams<T1, T2, T3, T4, T5>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6> {
        self.bind(
            client,
            &params.aggregate_type,
            &params.aggregate_id,
            &params.id,
            &params.event_type,
            &params.payload,
            &params.metadata,
        )
    }
}
pub struct InsertOutboxEventsStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn insert_outbox_events() -> InsertOutboxEventsStmt {
    InsertOutboxEventsStmt(
        "WITH keys AS ( SELECT DISTINCT hashtextextended(t || E'\\x1f' || i, 0) AS k FROM unnest($1::text[], $2::text[]) AS a(t, i) ORDER BY k ), aggregate_locks AS ( SELECT count(*) AS n FROM (SELECT pg_advisory_xact_lock(k) FROM keys) l ), inserted AS ( INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload, metadata) SELECT id, aggregate_type, aggregate_id, event_type, payload, metadata FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::jsonb[], $6::jsonb[]) WITH ORDINALITY AS e(aggregate_type, aggregate_id, id, event_type, payload, metadata, ord), aggregate_locks ORDER BY ord RETURNING id, seq ) SELECT id FROM inserted ORDER BY seq",
        None,
    )
}
impl InsertOutboxEventsStmt {
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
        T5: crate::ArraySql<Item = uuid::Uuid>,
        T6: crate::StringSql,
        T7: crate::ArraySql<Item = T6>,
        T8: crate::JsonSql,
        T9: crate::ArraySql<Item = T8>,
        T10: crate::JsonSql,
        T11: crate::ArraySql<Item = T10>,
    >(
        &'s self,
        client: &'c C,
        aggregate_types: &'a T2,
        aggregate_ids: &'a T4,
        ids: &'a T5,
        event_types: &'a T7,
        payloads: &'a T9,
        metadata: &'a T11,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6> {
        UuidUuidQuery {
            client,
            params: [
                aggregate_types,
                aggregate_ids,
                ids,
                event_types,
                payloads,
                metadata,
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
    T1: crate::StringSql,
    T2: crate::ArraySql<Item = T1>,
    T3: crate::StringSql,
    T4: crate::ArraySql<Item = T3>,
    T5: crate::ArraySql<Item = uuid::Uuid>,
    T6: crate::StringSql,
    T7: crate::ArraySql<Item = T6>,
    T8: crate::JsonSql,
    T9: crate::ArraySql<Item = T8>,
    T10: crate::JsonSql,
    T11: crate::ArraySql<Item = T10>,
>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        InsertOutboxEventsParams<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6>,
        C,
    > for InsertOutboxEventsStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a InsertOutboxEventsParams<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6> {
        self.bind(
            client,
            &params.aggregate_types,
            &params.aggregate_ids,
            &params.ids,
            &params.event_types,
            &params.payloads,
            &params.metadata,
        )
    }
}
pub struct InsertOutboxEventUnorderedStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn insert_outbox_event_unordered() -> InsertOutboxEventUnorderedStmt {
    InsertOutboxEventUnorderedStmt(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, id, event_type, payload, metadata) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        None,
    )
}
impl InsertOutboxEventUnorderedStmt {
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
        T2: crate::StringSql,
        T3: crate::StringSql,
        T4: crate::JsonSql,
        T5: crate::JsonSql,
    >(
        &'s self,
        client: &'c C,
        aggregate_type: &'a T1,
        aggregate_id: &'a T2,
        id: &'a uuid::Uuid,
        event_type: &'a T3,
        payload: &'a T4,
        metadata: &'a T5,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6> {
        UuidUuidQuery {
            client,
            params: [
                aggregate_type,
                aggregate_id,
                id,
                event_type,
                payload,
                metadata,
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
    T1: crate::StringSql,
    T2: crate::StringSql,
    T3: crate::StringSql,
    T4: crate::JsonSql,
    T5: crate::JsonSql,
>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        InsertOutboxEventUnorderedParams<T1, T2, T3, T4, T5>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6>,
        C,
    > for InsertOutboxEventUnorderedStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a InsertOutboxEventUnorderedParams<T1, T2, T3, T4, T5>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6> {
        self.bind(
            client,
            &params.aggregate_type,
            &params.aggregate_id,
            &params.id,
            &params.event_type,
            &params.payload,
            &params.metadata,
        )
    }
}
pub struct InsertOutboxEventsUnorderedStmt(&'static str, Option<tokio_postgres::Statement>);
pub fn insert_outbox_events_unordered() -> InsertOutboxEventsUnorderedStmt {
    InsertOutboxEventsUnorderedStmt(
        "WITH inserted AS ( INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload, metadata) SELECT id, aggregate_type, aggregate_id, event_type, payload, metadata FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::jsonb[], $6::jsonb[]) WITH ORDINALITY AS e(aggregate_type, aggregate_id, id, event_type, payload, metadata, ord) ORDER BY ord RETURNING id, seq ) SELECT id FROM inserted ORDER BY seq",
        None,
    )
}
impl InsertOutboxEventsUnorderedStmt {
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
        T5: crate::ArraySql<Item = uuid::Uuid>,
        T6: crate::StringSql,
        T7: crate::ArraySql<Item = T6>,
        T8: crate::JsonSql,
        T9: crate::ArraySql<Item = T8>,
        T10: crate::JsonSql,
        T11: crate::ArraySql<Item = T10>,
    >(
        &'s self,
        client: &'c C,
        aggregate_types: &'a T2,
        aggregate_ids: &'a T4,
        ids: &'a T5,
        event_types: &'a T7,
        payloads: &'a T9,
        metadata: &'a T11,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6> {
        UuidUuidQuery {
            client,
            params: [
                aggregate_types,
                aggregate_ids,
                ids,
                event_types,
                payloads,
                metadata,
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
    T1: crate::StringSql,
    T2: crate::ArraySql<Item = T1>,
    T3: crate::StringSql,
    T4: crate::ArraySql<Item = T3>,
    T5: crate::ArraySql<Item = uuid::Uuid>,
    T6: crate::StringSql,
    T7: crate::ArraySql<Item = T6>,
    T8: crate::JsonSql,
    T9: crate::ArraySql<Item = T8>,
    T10: crate::JsonSql,
    T11: crate::ArraySql<Item = T10>,
>
    crate::client::async_::Params<
        'c,
        'a,
        's,
        InsertOutboxEventsUnorderedParams<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11>,
        UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6>,
        C,
    > for InsertOutboxEventsUnorderedStmt
{
    fn params(
        &'s self,
        client: &'c C,
        params: &'a InsertOutboxEventsUnorderedParams<T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11>,
    ) -> UuidUuidQuery<'c, 'a, 's, C, uuid::Uuid, 6> {
        self.bind(
            client,
            &params.aggregate_types,
            &params.aggregate_ids,
            &params.ids,
            &params.event_types,
            &params.payloads,
            &params.metadata,
        )
    }
}
