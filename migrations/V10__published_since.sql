-- Events published since a moment, for `outbox stats`' "published (last hour)": the rows of
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
    IF to_regclass('outbox_events_legacy') IS NOT NULL THEN
        EXECUTE 'SELECT count(*) FROM outbox_events_legacy WHERE processed_at > $1'
            INTO legacy USING since;
    END IF;
    RETURN n + legacy;
END
$$;
