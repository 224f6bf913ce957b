-- The shipping consumer's effect and the fan-out example's checks.

-- Applies `order.shipped`: the shipping service takes the order on. A second insert for the same
-- order fails (primary key): the inbox must have let one event through twice.
--! insert_shipment
INSERT INTO shipments (order_id, carrier, event_id)
VALUES (:order_id, :carrier, :event_id);

-- Shipments recorded.
--! count_shipments
SELECT count(*) AS n FROM shipments;

-- Orders shipped on the write side.
--! count_shipped_orders
SELECT count(*) AS n FROM orders WHERE status = 'shipped';

-- Committed events that the consumer `consumer` has not applied yet (not in its inbox).
--! count_unapplied
SELECT count(*) AS n
  FROM outbox_events e
 WHERE NOT EXISTS (SELECT 1 FROM processed_events p WHERE p.consumer = :consumer AND p.event_id = e.id);
