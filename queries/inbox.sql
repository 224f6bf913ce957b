-- Consumer inbox: process an event id at most once per consumer, inside the consumer's transaction.

-- Returns the id when this call recorded it (first time), no row for a duplicate. A concurrent caller
-- with the same id waits for the first transaction and then gets no row (or the row, if it rolled back).
--! record_processed_event
INSERT INTO processed_events (consumer, event_id)
VALUES (:consumer, :event_id)
ON CONFLICT DO NOTHING
RETURNING event_id;
