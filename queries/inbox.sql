-- Consumer inbox: process an event id at most once per consumer, inside the consumer's transaction.

-- Returns the id when this call recorded it (first time), no row for a duplicate. A concurrent caller
-- with the same id waits for the first transaction and then gets no row (or the row, if it rolled back).
--! record_processed_event
INSERT INTO processed_events (consumer, event_id)
VALUES (:consumer, :event_id)
ON CONFLICT DO NOTHING
RETURNING event_id;

-- Whether the consumer has a committed record of the event: a hint that lets a consumer skip work
-- it would do before its transaction (reading an offloaded payload); record_processed_event decides.
--! processed_event_exists
SELECT EXISTS (SELECT 1 FROM processed_events
                WHERE consumer = :consumer AND event_id = :event_id) AS found;

-- Fails (SQLSTATE 25P02) in a transaction that a failed statement aborted, where PostgreSQL would
-- answer COMMIT with a rollback and no error: asked right before committing.
--! transaction_is_usable
SELECT true AS usable;

-- Whether the consumer's record of the event is this transaction's own, written by it (or by one
-- of its savepoints) and not yet committed: false once that transaction has ended (code in between
-- ran COMMIT or ROLLBACK, and this statement runs in a transaction of its own, in which the record
-- is gone or committed). A visible row whose writer is still in progress can only be this
-- transaction's: `xmin` is its writer's 32-bit id, given the epoch of this transaction's own
-- (NULL when this transaction has written nothing). Fails (25P02) in an aborted transaction, like
-- transaction_is_usable.
--! record_is_this_transactions
SELECT EXISTS (SELECT 1 FROM processed_events
                WHERE consumer = :consumer AND event_id = :event_id
                  AND txid_status(((txid_current_if_assigned() >> 32) << 32) + xmin::text::bigint)
                      = 'in progress') AS ours;

-- Inbox retention: deletes at most `batch_size` records older than the interval; call it until it
-- returns fewer than `batch_size` rows (short statements, no long locks).
--! delete_processed_events_before
DELETE FROM processed_events
 WHERE (consumer, event_id) IN (SELECT consumer, event_id FROM processed_events
                                 WHERE processed_at < now() - make_interval(secs => :older_than_secs)
                                 ORDER BY processed_at
                                 LIMIT :batch_size
                                   FOR UPDATE SKIP LOCKED)
RETURNING event_id;
