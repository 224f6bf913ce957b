-- Partition functions that do not depend on the session's settings, and a conversion that cannot
-- queue every writer behind a long transaction. Replacing functions takes no lock on outbox_events:
-- no downtime.
--
-- 1. Every outbox_partition* function runs with TimeZone UTC and DateStyle ISO. They turn bounds
--    into text and back (the catalog's partition bounds, `%L` in DDL, partition names): under a
--    session's own settings (DateStyle Postgres prints zone abbreviations such as IST, which parse
--    back as another zone; a DST gap moves a name's hour) bounds could come out shifted.
-- 2. The conversion to the partitioned layout waits at most 5 s for its exclusive lock (then it
--    fails with nothing changed, to be run again), and gives a grant to PUBLIC back as such (it
--    failed: role "PUBLIC" does not exist).
-- 3. At least 2 partitions ahead: with 1, the next period's partition could only be carved out of
--    the tail concurrently at the very start of a period, so every period took the blocking path.
-- 4. A row dated far ahead (past the partitions made ahead) stays in the tail: the drain made one
--    partition per period up to it, and counted it as rows to drain on every run; the carve of each
--    new period keeps it in the tail instead of draining it under the exclusive lock.
-- 5. The tail is detached concurrently only once the transactions holding the table have ended
--    (outbox_events_lockers): meanwhile it is "detach pending" and takes no row.
-- 6. Rows written before V6 with a created_at the relay cannot read ('infinity', a year past 9999):
--    as the oldest pending row, one failed every claim. Each is dead-lettered (unless published),
--    its time kept in last_error, and dated at the edge of the readable range; V6's check is then
--    validated (one scan, which blocks no writer).

SET LOCAL lock_timeout = '5s';

UPDATE outbox_partitioning SET ahead = 2 WHERE ahead < 2;

UPDATE outbox_events
   SET last_error = CASE WHEN processed_at IS NULL
                         THEN 'created_at ' || created_at::text
                              || ' cannot be read (years 1 to 9999): dead-lettered by migration V7'
                         ELSE last_error END,
       dead_lettered_at = CASE WHEN processed_at IS NULL THEN coalesce(dead_lettered_at, now())
                               ELSE dead_lettered_at END,
       created_at = CASE WHEN created_at < '0001-01-01 00:00:00+00'
                         THEN '0001-01-01 00:00:00+00'::timestamptz
                         ELSE '9999-12-31 00:00:00+00'::timestamptz END
 WHERE NOT (created_at >= '0001-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00');
ALTER TABLE outbox_events VALIDATE CONSTRAINT outbox_events_created_at_in_range;
ALTER TABLE outbox_partitioning DROP CONSTRAINT IF EXISTS outbox_partitioning_ahead_check;
ALTER TABLE outbox_partitioning ADD CONSTRAINT outbox_partitioning_ahead_check CHECK (ahead BETWEEN 2 AND 1000);

-- The grantee as a GRANT takes it: PUBLIC as the key word, any role name quoted.
CREATE OR REPLACE FUNCTION outbox_grantee(grantee text) RETURNS text
    LANGUAGE sql IMMUTABLE AS
$$ SELECT CASE WHEN grantee = 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(grantee) END $$;

-- The conversion (V5), with the lock bounded and PUBLIC kept.
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

    -- Bounded: behind a long transaction on the table, every writer and relay would queue behind
    -- this lock for as long as that transaction lasts. Failing, it changes nothing
    -- (outbox_core's migrate_partitioned names the cause: run it again).
    PERFORM set_config('lock_timeout', '5s', true);
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
        -- PUBLIC is a key word, not a role: quoted ("PUBLIC") it names a role that does not exist.
        IF g.column_name IS NULL THEN
            EXECUTE format('GRANT %s ON %I TO %s', g.privilege, g.relation, outbox_grantee(g.grantee));
        ELSE
            EXECUTE format('GRANT %s (%I) ON %I TO %s', g.privilege, g.column_name, g.relation,
                           outbox_grantee(g.grantee));
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

-- The tail's state (V4), counting as rows to drain only those a partition made ahead would hold.
CREATE OR REPLACE FUNCTION outbox_partitions_tail(OUT granularity text, OUT wanted timestamptz, OUT tail_lo timestamptz,
                                       OUT tail_rows bool, OUT tail_detach_pending bool, OUT carve_safe bool)
    LANGUAGE plpgsql AS
$$
DECLARE
    ahead int;
BEGIN
    SELECT p.granularity, p.ahead INTO granularity, ahead FROM outbox_partitioning p;
    IF granularity IS NULL THEN
        RETURN;
    END IF;
    wanted := outbox_partition_floor(now(), granularity) + (ahead + 1) * outbox_partition_step(granularity);
    SELECT l.lo, l.detach_pending INTO tail_lo, tail_detach_pending
      FROM outbox_partition_list() l WHERE l.name = 'outbox_events_p_tail';
    tail_detach_pending := coalesce(tail_detach_pending, false);
    IF tail_detach_pending THEN
        tail_lo := NULL;
    END IF;
    -- Only rows a drain would move into a partition of their own: a row dated past `wanted` (written
    -- by hand, a clock far ahead) stays in the tail, and must not make every run drain it again.
    tail_rows := tail_lo IS NOT NULL
                 AND EXISTS (SELECT 1 FROM outbox_events WHERE created_at >= tail_lo AND created_at < wanted);
    -- Detaching the tail concurrently leaves a moment with no partition from tail_lo on: safe only while
    -- no row can have a created_at that late (a full period of margin).
    carve_safe := tail_lo IS NOT NULL AND NOT tail_rows AND tail_lo >= now() + outbox_partition_step(granularity);
END;
$$;

-- The carve (V4): a detached tail holding only rows dated past the new partitions is attached
-- again as the new tail.
CREATE OR REPLACE FUNCTION outbox_partitions_carve(wanted timestamptz) RETURNS int
    LANGUAGE plpgsql AS
$$
DECLARE
    g text := (SELECT granularity FROM outbox_partitioning);
    lo timestamptz := (SELECT max(hi) FROM outbox_partition_list() WHERE name <> 'outbox_events_p_tail');
    created int := 0;
    keep_tail bool := false;
BEGIN
    IF EXISTS (SELECT 1 FROM outbox_partition_list() WHERE name = 'outbox_events_p_tail') THEN
        RAISE EXCEPTION 'outbox_events_p_tail is still attached';
    END IF;
    IF to_regclass('outbox_events_p_tail') IS NOT NULL THEN
        -- Rows the new partitions would hold: attach it back, for the drain.
        IF EXISTS (SELECT 1 FROM outbox_events_p_tail WHERE created_at < greatest(lo, wanted)) THEN
            PERFORM outbox_partition_attach('outbox_events_p_tail', lo, NULL);
            RETURN -1;
        END IF;
        -- Only rows dated past them (written by hand, a clock far ahead): the same table becomes
        -- the new tail below, its rows kept, instead of a blocking drain every period.
        keep_tail := EXISTS (SELECT 1 FROM outbox_events_p_tail);
        IF NOT keep_tail THEN
            DROP TABLE outbox_events_p_tail;
        END IF;
    END IF;
    WHILE lo < wanted LOOP
        PERFORM outbox_partition_add(outbox_partition_name(lo, g), lo, lo + outbox_partition_step(g));
        lo := lo + outbox_partition_step(g);
        created := created + 1;
    END LOOP;
    IF keep_tail THEN
        PERFORM outbox_partition_attach('outbox_events_p_tail', lo, NULL);
    ELSE
        PERFORM outbox_partition_add('outbox_events_p_tail', lo, NULL);
    END IF;
    RETURN created;
END;
$$;

-- The drain (V4), making partitions up to `wanted` only.
CREATE OR REPLACE FUNCTION outbox_partitions_drain_tail(wanted timestamptz, lock_timeout_ms int) RETURNS bigint
    LANGUAGE plpgsql AS
$$
DECLARE
    g text := (SELECT granularity FROM outbox_partitioning);
    lo timestamptz := (SELECT max(hi) FROM outbox_partition_list() WHERE name <> 'outbox_events_p_tail');
    last timestamptz;
    moved bigint;
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout_ms || 'ms', true);
    IF EXISTS (SELECT 1 FROM outbox_partition_list() WHERE name = 'outbox_events_p_tail') THEN
        ALTER TABLE outbox_events DETACH PARTITION outbox_events_p_tail;
    END IF;
    ALTER TABLE outbox_events_p_tail RENAME TO outbox_events_p_drained;
    -- Partitions up to `wanted` only, never up to the latest row: one row dated a year ahead made
    -- one partition per period up to it (thousands, under the exclusive lock, until the lock table
    -- ran out); such rows go back into the fresh tail.
    last := wanted;
    WHILE lo < last LOOP
        PERFORM outbox_partition_add(outbox_partition_name(lo, g), lo, lo + outbox_partition_step(g));
        lo := lo + outbox_partition_step(g);
    END LOOP;
    PERFORM outbox_partition_add('outbox_events_p_tail', lo, NULL);
    INSERT INTO outbox_events OVERRIDING SYSTEM VALUE SELECT * FROM outbox_events_p_drained;
    GET DIAGNOSTICS moved = ROW_COUNT;
    DROP TABLE outbox_events_p_drained;
    RETURN moved;
END;
$$;

-- The transactions (virtual ids; prepared ones too) holding a lock on outbox_events or one of its
-- partitions, this session's excluded. `DETACH ... CONCURRENTLY` of the tail waits for every one of
-- them with the tail "detach pending" meanwhile, when no row dated at or after its start can be
-- written: maintenance carves the tail only once those it saw have ended (a pg_dump holding the
-- table for hours made writers fail once time reached the tail).
CREATE OR REPLACE FUNCTION outbox_events_lockers() RETURNS text[]
    LANGUAGE sql VOLATILE AS
$$
SELECT coalesce(array_agg(DISTINCT l.virtualtransaction), '{}')
  FROM pg_locks l
 WHERE l.locktype = 'relation' AND l.granted
   AND l.pid IS DISTINCT FROM pg_backend_pid()
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND (l.relation = 'outbox_events'::regclass
        OR l.relation IN (SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = 'outbox_events'::regclass))
$$;

-- Every outbox_partition* function, those above included, with the settings they assume.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure
               FROM pg_proc p
              WHERE p.proname LIKE 'outbox\_partition%'
                AND p.pronamespace = (SELECT c.relnamespace FROM pg_class c WHERE c.oid = 'outbox_events'::regclass)
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET timezone TO %L SET datestyle TO %L', f, 'UTC', 'ISO, YMD');
    END LOOP;
END;
$$;
