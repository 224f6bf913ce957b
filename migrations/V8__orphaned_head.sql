-- A retirement of the head partition (outbox_events_p_head: every row before the first dated
-- partition, e.g. a converted backlog) that stopped between its detach and its drop left the head
-- detached for good: orphans were recognised by a dated name only. The head is now one too: its
-- upper bound is where the oldest attached partition starts, and outbox_partition_drop_detached
-- drops it, or attaches it back when it holds something to keep. Replacing a function takes no
-- lock on outbox_events: no downtime.

CREATE OR REPLACE FUNCTION outbox_partitions_orphaned(retention_secs float8)
    RETURNS TABLE (name text, lo timestamptz, hi timestamptz)
    LANGUAGE plpgsql STABLE
    SET timezone TO 'UTC' SET datestyle TO 'ISO, YMD' AS
$$
DECLARE
    g text := (SELECT p.granularity FROM outbox_partitioning p);
    ns oid := (SELECT o.relnamespace FROM pg_class o WHERE o.oid = 'outbox_events'::regclass);
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
               AND c.relnamespace = ns
               AND c.relname ~ CASE g WHEN 'hourly' THEN '^outbox_events_p[0-9]{10}$' ELSE '^outbox_events_p[0-9]{8}$' END
               AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)) t
     WHERE t.lo + outbox_partition_step(g) <= now() - make_interval(secs => retention_secs);
    -- The head, whatever its age: outbox_partition_drop_detached keeps it (attached back) while
    -- it may still be written to or holds rows to keep.
    RETURN QUERY
    SELECT c.relname::text, NULL::timestamptz,
           (SELECT min(l.lo) FROM outbox_partition_list() l WHERE l.lo IS NOT NULL)
      FROM pg_class c
     WHERE c.relkind = 'r'
       AND c.relnamespace = ns
       AND c.relname = 'outbox_events_p_head'
       AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
       AND EXISTS (SELECT 1 FROM outbox_partition_list() l WHERE l.lo IS NOT NULL);
END;
$$;
