-- Wake-ups that cost writers nothing while no relay waits (issue 18, goals 1 and 2).
--
-- The NOTIFY trigger (V3) called its plpgsql function after every inserting statement, which
-- tried the waiting lock and, with no relay waiting, returned: a trigger event queued and a
-- function call per statement, measured at 3–4 % of throughput with 8 writers. The lock is now
-- tried in the trigger's WHEN condition, which PostgreSQL evaluates in the executor at the end of
-- the statement, where the function ran before: while no relay waits, nothing is queued and no
-- function runs. The writer takes the lock in shared mode at the same moment and keeps it to the
-- end of its transaction as before, so a relay that starts waiting still waits for the writers in
-- flight first (no lost wake-up: `relay/waiting.rs`). While a relay waits, the WHEN condition is
-- true and the function runs; it tries the lock again (and notifies), so it stays correct on a
-- trigger installed without the condition.
--
-- The conversion to the partitioned layout (V7's function, kept under the name
-- outbox_partitions_convert_table) creates the trigger without the condition; the new
-- outbox_partitions_convert calls it and then adds the condition.
--
-- Replacing a trigger takes a SHARE ROW EXCLUSIVE lock on outbox_events for an instant (writers
-- wait, readers do not); `lock_timeout` bounds how long writers could queue behind it if a long
-- transaction holds the table (the migration then fails and can simply be run again).
SET LOCAL lock_timeout = '5s';

-- Gives outbox_events the NOTIFY trigger with the waiting-lock condition, unless it has it.
CREATE OR REPLACE FUNCTION outbox_events_notify_install() RETURNS void
    LANGUAGE plpgsql AS
$$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger
                WHERE tgrelid = 'outbox_events'::regclass AND tgname = 'outbox_events_notify'
                  AND tgqual IS NOT NULL) THEN
        RETURN;
    END IF;
    DROP TRIGGER IF EXISTS outbox_events_notify ON outbox_events;
    CREATE TRIGGER outbox_events_notify
        AFTER INSERT ON outbox_events
        FOR EACH STATEMENT
        WHEN (NOT pg_try_advisory_xact_lock_shared(1869968504, 1))
        EXECUTE FUNCTION outbox_events_notify();
END;
$$;

SELECT outbox_events_notify_install();

ALTER FUNCTION outbox_partitions_convert(text, int) RENAME TO outbox_partitions_convert_table;

-- The conversion to the partitioned layout (V7), then the trigger's condition.
CREATE FUNCTION outbox_partitions_convert(granularity text, ahead int) RETURNS text
    LANGUAGE plpgsql
    SET timezone TO 'UTC' SET datestyle TO 'ISO, YMD' AS
$$
DECLARE
    report text := outbox_partitions_convert_table(granularity, ahead);
BEGIN
    PERFORM outbox_events_notify_install();
    RETURN report;
END;
$$;
