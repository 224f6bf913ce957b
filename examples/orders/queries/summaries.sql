-- The consumer's read model: one summary per order, built from the events, each applied once (the
-- consumer checks the inbox first) and only in order (each event carries the order's new version).

-- Applies `order.placed`. No row when the summary exists already: the event arrived out of order.
--! insert_summary
INSERT INTO order_summaries (order_id, customer, status, line_count, total_cents, version)
VALUES (:order_id, :customer, 'placed', :line_count, :total_cents, :version)
ON CONFLICT (order_id) DO NOTHING
RETURNING order_id;

-- Applies `order.line.added` / `order.line.removed`. No row unless the summary is at the previous
-- version: the event arrived out of order (or one before it is missing).
--! apply_line_change
UPDATE order_summaries
   SET line_count = line_count + :line_delta, total_cents = total_cents + :amount_cents,
       version = :version, updated_at = now()
 WHERE order_id = :order_id AND version = :version - 1
RETURNING order_id;

-- Applies `order.shipped`, under the same condition.
--! apply_shipped
UPDATE order_summaries
   SET status = 'shipped', version = :version, updated_at = now()
 WHERE order_id = :order_id AND version = :version - 1
RETURNING order_id;

--! find_summary
SELECT order_id, customer, status, line_count, total_cents, version
  FROM order_summaries
 WHERE order_id = :order_id;

-- Orders whose summary is missing or does not match the order: 0 once every event was applied.
--! count_stale_summaries
SELECT count(*) AS stale
  FROM orders o
  LEFT JOIN order_summaries s ON s.order_id = o.id
 WHERE s.order_id IS NULL
    OR s.version <> o.version
    OR s.status <> o.status
    OR s.total_cents <> o.total_cents
    OR s.line_count <> (SELECT count(*) FROM order_lines l WHERE l.order_id = o.id);
