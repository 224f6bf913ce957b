-- Partition retirement waits for the transactions that could still write into a partition.
--
-- An event's created_at is its transaction's start (`now()`). A writer whose transaction began
-- before an expired partition's end can therefore still insert into that partition, however late
-- it commits. Retiring the partition meanwhile (V4: DETACH CONCURRENTLY, then drop or attach back)
-- either failed that insert (no partition for the row, once dropped) or hid the committed event
-- until it was attached back, while the relay published a later event of the same aggregate first.
--
-- Now maintenance first settles a horizon: a moment before which every transaction of this database
-- has ended. It records the virtual transaction ids open at a moment T (pg_locks, readable by any
-- role) and, once none of them is open any more, no transaction that can still write began before T.
-- A partition is retired only when its end is at or before that horizon. The record survives between
-- runs, so a transaction left open for hours only delays retirement until it ends.
--
-- Prepared transactions (two-phase commit) count as open until committed or rolled back.
--
-- Also: a created_at the relay can read (years 1–9999): a row written by hand with 'infinity', or a
-- year past what a chrono timestamp holds, could not be decoded, and as the oldest pending row it
-- failed every claim, stalling the relay. Checked for new rows (NOT VALID: no scan, no lock beyond
-- an instant; `ALTER TABLE outbox_events VALIDATE CONSTRAINT outbox_events_created_at_in_range`
-- checks the rows already there without blocking writers), on either layout and after a conversion.
--
-- Also: whether an expired partition holds anything to keep is now read from two indexes instead of
-- a scan of all its rows (outbox_partition_has_leftovers), so retiring a partition costs the same
-- whatever its size.
-- No lock beyond the settings row; applies on either layout (the functions are used only on the
-- partitioned one).

ALTER TABLE outbox_partitioning
    -- The moment of the last recorded horizon, and the transactions open then.
    ADD COLUMN horizon_at     timestamptz,
    ADD COLUMN horizon_open   text[],
    -- Every transaction that began before this moment has ended (NULL: not known yet).
    ADD COLUMN settled_before timestamptz;

-- The transactions of this database open now (virtual transaction ids, and prepared transactions),
-- this session's own excluded.
CREATE FUNCTION outbox_open_transactions() RETURNS text[]
    LANGUAGE sql VOLATILE AS
$$
SELECT coalesce(array_agg(t.id), '{}')
  FROM (SELECT 'v' || l.virtualxid AS id
          FROM pg_locks l
          JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE l.locktype = 'virtualxid' AND l.granted AND l.pid <> pg_backend_pid()
           -- Only sessions of this database can write here (datid is shown for every role's
           -- session; processes without a database have none).
           AND a.datid = (SELECT oid FROM pg_database WHERE datname = current_database())
           -- Autovacuum never writes rows (backend_type is hidden for other roles' sessions: those
           -- count, to be safe).
           AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
        UNION ALL
        SELECT 'p' || x.transaction::text
          FROM pg_prepared_xacts x
         WHERE x.database = current_database()) t
$$;

-- Whether the partition `name` holds a pending event or a dead letter (processed_at IS NULL), or an
-- event published at or after `cutoff`. Two index probes (the unpublished partial index and the
-- processed_at index, which max() reads from its end), so retiring a partition costs the same
-- whatever its size; V4's `WHERE processed_at IS NULL OR processed_at >= $1` scanned every row.
CREATE FUNCTION outbox_partition_has_leftovers(name text, cutoff timestamptz) RETURNS bool
    LANGUAGE plpgsql STABLE AS
$$
DECLARE
    found bool;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %1$I WHERE processed_at IS NULL)
                        OR coalesce((SELECT max(processed_at) FROM %1$I) >= $1, false)', name)
       INTO found USING cutoff;
    RETURN found;
END;
$$;

-- Maintenance, step 3a: advances the horizon and says how far it must reach. Returns
-- `settled_before` (every transaction that began before it has ended; NULL: not known yet) and
-- `needed`, the end of the newest partition past the retention (NULL: none). While settled_before <
-- needed the caller may wait a little and call again (transactions are usually short).
CREATE FUNCTION outbox_partitions_settle(retention_secs float8)
    RETURNS TABLE (settled_before timestamptz, needed timestamptz)
    LANGUAGE plpgsql AS
$$
DECLARE
    -- A transaction's now() is the start of its first statement, taken a moment before its virtual
    -- transaction id is registered: the margin covers that gap.
    taken timestamptz := clock_timestamp() - interval '1 second';
    open_now text[] := outbox_open_transactions();
    s outbox_partitioning%ROWTYPE;
BEGIN
    SELECT * INTO s FROM outbox_partitioning FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF cardinality(open_now) = 0 THEN
        -- Nothing open: everything that began before `taken` has ended.
        s.settled_before := taken;
        s.horizon_at := NULL;
        s.horizon_open := NULL;
    ELSIF s.horizon_at IS NULL THEN
        s.horizon_at := taken;
        s.horizon_open := open_now;
    ELSIF NOT (s.horizon_open && open_now) THEN
        -- Every transaction open at the recorded horizon has ended.
        s.settled_before := s.horizon_at;
        s.horizon_at := taken;
        s.horizon_open := open_now;
    END IF;
    UPDATE outbox_partitioning
       SET settled_before = s.settled_before, horizon_at = s.horizon_at, horizon_open = s.horizon_open;
    settled_before := s.settled_before;
    -- Partitions kept for their leftovers need no horizon: no waiting for them.
    SELECT max(l.hi) INTO needed
      FROM outbox_partition_list() l
     WHERE l.name <> 'outbox_events_p_tail' AND l.hi IS NOT NULL AND NOT l.detach_pending
       AND l.hi <= now() - make_interval(secs => retention_secs)
       AND NOT outbox_partition_has_leftovers(l.name, now() - make_interval(secs => retention_secs));
    RETURN NEXT;
