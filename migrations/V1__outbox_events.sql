-- The transactional outbox: one row per event, written in the same transaction as the business data.
CREATE TABLE outbox_events (
    -- The event id: the consumer's dedupe key and, on FIFO queues, the MessageDeduplicationId.
    id               uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Insertion order. `created_at` is the transaction's start time and ties within a transaction.
    seq              bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    aggregate_type   text        NOT NULL,
    aggregate_id     text        NOT NULL,
    event_type       text        NOT NULL,
    payload          jsonb       NOT NULL,
    -- Trace context and other headers.
    metadata         jsonb       NOT NULL DEFAULT '{}',
    attempts         int         NOT NULL DEFAULT 0,
    -- NULL = due now.
    retry_after      timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- NULL = not yet published.
    processed_at     timestamptz,
    -- Set by the relay when an event will never be published (max attempts reached, or a message the
    -- broker can never accept). Dead letters are excluded from claims and block their aggregate.
    dead_lettered_at timestamptz,
    CONSTRAINT outbox_events_aggregate_id_not_empty CHECK (aggregate_id <> ''),
    CONSTRAINT outbox_events_attempts_non_negative CHECK (attempts >= 0)
);

-- Claim index: only rows a relay may still publish, so claims stay fast however many rows were ever
-- processed.
CREATE INDEX outbox_events_pending_idx
    ON outbox_events (seq)
    WHERE processed_at IS NULL AND dead_lettered_at IS NULL;

-- The oldest unpublished (pending, waiting for retry, or dead) event of one aggregate: per-aggregate
-- ordering looks here.
CREATE INDEX outbox_events_aggregate_unpublished_idx
    ON outbox_events (aggregate_type, aggregate_id, seq)
    WHERE processed_at IS NULL;

-- Unpublished events that hold their aggregate back (dead, or waiting for a retry): the follower
-- claim checks there is none between a head and its followers. Fresh rows are not in it.
CREATE INDEX outbox_events_aggregate_blocking_idx
    ON outbox_events (aggregate_type, aggregate_id, seq)
    WHERE processed_at IS NULL AND (dead_lettered_at IS NOT NULL OR retry_after IS NOT NULL);

-- Retention: finds processed rows by age.
CREATE INDEX outbox_events_processed_at_idx
    ON outbox_events (processed_at)
    WHERE processed_at IS NOT NULL;

CREATE VIEW outbox_dead_letters AS
    SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, last_error,
           created_at, dead_lettered_at
      FROM outbox_events
     WHERE dead_lettered_at IS NOT NULL AND processed_at IS NULL;

-- Wake the relays once per inserting statement (not per row): a NOTIFY takes a global lock at commit,
-- and PostgreSQL folds identical notifications of one transaction into one.
CREATE FUNCTION outbox_events_notify() RETURNS trigger
    LANGUAGE plpgsql AS
$$
BEGIN
    PERFORM pg_notify('outbox_events', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER outbox_events_notify
    AFTER INSERT ON outbox_events
    FOR EACH STATEMENT
    EXECUTE FUNCTION outbox_events_notify();

-- Consumer inbox: a consumer records each event id it has processed, inside its own transaction.
CREATE TABLE processed_events (
    consumer     text        NOT NULL,
    event_id     uuid        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);
