-- Opt-in partitioned layout (`outbox migrate --partitioned`, `outbox_core::partition`).
--
-- On its own this migration changes nothing about `outbox_events`: it adds an empty settings table
-- and the functions that convert the table (`outbox_partitions_convert`) and maintain its
-- partitions. A database stays on the plain layout until it is converted.
--
-- The partitioned layout: `outbox_events` is range-partitioned on `created_at` (daily or hourly,
-- UTC), with the same columns, defaults, view and trigger. Its primary key is (id, created_at) — a
-- partitioned table's unique keys must include the partition key — so the id's uniqueness across
-- partitions rests on `gen_random_uuid()` (122 random bits), as it always did for consumers.
-- Partitions:
--   * `outbox_events_p_head`  FROM (MINVALUE) TO (first period): rows older than the conversion
--     (pending events and dead letters moved from the plain table);
--   * `outbox_events_pYYYYMMDD[HH]` one per period, created `ahead` periods in advance;
--   * `outbox_events_p_tail`  FROM (horizon) TO (MAXVALUE): the safety net. It is an ordinary range
--     partition, not a DEFAULT one, because PostgreSQL refuses `DETACH PARTITION … CONCURRENTLY`
--     while a default partition exists; it is empty as long as maintenance runs.

-- One row once the table is partitioned; none on the plain layout.
CREATE TABLE outbox_partitioning (
    singleton       bool        PRIMARY KEY DEFAULT true CHECK (singleton),
    granularity     text        NOT NULL CHECK (granularity IN ('daily', 'hourly')),
    -- Partitions kept ready beyond the current period.
    ahead           int         NOT NULL CHECK (ahead BETWEEN 1 AND 1000),
    converted_at    timestamptz NOT NULL DEFAULT now(),
    -- What the last maintenance found (for `outbox stats`).
    maintained_at   timestamptz,
    retention_secs  float8,
    kept_partitions int         NOT NULL DEFAULT 0,
    kept_events     bigint      NOT NULL DEFAULT 0
);

-- The length of one partition.
CREATE FUNCTION outbox_partition_step(granularity text) RETURNS interval
    LANGUAGE sql IMMUTABLE AS
$$ SELECT CASE granularity WHEN 'hourly' THEN interval '1 hour' ELSE interval '1 day' END $$;

-- The start (UTC) of the period holding `ts`.
CREATE FUNCTION outbox_partition_floor(ts timestamptz, granularity text) RETURNS timestamptz
    LANGUAGE sql STABLE AS
$$ SELECT date_trunc(CASE granularity WHEN 'hourly' THEN 'hour' ELSE 'day' END, ts, 'UTC') $$;

-- The name of the partition starting at `lo`.
CREATE FUNCTION outbox_partition_name(lo timestamptz, granularity text) RETURNS text
    LANGUAGE sql STABLE AS
$$ SELECT 'outbox_events_p'
          || to_char(lo AT TIME ZONE 'UTC', CASE granularity WHEN 'hourly' THEN 'YYYYMMDDHH24' ELSE 'YYYYMMDD' END) $$;

-- The partitions of outbox_events with their bounds (NULL = MINVALUE / MAXVALUE) and whether a
-- concurrent detach was interrupted. Bounds are read back from the catalog's text form, which is
-- printed in this session's own settings and so parses back in it.
CREATE FUNCTION outbox_partition_list()
    RETURNS TABLE (name text, lo timestamptz, hi timestamptz, detach_pending bool)
    LANGUAGE plpgsql STABLE AS
$$
DECLARE
    r record;
    m text[];
