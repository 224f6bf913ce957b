-- (1) Events published since a moment, for `outbox stats`' "published (last hour)": the rows of
-- outbox_events and, while it exists, of outbox_events_legacy, where a conversion to the
-- partitioned layout leaves the plain table's published rows (before, those dropped out of the
-- figure for up to an hour after a conversion). The legacy table is read through dynamic SQL: a
-- query naming it would fail once maintenance has dropped it. A STABLE function reads the
-- calling statement's snapshot, so the figure stays consistent with the others of `outbox_stats`.
-- Creating a function takes no lock on outbox_events: no downtime.

CREATE OR REPLACE FUNCTION outbox_published_since(since timestamptz)
    RETURNS bigint
    LANGUAGE plpgsql STABLE AS
$$
DECLARE
    n bigint;
    legacy bigint := 0;
BEGIN
    SELECT count(*) INTO n FROM outbox_events WHERE processed_at > since;
    -- A role that may read outbox_events but not the legacy table (granted after the
    -- conversion) gets the figure without it rather than an error.
    IF to_regclass('outbox_events_legacy') IS NOT NULL
       AND has_table_privilege('outbox_events_legacy', 'SELECT') THEN
        EXECUTE 'SELECT count(*) FROM outbox_events_legacy WHERE processed_at > $1'
            INTO legacy USING since;
    END IF;
    RETURN n + legacy;
END
$$;

-- (2) The pending events and dead letters of one partition (by name), through its unpublished partial
-- index: maintenance warns about an expired partition kept for those, and only says at info that
-- one is kept for rows published within the retention (a converted backlog's head keeps them after
-- every conversion: a warning each run until the retention passed was noise).
CREATE OR REPLACE FUNCTION outbox_partition_unpublished(name text)
    RETURNS bigint
    LANGUAGE plpgsql STABLE AS
$$
DECLARE
    n bigint;
BEGIN
    IF to_regclass(name) IS NULL THEN
        RETURN 0;
    END IF;
    EXECUTE format('SELECT count(*) FROM %I WHERE processed_at IS NULL', name) INTO n;
    RETURN n;
END
$$;
