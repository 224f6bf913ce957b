-- The second consumer of the fan-out example (`orders_example::shipping`): the shipping service's
-- own record of the orders it has to carry, built from `order.shipped` events that reach it through
-- the SNS topic, next to the read model (in a real system, a third service's database).
CREATE TABLE shipments (
    order_id   uuid        PRIMARY KEY,
    carrier    text        NOT NULL,
    -- The event it came from (the inbox makes sure each event is applied once).
    event_id   uuid        NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
