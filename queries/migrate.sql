-- Serialises concurrent `migrate` calls (several relays starting at once) with a session-level
-- advisory lock.

--! lock_schema
SELECT true AS locked FROM pg_advisory_lock(:key);

--! unlock_schema
SELECT pg_advisory_unlock(:key) AS unlocked;
