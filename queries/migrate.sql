-- Serialises concurrent `migrate` calls (several relays starting at once) with a session-level
-- advisory lock.

--! lock_schema
SELECT true AS locked FROM pg_advisory_lock(:key);

--! unlock_schema
SELECT pg_advisory_unlock(:key) AS unlocked;

-- The database's encoding, and whether it is one byte per character. The schema's SQL holds a few
-- characters beyond ASCII (in comments): a database in another encoding than UTF8 takes it with
-- the connection's client encoding at SQL_ASCII (bytes as they come), which a multi-byte encoding
-- (EUC_JP, …) refuses.
--! server_encoding : (encoding, single_byte)
SELECT current_setting('server_encoding') AS encoding,
       pg_encoding_max_length(pg_char_to_encoding(current_setting('server_encoding'))) = 1 AS single_byte;

--! set_client_encoding_bytes
SET client_encoding = 'SQL_ASCII';

--! reset_client_encoding
RESET client_encoding;

-- Whether the schema history table is there (a database never migrated has none).
--! history_exists
SELECT to_regclass('outbox_schema_history') IS NOT NULL AS present;

