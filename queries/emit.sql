-- Writing events. Both queries run inside the caller's own transaction.

--! insert_outbox_event
INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, metadata)
VALUES (:aggregate_type, :aggregate_id, :event_type, :payload, :metadata)
RETURNING id;

-- Many events in one statement; ids come back in the order of the arrays.
--! insert_outbox_events
WITH inserted AS (
    INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, metadata)
    SELECT aggregate_type, aggregate_id, event_type, payload, metadata
      FROM unnest(:aggregate_types::text[], :aggregate_ids::text[], :event_types::text[],
                  :payloads::jsonb[], :metadata::jsonb[])
           WITH ORDINALITY AS e(aggregate_type, aggregate_id, event_type, payload, metadata, ord)
     ORDER BY ord
    RETURNING id, seq
)
SELECT id FROM inserted ORDER BY seq;
