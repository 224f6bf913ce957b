-- Wake-ups that cost writers nothing while no relay waits (issue 18, goals 1 and 2).
--
-- The NOTIFY trigger (V3) called its plpgsql function after every inserting statement, which
-- tried the waiting lock and, with no relay waiting, returned: a trigger event queued and a
-- function call per statement, measured at 3-4 % of throughput with 8 writers. The lock is now
-- tried in the trigger's WHEN condition, which PostgreSQL evaluates at the end of the inserting
-- statement, when it would queue the trigger's event (the function ran just after, at the end of
-- the query): while no relay waits, nothing is queued and no function runs. The writer takes the
-- lock in shared mode at that moment and keeps it to the end of its transaction as before, so a
-- relay that starts waiting still waits for the writers in flight first (no lost wake-up:
-- `relay/waiting.rs`). While a relay waits, the WHEN condition is
-- true and the function runs; it tries the lock again (and notifies), so it stays correct on a
-- trigger installed without the condition.
--
-- The conversion to the partitioned layout (V7's function, kept under the name
-- outbox_partitions_convert_table) creates the trigger without the condition; the new
-- outbox_partitions_convert calls it and then adds the condition.
--
-- Replacing the trigger (CREATE OR REPLACE TRIGGER, PostgreSQL 14 and later) takes a SHARE ROW
-- EXCLUSIVE lock on outbox_events for an instant: writers and the relays' marks wait, reads and
-- claims do not. (Before PostgreSQL 14 it is dropped and made again, which takes ACCESS EXCLUSIVE
-- for that instant: every reader waits too.) `lock_timeout` bounds how long they could queue
-- behind it if a long transaction holds the table (the migration then fails and can simply be run
-- again).
SET LOCAL lock_timeout = '5s';

-- Gives the NOTIFY trigger of outbox_events the waiting-lock condition if it lacks it, keeping
-- whether it is enabled. A database whose trigger was dropped on purpose keeps none.
CREATE OR REPLACE FUNCTION outbox_events_notify_guard() RETURNS void
    LANGUAGE plpgsql AS
$$
DECLARE
    enabled "char";
BEGIN
    SELECT t.tgenabled INTO enabled FROM pg_trigger t
     WHERE t.tgrelid = 'outbox_events'::regclass AND t.tgname = 'outbox_events_notify'
       AND t.tgqual IS NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'CREATE OR REPLACE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
                     FOR EACH STATEMENT WHEN (NOT pg_try_advisory_xact_lock_shared(1869968504, 1))
                     EXECUTE FUNCTION outbox_events_notify()';
    ELSE
        DROP TRIGGER outbox_events_notify ON outbox_events;
        EXECUTE 'CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
                     FOR EACH STATEMENT WHEN (NOT pg_try_advisory_xact_lock_shared(1869968504, 1))
                     EXECUTE FUNCTION outbox_events_notify()';
    END IF;
    -- A trigger made anew is enabled in the default way ('O'): as it was, if it was not.
    IF enabled = 'D' THEN
        ALTER TABLE outbox_events DISABLE TRIGGER outbox_events_notify;
    ELSIF enabled = 'A' THEN
        ALTER TABLE outbox_events ENABLE ALWAYS TRIGGER outbox_events_notify;
    ELSIF enabled = 'R' THEN
        ALTER TABLE outbox_events ENABLE REPLICA TRIGGER outbox_events_notify;
    END IF;
END;
$$;

SELECT outbox_events_notify_guard();

-- V7's conversion, which makes the trigger without the condition, keeps its settings and grants
-- under this name; call outbox_partitions_convert, which adds the condition after it.
ALTER FUNCTION outbox_partitions_convert(text, int) RENAME TO outbox_partitions_convert_table;

-- The conversion to the partitioned layout (V7), then the trigger's condition.
CREATE FUNCTION outbox_partitions_convert(granularity text, ahead int) RETURNS text
    LANGUAGE plpgsql
    SET timezone TO 'UTC' SET datestyle TO 'ISO, YMD' AS
$$
DECLARE
    report text := outbox_partitions_convert_table(granularity, ahead);
BEGIN
    PERFORM outbox_events_notify_guard();
    RETURN report;
END;
$$;
