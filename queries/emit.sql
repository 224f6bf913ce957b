-- Writing events. Every query runs inside the caller's own transaction.
--
-- Per-aggregate order: the ordered inserts first take a transaction-scoped advisory lock on each
-- event's aggregate (key: a 64-bit hash of `aggregate_type`, a unit separator and `aggregate_id`),
-- inside the same statement, before the row gets its `seq`. Writers of one aggregate therefore
-- serialise from their emit to their commit, so within an aggregate `seq` order is commit order and
-- an uncommitted event always comes after every committed one: the relay can never publish an event
-- while an earlier event of its aggregate is still uncommitted.
--
-- Ids come from the emitter (UUIDv7: time-ordered, so the primary key grows at its right edge
-- instead of touching a random page per insert).

--! insert_outbox_event
WITH aggregate_lock AS (
    SELECT pg_advisory_xact_lock(hashtextextended(:aggregate_type::text || E'\x1f' || :aggregate_id::text, 0))
)
INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload, metadata)
SELECT :id::uuid, :aggregate_type::text, :aggregate_id::text, :event_type::text, :payload::jsonb, :metadata::jsonb
  FROM aggregate_lock
RETURNING id;

-- Many events in one statement; ids come back in the order of the arrays. The aggregates' locks are
-- taken in ascending key order, so two `emit_all` calls can never deadlock on each other.
--! insert_outbox_events
WITH keys AS (
    SELECT DISTINCT hashtextextended(t || E'\x1f' || i, 0) AS k
      FROM unnest(:aggregate_types::text[], :aggregate_ids::text[]) AS a(t, i)
     ORDER BY k
), aggregate_locks AS (
    SELECT count(*) AS n FROM (SELECT pg_advisory_xact_lock(k) FROM keys) l
), inserted AS (
    INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload, metadata)
    SELECT id, aggregate_type, aggregate_id, event_type, payload, metadata
      FROM unnest(:aggregate_types::text[], :aggregate_ids::text[], :ids::uuid[], :event_types::text[],
                  :payloads::jsonb[], :metadata::jsonb[])
           WITH ORDINALITY AS e(aggregate_type, aggregate_id, id, event_type, payload, metadata, ord),
           aggregate_locks
     ORDER BY ord
    RETURNING id, seq
)
SELECT id FROM inserted ORDER BY seq;

-- Without per-aggregate order (`Emitter::per_aggregate_order(false)`): no lock, writers never wait.
--! insert_outbox_event_unordered
INSERT INTO outbox_events (aggregate_type, aggregate_id, id, event_type, payload, metadata)
VALUES (:aggregate_type, :aggregate_id, :id, :event_type, :payload, :metadata)
RETURNING id;

--! insert_outbox_events_unordered
WITH inserted AS (
    INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload, metadata)
    SELECT id, aggregate_type, aggregate_id, event_type, payload, metadata
      FROM unnest(:aggregate_types::text[], :aggregate_ids::text[], :ids::uuid[], :event_types::text[],
                  :payloads::jsonb[], :metadata::jsonb[])
           WITH ORDINALITY AS e(aggregate_type, aggregate_id, id, event_type, payload, metadata, ord)
     ORDER BY ord
    RETURNING id, seq
)
SELECT id FROM inserted ORDER BY seq;
