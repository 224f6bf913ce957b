-- Wake-ups: the relay listens on the channel the insert trigger notifies.

--! listen_outbox_events
LISTEN outbox_events;

-- The LISTEN connection's check after a quiet spell: a connection stalled without closing (a
-- middlebox holding the server's bytes) answers nothing, and is replaced.
--! listener_alive
SELECT 1 AS alive;

-- Adaptive wake-ups (see migration V3): a relay whose workers are all idle holds the waiting lock
-- exclusively on a connection of its own, so the insert trigger, unable to take it shared, notifies.
-- Taking it waits for every writer that holds it shared (their transactions end first): the relay
-- claims once more afterwards. Session-level: released by `stop_advertising_waiting` or with the
-- connection. The key pair is `outbox_core::WAITING_LOCK`.
--! advertise_waiting
SELECT count(*) AS n FROM (SELECT pg_advisory_lock(1869968504, 1)) l;

--! stop_advertising_waiting
SELECT pg_advisory_unlock(1869968504, 1) AS released;
