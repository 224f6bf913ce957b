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

-- The server session of a relay connection (the LISTEN one, the one advertising waiting), so that
-- once the connection stalls without closing, the next one can end the session it leaves behind: a
-- stalled LISTEN session stops reading notifications and holds back the server's notification
-- queue; a stalled advertising one keeps the waiting lock, and every writer notifies.
--! this_session
SELECT pid, (extract(epoch FROM backend_start) * 1000000)::bigint AS started_us
FROM pg_stat_activity WHERE pid = pg_backend_pid();

-- Ends that session if it is still there (same process id and start time: not a later session
-- that reuses the id, nor another server's after a fail-over). A relay may end its own role's
-- sessions.
--! end_stalled_session
SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
WHERE pid = :pid AND (extract(epoch FROM backend_start) * 1000000)::bigint = :started_us;

-- How a session is doing, seen from another connection: housekeeping watches its own connection
-- this way while a round runs, for a statement may rightly take minutes (a retention delete, a
-- detach waiting for old transactions) but a session waiting for a statement that never came, or
-- done with one whose answer never arrived, has stalled (a claim's round trip that goes unanswered
-- is watched too). No row: the session has ended (the connection never heard). `idle_us`: how long
-- the session has waited for the client's next statement (NULL while one runs or waits for a
-- lock); `in_transaction`: whether it waits inside a transaction; `state_change_us`: when it began
-- to wait (to end it only if it still does: `end_idle_session`).
--! session_state : (idle_us?, state_change_us?)
SELECT CASE WHEN state LIKE 'idle%'
            THEN (extract(epoch FROM clock_timestamp() - state_change) * 1000000)::bigint
       END AS idle_us,
       coalesce(state LIKE 'idle in transaction%', false) AS in_transaction,
       (extract(epoch FROM state_change) * 1000000)::bigint AS state_change_us
FROM pg_stat_activity
WHERE pid = :pid AND (extract(epoch FROM backend_start) * 1000000)::bigint = :started_us;

-- Ends that session if it still waits where `session_state` saw it begin to wait: not once the
-- statement that was late has arrived after all, nor once it has been answered.
--! end_idle_session
SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
WHERE pid = :pid AND (extract(epoch FROM backend_start) * 1000000)::bigint = :started_us
  AND state LIKE 'idle%'
  AND (extract(epoch FROM state_change) * 1000000)::bigint = :state_change_us;