BEGIN
    IF to_regclass('outbox_events') IS NULL THEN
        RETURN;
    END IF;
    FOR r IN SELECT c.relname::text AS relname, pg_get_expr(c.relpartbound, c.oid) AS bound, i.inhdetachpending
               FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
              WHERE i.inhparent = 'outbox_events'::regclass
    LOOP
        m := regexp_match(r.bound, $re$FROM \((.*)\) TO \((.*)\)$re$);
        name := r.relname;
        lo := CASE WHEN m[1] = 'MINVALUE' THEN NULL ELSE trim(both '''' FROM m[1])::timestamptz END;
        hi := CASE WHEN m[2] = 'MAXVALUE' THEN NULL ELSE trim(both '''' FROM m[2])::timestamptz END;
        detach_pending := r.inhdetachpending;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- Creates the table `name` shaped like outbox_events (empty) and attaches it for [lo, hi) (NULL =
-- unbounded). ATTACH takes SHARE UPDATE EXCLUSIVE on outbox_events — writers and relays go on —
-- and there is no default partition to scan.
CREATE FUNCTION outbox_partition_add(name text, lo timestamptz, hi timestamptz) RETURNS void
    LANGUAGE plpgsql AS
$$
BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE outbox_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
    PERFORM outbox_partition_attach(name, lo, hi);
END;
$$;

CREATE FUNCTION outbox_partition_attach(name text, lo timestamptz, hi timestamptz) RETURNS void
    LANGUAGE plpgsql AS
$$
BEGIN
    EXECUTE format('ALTER TABLE outbox_events ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', name,
                   coalesce(quote_literal(lo), 'MINVALUE'), coalesce(quote_literal(hi), 'MAXVALUE'));
END;
$$;

-- Converts the plain outbox_events into the partitioned layout, in the caller's transaction (the
-- migration's): the plain table is renamed `outbox_events_legacy`, a partitioned outbox_events
-- takes its place (same columns, defaults, indexes, view, trigger and grants; `seq` continues), its
-- unpublished rows (pending events and dead letters) are moved over with their ids and `seq`, and
-- its published rows stay behind in `outbox_events_legacy`, dropped by maintenance once they are
-- all older than the retention. Takes ACCESS EXCLUSIVE on the plain table for the move: writers and
-- relays wait that long. Returns what it did; a table already partitioned with the same
-- granularity is left alone.
CREATE FUNCTION outbox_partitions_convert(granularity text, ahead int) RETURNS text
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
    ALTER TABLE outbox_events_legacy RENAME CONSTRAINT outbox_events_seq_key TO outbox_events_legacy_seq_key;
    ALTER TABLE outbox_events_legacy RENAME CONSTRAINT outbox_events_aggregate_id_not_empty TO outbox_events_legacy_aggregate_id_not_empty;
    ALTER TABLE outbox_events_legacy RENAME CONSTRAINT outbox_events_attempts_non_negative TO outbox_events_legacy_attempts_non_negative;
    ALTER INDEX outbox_events_pending_idx RENAME TO outbox_events_legacy_pending_idx;
    ALTER INDEX outbox_events_aggregate_unpublished_idx RENAME TO outbox_events_legacy_aggregate_unpublished_idx;
    ALTER INDEX outbox_events_aggregate_blocking_idx RENAME TO outbox_events_legacy_aggregate_blocking_idx;
    ALTER INDEX outbox_events_processed_at_idx RENAME TO outbox_events_legacy_processed_at_idx;
    ALTER SEQUENCE outbox_events_seq_seq RENAME TO outbox_events_legacy_seq_seq;

    CREATE TABLE outbox_events (
        id               uuid        NOT NULL DEFAULT gen_random_uuid(),
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
    -- `seq` orders and joins (relay claims); unique by construction (an identity).
    CREATE INDEX outbox_events_seq_idx ON outbox_events (seq);
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
    EXECUTE format('CREATE TABLE outbox_events_p_head PARTITION OF outbox_events FOR VALUES FROM (MINVALUE) TO (%L)', first_lo);
    lo := first_lo;
    FOR i IN 0..ahead LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF outbox_events FOR VALUES FROM (%L) TO (%L)',
                       outbox_partition_name(lo, granularity), lo, lo + step);
        lo := lo + step;
    END LOOP;
    EXECUTE format('CREATE TABLE outbox_events_p_tail PARTITION OF outbox_events FOR VALUES FROM (%L) TO (MAXVALUE)', lo);

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

-- Maintenance, step 1: what the safety net (the tail) looks like. `wanted` is where it should start
-- (`ahead` periods after the current one); `tail_lo` NULL means the tail is not attached (a carve was
-- interrupted: finalize a pending detach, then call outbox_partitions_carve again).
CREATE FUNCTION outbox_partitions_tail(OUT granularity text, OUT wanted timestamptz, OUT tail_lo timestamptz,
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
    tail_rows := tail_lo IS NOT NULL AND EXISTS (SELECT 1 FROM outbox_events WHERE created_at >= tail_lo);
    -- Detaching the tail concurrently leaves a moment with no partition from tail_lo on: safe only while
    -- no row can have a created_at that late (a full period of margin).
    carve_safe := tail_lo IS NOT NULL AND NOT tail_rows AND tail_lo >= now() + outbox_partition_step(granularity);
END;
$$;

-- Maintenance, step 2 (after `DETACH PARTITION outbox_events_p_tail CONCURRENTLY`): adds the
-- partitions from the newest one up to `wanted` and attaches a fresh tail from there; returns how many
-- it created. If rows reached the detached tail meanwhile it is attached back and -1 is returned (use
-- outbox_partitions_drain_tail). Every ATTACH takes SHARE UPDATE EXCLUSIVE: no writer waits.
CREATE FUNCTION outbox_partitions_carve(wanted timestamptz) RETURNS int
    LANGUAGE plpgsql AS
$$
DECLARE
    g text := (SELECT granularity FROM outbox_partitioning);
    lo timestamptz := (SELECT max(hi) FROM outbox_partition_list() WHERE name <> 'outbox_events_p_tail');
    created int := 0;
BEGIN
    IF EXISTS (SELECT 1 FROM outbox_partition_list() WHERE name = 'outbox_events_p_tail') THEN
        RAISE EXCEPTION 'outbox_events_p_tail is still attached';
    END IF;
    IF to_regclass('outbox_events_p_tail') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM outbox_events_p_tail) THEN
            PERFORM outbox_partition_attach('outbox_events_p_tail', lo, NULL);
            RETURN -1;
        END IF;
        DROP TABLE outbox_events_p_tail;
    END IF;
    WHILE lo < wanted LOOP
        PERFORM outbox_partition_add(outbox_partition_name(lo, g), lo, lo + outbox_partition_step(g));
        lo := lo + outbox_partition_step(g);
        created := created + 1;
    END LOOP;
    PERFORM outbox_partition_add('outbox_events_p_tail', lo, NULL);
    RETURN created;
END;
$$;

-- The safety net's drain, for when rows reached the tail (maintenance did not run for `ahead`
-- periods): in one transaction, with `lock_timeout`, detach the tail, add the partitions its rows
-- and the next `ahead` periods need, attach a fresh tail and move the rows back through
-- outbox_events (ids and seq kept). Takes ACCESS EXCLUSIVE on outbox_events for the move: writers and
-- relays wait for it. Returns the rows moved.
CREATE FUNCTION outbox_partitions_drain_tail(wanted timestamptz, lock_timeout_ms int) RETURNS bigint
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
    SELECT outbox_partition_floor(max(created_at), g) + outbox_partition_step(g) INTO last FROM outbox_events_p_drained;
    last := greatest(last, wanted);
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

