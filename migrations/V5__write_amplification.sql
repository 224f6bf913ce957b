-- Write amplification (issue 18): what each event costs the database to write, publish and mark.
--
-- 1. Time-ordered ids. `id` defaults to a UUIDv7 (48 bits of Unix milliseconds, then random bits), as
--    the emitter's ids already are: the primary key grows at its right edge instead of dirtying, and
--    after each checkpoint writing in full to the WAL, a random leaf page per insert. Existing ids
--    are untouched; both kinds are unique.
-- 2. No index that no query needs: `seq` is an identity, unique by construction, and every query that
--    orders or joins on it does so among unpublished rows, which the partial indexes cover. Its
--    UNIQUE index (plain layout) or plain index (partitioned layout) only cost every insert and every
--    mark an entry.
-- 3. Room for the mark on its own page (plain layout): marking an event processed writes a new row
--    version (never a HOT update: `processed_at` is in the partial indexes' predicates, which is what
--    keeps claims proportional to the pending rows). With free space on the page the new version
--    stays there, and the WAL record carries only the changed bytes instead of the whole row
--    (payload included). Applies to pages written from now on; no rewrite.
--
-- No downtime: no table rewrite and no index build. Dropping the index takes ACCESS EXCLUSIVE on
-- outbox_events for an instant; `lock_timeout` bounds how long writers could queue behind it if a
-- long transaction holds the table (the migration then fails and can simply be run again).
SET LOCAL lock_timeout = '5s';

CREATE FUNCTION outbox_uuidv7() RETURNS uuid
    LANGUAGE sql VOLATILE PARALLEL SAFE AS
$$
    -- A random (v4) UUID whose first 48 bits become the Unix time in milliseconds and whose version
    -- nibble becomes 7 (bits 52 and 53 set: 0100 -> 0111); the variant bits stay as they are.
    SELECT encode(
               set_bit(set_bit(
                   overlay(uuid_send(gen_random_uuid())
                           PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                           FROM 1 FOR 6),
                   52, 1), 53, 1),
               'hex')::uuid
$$;

ALTER TABLE outbox_events ALTER COLUMN id SET DEFAULT outbox_uuidv7();

ALTER TABLE outbox_events DROP CONSTRAINT IF EXISTS outbox_events_seq_key;
DROP INDEX IF EXISTS outbox_events_seq_idx;

DO $$
DECLARE
    part text;
BEGIN
    -- Storage parameters exist on the plain table and on partitions, not on a partitioned parent.
    IF (SELECT relkind FROM pg_class WHERE oid = 'outbox_events'::regclass) = 'r' THEN
        ALTER TABLE outbox_events SET (fillfactor = 60);
    ELSE
        FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                     WHERE i.inhparent = 'outbox_events'::regclass LOOP
            EXECUTE format('ALTER TABLE %I SET (fillfactor = 60)', part);
        END LOOP;
    END IF;
END;
$$;

-- Partitions made by maintenance get the same room for the mark.
CREATE OR REPLACE FUNCTION outbox_partition_add(name text, lo timestamptz, hi timestamptz) RETURNS void
    LANGUAGE plpgsql AS
$$
BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE outbox_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS) WITH (fillfactor = 60)', name);
    PERFORM outbox_partition_attach(name, lo, hi);
END;
$$;

-- The conversion to the partitioned layout (V4), for a table without the `seq` UNIQUE constraint,
-- with UUIDv7 ids by default and without the `seq` index. Otherwise as in V4.
CREATE OR REPLACE FUNCTION outbox_partitions_convert(granularity text, ahead int) RETURNS text
    LANGUAGE plpgsql AS
$$
DECLARE
    current_granularity text;
    step interval := outbox_partition_step(granularity);
    first_lo timestamptz := outbox_partition_floor(now(), granularity);
    lo timestamptz;
    next_seq bigint;
    moved bigint;
    g record;
