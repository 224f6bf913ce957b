-- Adaptive wake-ups: notify only while a relay is waiting for work.
--
-- A NOTIFY takes a database-wide lock from queueing the notification to the commit flush, which
-- serialises committing writers. A relay whose workers are all idle holds the advisory lock
-- (1869968504, 1) exclusively (see `outbox_core::WAITING_LOCK`); the trigger notifies only when it
-- cannot take that lock in shared mode. When it can, it keeps it to the end of the transaction: a
-- relay that starts waiting afterwards first waits for this transaction to end, then claims, and
-- so sees its events. A busy relay releases the lock and claims again on its own.
--
-- Replacing the function is atomic and takes no lock on outbox_events: no downtime. Relays of an
-- earlier version (which LISTEN but never take the lock) get no notifications any more and fall
-- back to their poll interval until they are upgraded.
CREATE OR REPLACE FUNCTION outbox_events_notify() RETURNS trigger
    LANGUAGE plpgsql AS
$$
BEGIN
    IF NOT pg_try_advisory_xact_lock_shared(1869968504, 1) THEN
        PERFORM pg_notify('outbox_events', '');
    END IF;
    RETURN NULL;
END;
$$;