-- Maintenance, step 3: partitions wholly older than the retention (their end before now() - retention),
-- tail excluded. `droppable` when every row is published and was published before the cut-off (what
-- `outbox cleanup` would delete); otherwise `leftovers` counts its pending events and dead letters
-- (and rows published too recently) and the partition is kept. Also records, for `outbox stats`, how
-- many partitions are kept past the retention.
CREATE FUNCTION outbox_partitions_expired(retention_secs float8)
    RETURNS TABLE (name text, lo timestamptz, hi timestamptz, droppable bool, leftovers bigint, detach_pending bool)
    LANGUAGE plpgsql AS
$$
DECLARE
    cutoff timestamptz := now() - make_interval(secs => retention_secs);
    kept int := 0;
    kept_rows bigint := 0;
    p record;
BEGIN
    FOR p IN SELECT * FROM outbox_partition_list() l
              WHERE l.name <> 'outbox_events_p_tail' AND l.hi IS NOT NULL AND l.hi <= cutoff
              ORDER BY l.hi
    LOOP
        name := p.name; lo := p.lo; hi := p.hi; detach_pending := p.detach_pending;
        EXECUTE format('SELECT count(*) FROM %I WHERE processed_at IS NULL OR processed_at >= $1', p.name)
           INTO leftovers USING cutoff;
        droppable := leftovers = 0;
        IF NOT droppable THEN
            kept := kept + 1;
            kept_rows := kept_rows + leftovers;
        END IF;
        RETURN NEXT;
    END LOOP;
    UPDATE outbox_partitioning
       SET maintained_at = now(), retention_secs = outbox_partitions_expired.retention_secs,
           kept_partitions = kept, kept_events = kept_rows;
END;
$$;

-- Maintenance, step 4 (after `DETACH PARTITION … CONCURRENTLY`, or FINALIZE): drops the detached
-- partition if it still holds nothing to keep; otherwise attaches it back for [lo, hi) and returns
-- false. Without a default partition, no other partition is scanned or locked.
CREATE FUNCTION outbox_partition_drop_detached(name text, lo timestamptz, hi timestamptz, retention_secs float8)
    RETURNS bool
    LANGUAGE plpgsql AS
$$
DECLARE
    cutoff timestamptz := now() - make_interval(secs => retention_secs);
    leftovers bool;
BEGIN
    IF name !~ '^outbox_events_p' OR name = 'outbox_events_p_tail' THEN
        RAISE EXCEPTION 'not a retirable outbox partition: %', name;
    END IF;
    IF EXISTS (SELECT 1 FROM outbox_partition_list() l WHERE l.name = outbox_partition_drop_detached.name) THEN
        RAISE EXCEPTION '% is still attached', name;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE processed_at IS NULL OR processed_at >= $1)', name)
       INTO leftovers USING cutoff;
    IF leftovers THEN
        PERFORM outbox_partition_attach(name, lo, hi);
        RETURN false;
    END IF;
    EXECUTE format('DROP TABLE %I', name);
    RETURN true;
END;
$$;

-- Maintenance, step 5: drops `outbox_events_legacy` (the plain table's published rows, left by the
-- conversion) once every row in it was published before now() - retention. Returns whether it did.
CREATE FUNCTION outbox_partitions_drop_legacy(retention_secs float8) RETURNS bool
    LANGUAGE plpgsql AS
$$
BEGIN
    IF to_regclass('outbox_events_legacy') IS NULL THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM outbox_events_legacy
                WHERE processed_at IS NULL OR processed_at >= now() - make_interval(secs => retention_secs)) THEN
        RETURN false;
    END IF;
    DROP TABLE outbox_events_legacy;
    RETURN true;
END;
$$;
