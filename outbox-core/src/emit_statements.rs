//! The text of `queries/emit.sql`'s statements, for clients without a statement cache.
//!
//! On a `tokio_postgres` client or transaction (no statement cache), emit sends its statement with
//! `query_typed`: parse, bind and execute in one round trip, issued on the future's first poll, so
//! it pipelines with statements the caller issues at the same time. That needs the SQL text, which
//! the generated crate keeps private: these constants are copies of it (as cornucopia writes it,
//! whitespace collapsed and named parameters numbered), and a test checks each against what the
//! generated statement prepares, so they cannot drift from `queries/emit.sql`.

/// `insert_outbox_event` (parameters: aggregate type(s), aggregate id(s), id(s), event type(s), payload(s),
/// metadata).
pub(crate) const INSERT_OUTBOX_EVENT: &str = "WITH aggregate_lock AS ( SELECT pg_advisory_xact_lock(hashtextextended($1::text || E'\\x1f' || $2::text, 0)) ) INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload, metadata) SELECT $3::uuid, $1::text, $2::text, $4::text, $5::jsonb, $6::jsonb FROM aggregate_lock RETURNING id";
/// `insert_outbox_events` (parameters: aggregate type(s), aggregate id(s), id(s), event type(s), payload(s),
/// metadata).
pub(crate) const INSERT_OUTBOX_EVENTS: &str = "WITH keys AS ( SELECT DISTINCT hashtextextended(t || E'\\x1f' || i, 0) AS k FROM unnest($1::text[], $2::text[]) AS a(t, i) ORDER BY k ), aggregate_locks AS ( SELECT count(*) AS n FROM (SELECT pg_advisory_xact_lock(k) FROM keys) l ), inserted AS ( INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload, metadata) SELECT id, aggregate_type, aggregate_id, event_type, payload, metadata FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::jsonb[], $6::jsonb[]) WITH ORDINALITY AS e(aggregate_type, aggregate_id, id, event_type, payload, metadata, ord), aggregate_locks ORDER BY ord RETURNING id, seq ) SELECT id FROM inserted ORDER BY seq";
/// `insert_outbox_event_unordered` (parameters: aggregate type(s), aggregate id(s), id(s), event type(s), payload(s),
/// metadata).
pub(crate) const INSERT_OUTBOX_EVENT_UNORDERED: &str = "INSERT INTO outbox_events (aggregate_type, aggregate_id, id, event_type, payload, metadata) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id";
/// `insert_outbox_events_unordered` (parameters: aggregate type(s), aggregate id(s), id(s), event type(s), payload(s),
/// metadata).
pub(crate) const INSERT_OUTBOX_EVENTS_UNORDERED: &str = "WITH inserted AS ( INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload, metadata) SELECT id, aggregate_type, aggregate_id, event_type, payload, metadata FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::jsonb[], $6::jsonb[]) WITH ORDINALITY AS e(aggregate_type, aggregate_id, id, event_type, payload, metadata, ord) ORDER BY ord RETURNING id, seq ) SELECT id FROM inserted ORDER BY seq";

#[cfg(test)]
mod tests {
    use outbox_queries::queries::emit as generated;

    /// The texts of the statements `client` holds prepared.
    async fn prepared(client: &tokio_postgres::Client) -> Vec<String> {
        client
            .query("SELECT statement FROM pg_prepared_statements", &[])
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    }

    #[tokio::test]
    async fn each_copy_is_the_text_the_generated_statement_prepares() {
        let db = outbox_tests::TestDb::new().await;
        let c = db.connect().await;
        // Each generated statement stays prepared (alive) while the server's copy is read.
        let kept = generated::insert_outbox_event().prepare(&c).await.unwrap();
        assert!(
            prepared(&c)
                .await
                .contains(&super::INSERT_OUTBOX_EVENT.to_owned())
        );
        drop(kept);
        let kept = generated::insert_outbox_events().prepare(&c).await.unwrap();
        assert!(
            prepared(&c)
                .await
                .contains(&super::INSERT_OUTBOX_EVENTS.to_owned())
        );
        drop(kept);
        let kept = generated::insert_outbox_event_unordered()
            .prepare(&c)
            .await
            .unwrap();
        let unordered = super::INSERT_OUTBOX_EVENT_UNORDERED.to_owned();
        assert!(prepared(&c).await.contains(&unordered));
        drop(kept);
        let kept = generated::insert_outbox_events_unordered()
            .prepare(&c)
            .await
            .unwrap();
        let unordered = super::INSERT_OUTBOX_EVENTS_UNORDERED.to_owned();
        assert!(prepared(&c).await.contains(&unordered));
        drop(kept);
    }
}
