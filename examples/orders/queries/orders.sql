-- The order service's write side. Every function of `orders_example::service` runs these in the
-- transaction that also emits the matching event.

--! insert_order
INSERT INTO orders (id, customer, total_cents)
VALUES (:id, :customer, :total_cents)
RETURNING version;

--! insert_order_line
INSERT INTO order_lines (order_id, line_no, sku, quantity, unit_price_cents)
VALUES (:order_id, :line_no, :sku, :quantity, :unit_price_cents)
RETURNING line_no;

-- Locks an order that is still open (not shipped), adds `amount_cents` to its total and bumps its
-- version. No row when the order does not exist or was shipped.
--! change_open_order
UPDATE orders
   SET total_cents = total_cents + :amount_cents, version = version + 1
 WHERE id = :id AND status = 'placed'
RETURNING version;

-- Appends a line after the order's last one (run after `change_open_order`, which locks the order).
--! append_order_line
INSERT INTO order_lines (order_id, line_no, sku, quantity, unit_price_cents)
SELECT :order_id::uuid, COALESCE(max(line_no), 0) + 1, :sku::text, :quantity::int,
       :unit_price_cents::bigint
  FROM order_lines
 WHERE order_id = :order_id::uuid
RETURNING line_no;

-- Removes a line of an open order, takes its amount off the total and bumps the version. No row
-- when the line does not exist or the order was shipped (the caller rolls back).
--! remove_order_line
WITH removed AS (
    DELETE FROM order_lines
     WHERE order_id = :order_id AND line_no = :line_no
    RETURNING sku, quantity, unit_price_cents
)
UPDATE orders o
   SET total_cents = o.total_cents - removed.quantity * removed.unit_price_cents,
       version = o.version + 1
  FROM removed
 WHERE o.id = :order_id AND o.status = 'placed'
RETURNING o.version, removed.sku, removed.quantity, removed.unit_price_cents;

-- No row when the order does not exist or was shipped already.
--! ship_order
UPDATE orders
   SET status = 'shipped', shipped_at = now(), version = version + 1
 WHERE id = :id AND status = 'placed'
RETURNING version, shipped_at;

--! find_order : (shipped_at?)
SELECT id, customer, status, total_cents, version, placed_at, shipped_at
  FROM orders
 WHERE id = :id;
