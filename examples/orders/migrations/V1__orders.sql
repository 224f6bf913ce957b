-- The order service's own tables, next to the outbox's (applied by `orders_example::migrate`, recorded
-- in `orders_schema_history`).

-- The write side: orders and their lines. `version` counts the changes of an order; every change
-- emits one event carrying the new version, so a consumer can tell whether it sees them in order.
CREATE TABLE orders (
    id          uuid        PRIMARY KEY,
    customer    text        NOT NULL,
    status      text        NOT NULL DEFAULT 'placed' CHECK (status IN ('placed', 'shipped')),
    total_cents bigint      NOT NULL CHECK (total_cents >= 0),
    version     int         NOT NULL DEFAULT 1,
    placed_at   timestamptz NOT NULL DEFAULT now(),
    shipped_at  timestamptz
);

CREATE TABLE order_lines (
    order_id         uuid   NOT NULL REFERENCES orders (id),
    line_no          int    NOT NULL,
    sku              text   NOT NULL,
    quantity         int    NOT NULL CHECK (quantity > 0),
    unit_price_cents bigint NOT NULL CHECK (unit_price_cents >= 0),
    PRIMARY KEY (order_id, line_no)
);

-- The read side: what the consumer builds from the events it receives (in a real system, another
-- service's database; the consumer's inbox, `processed_events`, lives next to it).
CREATE TABLE order_summaries (
    order_id    uuid        PRIMARY KEY,
    customer    text        NOT NULL,
    status      text        NOT NULL,
    line_count  int         NOT NULL,
    total_cents bigint      NOT NULL,
    -- The version of the last event applied.
    version     int         NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