END;
$$;

-- Maintenance, step 3b: as in V4, plus `settling`: the partition is past the retention but a
-- transaction that began before its end may still be open (its end is after the settled horizon),
-- so it is left for a later run.
DROP FUNCTION outbox_partitions_expired(float8);
CREATE FUNCTION outbox_partitions_expired(retention_secs float8)
    RETURNS TABLE (name text, lo timestamptz, hi timestamptz, droppable bool, leftovers bigint,
                   detach_pending bool, settling bool)
    LANGUAGE plpgsql AS
$$
DECLARE
    cutoff timestamptz := now() - make_interval(secs => retention_secs);
    settled timestamptz := coalesce((SELECT o.settled_before FROM outbox_partitioning o), '-infinity');
    kept int := 0;
    kept_rows bigint := 0;
    p record;
BEGIN
    FOR p IN SELECT * FROM outbox_partition_list() l
              WHERE l.name <> 'outbox_events_p_tail' AND l.hi IS NOT NULL AND l.hi <= cutoff
              ORDER BY l.hi
    LOOP
        name := p.name; lo := p.lo; hi := p.hi; detach_pending := p.detach_pending;
        settling := p.hi > settled;
        IF outbox_partition_has_leftovers(p.name, cutoff) THEN
            -- Only for a partition that is kept: the two counts read the rows they count.
            EXECUTE format('SELECT (SELECT count(*) FROM %1$I WHERE processed_at IS NULL)
                                 + (SELECT count(*) FROM %1$I WHERE processed_at >= $1)', p.name)
               INTO leftovers USING cutoff;
        ELSE
            leftovers := 0;
        END IF;
        droppable := leftovers = 0 AND NOT settling;
        IF leftovers > 0 THEN
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

-- Maintenance, step 3c: tables of expired periods that are no longer attached although retirement
-- never dropped them (maintenance stopped between a finished DETACH … CONCURRENTLY and the drop).
-- Their bounds come from their names; outbox_partition_drop_detached then drops each, or attaches it
-- back if it holds anything to keep.
CREATE FUNCTION outbox_partitions_orphaned(retention_secs float8)
    RETURNS TABLE (name text, lo timestamptz, hi timestamptz)
    LANGUAGE plpgsql STABLE AS
$$
DECLARE
    g text := (SELECT p.granularity FROM outbox_partitioning p);
BEGIN
    IF g IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT t.name, t.lo, t.lo + outbox_partition_step(g)
      FROM (SELECT c.relname::text AS name,
                   to_timestamp(substring(c.relname FROM '^outbox_events_p([0-9]+)$'),
                                CASE g WHEN 'hourly' THEN 'YYYYMMDDHH24' ELSE 'YYYYMMDD' END)::timestamp
                       AT TIME ZONE 'UTC' AS lo
              FROM pg_class c
             WHERE c.relkind = 'r'
               AND c.relnamespace = (SELECT o.relnamespace FROM pg_class o WHERE o.oid = 'outbox_events'::regclass)
               AND c.relname ~ CASE g WHEN 'hourly' THEN '^outbox_events_p[0-9]{10}$' ELSE '^outbox_events_p[0-9]{8}$' END
               AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)) t
     WHERE t.lo + outbox_partition_step(g) <= now() - make_interval(secs => retention_secs);
END;
$$;

-- Maintenance, step 4: as in V4, and a detached partition whose end is after the settled horizon
-- is attached back too (a transaction that began before its end may still write into it).
CREATE OR REPLACE FUNCTION outbox_partition_drop_detached(name text, lo timestamptz, hi timestamptz, retention_secs float8)
    RETURNS bool
    LANGUAGE plpgsql AS
$$
DECLARE
    cutoff timestamptz := now() - make_interval(secs => retention_secs);
    settled timestamptz := coalesce((SELECT o.settled_before FROM outbox_partitioning o), '-infinity');
    leftovers bool;
BEGIN
    IF name !~ '^outbox_events_p' OR name = 'outbox_events_p_tail' THEN
        RAISE EXCEPTION 'not a retirable outbox partition: %', name;
    END IF;
    IF EXISTS (SELECT 1 FROM outbox_partition_list() l WHERE l.name = outbox_partition_drop_detached.name) THEN
        RAISE EXCEPTION '% is still attached', name;
    END IF;
    leftovers := outbox_partition_has_leftovers(name, cutoff);
    IF leftovers OR hi IS NULL OR hi > settled THEN
        PERFORM outbox_partition_attach(name, lo, hi);
        RETURN false;
    END IF;
    EXECUTE format('DROP TABLE %I', name);
    RETURN true;
END;
$$;

-- The checks V6 adds to outbox_events, on whichever table has that name (also run after a
-- conversion to the partitioned layout, whose new table V4/V5 define without them).
CREATE FUNCTION outbox_events_ensure_checks() RETURNS void
    LANGUAGE plpgsql AS
$$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                    WHERE conrelid = 'outbox_events'::regclass
                      AND conname = 'outbox_events_created_at_in_range') THEN
        ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_created_at_in_range
            CHECK (created_at >= '0001-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00')
            NOT VALID;
    END IF;
END;
$$;

SET LOCAL lock_timeout = '5s';
SELECT outbox_events_ensure_checks();
