-- pgbench script: the relay's claim-and-mark work with no broker in between — the physical limit the
-- relay is measured against (benchmark 1).
--
-- One transaction per batch, as the relay does: claim the oldest due events exactly as
-- queries/relay.sql `fetch_outbox_batch` does (same columns, same predicate, `ORDER BY seq LIMIT
-- :batch FOR UPDATE SKIP LOCKED`), then mark them exactly as `mark_outbox_processed` does
-- (`WHERE id = ANY(ids) AND processed_at IS NULL`). pgbench cannot carry a row set from one statement
-- to the next, so the two statements are joined in one with a CTE; the claimed rows are returned to
-- the client like the relay's claim returns them.
--
-- Run with: pgbench -n -M prepared -f claim_mark.sql -D batch=100 -c <clients> -j <threads> -t <n> <db>
BEGIN;
WITH claimed AS (
    SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, created_at
      FROM outbox_events
     WHERE processed_at IS NULL
       AND dead_lettered_at IS NULL
       AND (retry_after IS NULL OR retry_after <= now())
     ORDER BY seq
     LIMIT :batch
       FOR UPDATE SKIP LOCKED
), marked AS (
    UPDATE outbox_events
       SET processed_at = now(), retry_after = NULL
     WHERE id = ANY(ARRAY(SELECT id FROM claimed))
       AND processed_at IS NULL
    RETURNING id
)
SELECT c.*, (SELECT count(*) FROM marked) AS marked
  FROM claimed c;
COMMIT;