BEGIN
    IF granularity NOT IN ('daily', 'hourly') THEN
        RAISE EXCEPTION 'granularity must be daily or hourly, not %', granularity;
    END IF;
    SELECT p.granularity INTO current_granularity FROM outbox_partitioning p;
    IF current_granularity IS NOT NULL THEN
        IF current_granularity <> granularity THEN
            RAISE EXCEPTION 'outbox_events is already partitioned %; changing to % is not supported',
                current_granularity, granularity;
        END IF;
        RETURN 'already partitioned ' || granularity;
    END IF;
    IF to_regclass('outbox_events_legacy') IS NOT NULL THEN
        RAISE EXCEPTION 'outbox_events_legacy exists: drop or rename it before converting';
    END IF;

    LOCK TABLE outbox_events IN ACCESS EXCLUSIVE MODE;
    -- The grants of the table (table and column level) and of the view, for the relay's and the
    -- operators' roles: given again to the new table and view below.
    CREATE TEMPORARY TABLE outbox_grants ON COMMIT DROP AS
        SELECT DISTINCT table_name::text AS relation, grantee::text AS grantee, privilege_type::text AS privilege,
               NULL::text AS column_name
          FROM information_schema.role_table_grants
         WHERE table_schema = current_schema() AND table_name IN ('outbox_events', 'outbox_dead_letters')
           AND grantee <> current_user
        UNION
        SELECT DISTINCT 'outbox_events', c.grantee, c.privilege_type, c.column_name
          FROM information_schema.column_privileges c
         WHERE c.table_schema = current_schema() AND c.table_name = 'outbox_events' AND c.grantee <> current_user
           AND NOT EXISTS (SELECT 1 FROM information_schema.role_table_grants t
                            WHERE t.table_schema = c.table_schema AND t.table_name = c.table_name
                              AND t.grantee = c.grantee AND t.privilege_type = c.privilege_type);
    DROP VIEW outbox_dead_letters;
    DROP TRIGGER outbox_events_notify ON outbox_events;
    ALTER TABLE outbox_events RENAME TO outbox_events_legacy;
    ALTER TABLE outbox_events_legacy RENAME CONSTRAINT outbox_events_pkey TO outbox_events_legacy_pkey;
    IF EXISTS (SELECT 1 FROM pg_constraint
                WHERE conname = 'outbox_events_seq_key' AND conrelid = 'outbox_events_legacy'::regclass) THEN
        ALTER TABLE outbox_events_legacy RENAME CONSTRAINT outbox_events_seq_key TO outbox_events_legacy_seq_key;
    END IF;
    ALTER TABLE outbox_events_legacy RENAME CONSTRAINT outbox_events_aggregate_id_not_empty TO outbox_events_legacy_aggregate_id_not_empty;
    ALTER TABLE outbox_events_legacy RENAME CONSTRAINT outbox_events_attempts_non_negative TO outbox_events_legacy_attempts_non_negative;
    ALTER INDEX outbox_events_pending_idx RENAME TO outbox_events_legacy_pending_idx;
    ALTER INDEX outbox_events_aggregate_unpublished_idx RENAME TO outbox_events_legacy_aggregate_unpublished_idx;
    ALTER INDEX outbox_events_aggregate_blocking_idx RENAME TO outbox_events_legacy_aggregate_blocking_idx;
    ALTER INDEX outbox_events_processed_at_idx RENAME TO outbox_events_legacy_processed_at_idx;
    ALTER SEQUENCE outbox_events_seq_seq RENAME TO outbox_events_legacy_seq_seq;

    CREATE TABLE outbox_events (
        id               uuid        NOT NULL DEFAULT outbox_uuidv7(),
        seq              bigint      GENERATED ALWAYS AS IDENTITY,
        aggregate_type   text        NOT NULL,
        aggregate_id     text        NOT NULL,
        event_type       text        NOT NULL,
        payload          jsonb       NOT NULL,
        metadata         jsonb       NOT NULL DEFAULT '{}',
        attempts         int         NOT NULL DEFAULT 0,
        retry_after      timestamptz,
        last_error       text,
        created_at       timestamptz NOT NULL DEFAULT now(),
        processed_at     timestamptz,
        dead_lettered_at timestamptz,
        CONSTRAINT outbox_events_pkey PRIMARY KEY (id, created_at),
        CONSTRAINT outbox_events_aggregate_id_not_empty CHECK (aggregate_id <> ''),
        CONSTRAINT outbox_events_attempts_non_negative CHECK (attempts >= 0)
    ) PARTITION BY RANGE (created_at);
    CREATE INDEX outbox_events_pending_idx ON outbox_events (seq)
        WHERE processed_at IS NULL AND dead_lettered_at IS NULL;
    CREATE INDEX outbox_events_aggregate_unpublished_idx ON outbox_events (aggregate_type, aggregate_id, seq)
        WHERE processed_at IS NULL;
    CREATE INDEX outbox_events_aggregate_blocking_idx ON outbox_events (aggregate_type, aggregate_id, seq)
        WHERE processed_at IS NULL AND (dead_lettered_at IS NOT NULL OR retry_after IS NOT NULL);
    CREATE INDEX outbox_events_processed_at_idx ON outbox_events (processed_at)
        WHERE processed_at IS NOT NULL;

    SELECT coalesce(max(seq), 0) + 1 INTO next_seq FROM outbox_events_legacy;
    EXECUTE format('ALTER TABLE outbox_events ALTER COLUMN seq RESTART WITH %s', next_seq);

    -- Partitions: the head (anything older), one per period up to `ahead` periods on, the tail.
    EXECUTE format('CREATE TABLE outbox_events_p_head PARTITION OF outbox_events FOR VALUES FROM (MINVALUE) TO (%L) WITH (fillfactor = 60)', first_lo);
    lo := first_lo;
    FOR i IN 0..ahead LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF outbox_events FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 60)',
                       outbox_partition_name(lo, granularity), lo, lo + step);
        lo := lo + step;
    END LOOP;
    EXECUTE format('CREATE TABLE outbox_events_p_tail PARTITION OF outbox_events FOR VALUES FROM (%L) TO (MAXVALUE) WITH (fillfactor = 60)', lo);

    CREATE VIEW outbox_dead_letters AS
        SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, last_error,
               created_at, dead_lettered_at
          FROM outbox_events
         WHERE dead_lettered_at IS NOT NULL AND processed_at IS NULL;
    CREATE TRIGGER outbox_events_notify
        AFTER INSERT ON outbox_events
        FOR EACH STATEMENT
        EXECUTE FUNCTION outbox_events_notify();

    FOR g IN SELECT * FROM outbox_grants LOOP
        IF g.column_name IS NULL THEN
            EXECUTE format('GRANT %s ON %I TO %I', g.privilege, g.relation, g.grantee);
        ELSE
            EXECUTE format('GRANT %s (%I) ON %I TO %I', g.privilege, g.column_name, g.relation, g.grantee);
        END IF;
    END LOOP;

    -- Unpublished rows move over (their ids and seq kept); published ones stay for retention.
    WITH gone AS (DELETE FROM outbox_events_legacy WHERE processed_at IS NULL RETURNING *)
    INSERT INTO outbox_events OVERRIDING SYSTEM VALUE SELECT * FROM gone;
    GET DIAGNOSTICS moved = ROW_COUNT;
    IF NOT EXISTS (SELECT 1 FROM outbox_events_legacy) THEN
        DROP TABLE outbox_events_legacy;
    END IF;

    INSERT INTO outbox_partitioning (granularity, ahead) VALUES (granularity, ahead);
    RETURN format('partitioned %s (%s partitions ahead); moved %s unpublished events', granularity, ahead, moved);
END;
$$;
