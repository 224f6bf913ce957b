-- Operator queries: state at a glance, dead letters, retention.

--! outbox_pending_count
SELECT count(*) AS pending
  FROM outbox_events
 WHERE processed_at IS NULL AND dead_lettered_at IS NULL;

-- Every figure is its own small query over a partial index, so this stays cheap however many rows were
-- ever processed (`outbox stats`; the relay's gauges read the lighter `outbox_gauges`).
--! outbox_stats : (oldest_pending_age_secs?)
SELECT
    (SELECT count(*) FROM outbox_events
      WHERE processed_at IS NULL AND dead_lettered_at IS NULL) AS pending,
    (SELECT count(*) FROM outbox_events
      WHERE processed_at IS NULL AND dead_lettered_at IS NULL
        AND (retry_after IS NULL OR retry_after <= now())) - held.n AS due_now,
    held.n AS held_back,
    (SELECT count(*) FROM outbox_events
      WHERE processed_at IS NULL AND dead_lettered_at IS NULL AND retry_after > now()) AS waiting_retry,
    (SELECT count(*) FROM outbox_events
      WHERE processed_at IS NULL AND dead_lettered_at IS NOT NULL) AS dead_letters,
    -- Never negative: a row dated ahead (written by hand, a clock ahead) is not "-86400 s old".
    (SELECT greatest(extract(epoch FROM now() - created_at), 0)::float8 FROM outbox_events
      WHERE processed_at IS NULL AND dead_lettered_at IS NULL
      ORDER BY seq LIMIT 1) AS oldest_pending_age_secs,
    (SELECT count(*) FROM (SELECT DISTINCT aggregate_type, aggregate_id FROM outbox_events
                            WHERE processed_at IS NULL AND dead_lettered_at IS NOT NULL) d)
        AS blocked_aggregates,
    -- With the rows a conversion to partitions left in outbox_events_legacy (V10).
    outbox_published_since(now() - interval '1 hour') AS published_last_hour
  -- Due, but behind an earlier event of their aggregate that is not (a dead letter, or one waiting
  -- for a retry): a relay keeping per-aggregate order (the default) does not publish them before it.
  -- Driven by those blockers, through the small blocking index.
  FROM (SELECT count(*) AS n
          FROM (SELECT aggregate_type, aggregate_id, min(seq) AS seq FROM outbox_events
                 WHERE processed_at IS NULL
                   AND (dead_lettered_at IS NOT NULL OR retry_after IS NOT NULL)
                   AND (dead_lettered_at IS NOT NULL OR retry_after > now())
                 GROUP BY aggregate_type, aggregate_id) d
          JOIN outbox_events e ON e.aggregate_type = d.aggregate_type
                              AND e.aggregate_id = d.aggregate_id
                              AND e.seq > d.seq
         WHERE e.processed_at IS NULL AND e.dead_lettered_at IS NULL
           AND (e.retry_after IS NULL OR e.retry_after <= now())) held;

-- What the relay's gauges show, refreshed every few seconds: the figures of `outbox_stats` that
-- need no join (its `held_back` probes each blocked aggregate's followers).
--! outbox_gauges : (oldest_pending_age_secs?)
SELECT
    (SELECT count(*) FROM outbox_events
      WHERE processed_at IS NULL AND dead_lettered_at IS NULL) AS pending,
    (SELECT count(*) FROM outbox_events
      WHERE processed_at IS NULL AND dead_lettered_at IS NOT NULL) AS dead_letters,
    (SELECT greatest(extract(epoch FROM now() - created_at), 0)::float8 FROM outbox_events
      WHERE processed_at IS NULL AND dead_lettered_at IS NULL
      ORDER BY seq LIMIT 1) AS oldest_pending_age_secs,
    (SELECT count(*) FROM (SELECT DISTINCT aggregate_type, aggregate_id FROM outbox_events
                            WHERE processed_at IS NULL AND dead_lettered_at IS NOT NULL) d)
        AS blocked_aggregates;

--! list_dead_letters (ids?, event_type?, aggregate_type?, aggregate_id?) : (last_error?)
SELECT id, seq, aggregate_type, aggregate_id, event_type, attempts, last_error, created_at,
       dead_lettered_at
  FROM outbox_dead_letters
 WHERE (:ids::uuid[] IS NULL OR id = ANY(:ids))
   AND (:event_type::text IS NULL OR event_type = :event_type)
   AND (:aggregate_type::text IS NULL OR aggregate_type = :aggregate_type)
   AND (:aggregate_id::text IS NULL OR aggregate_id = :aggregate_id)
 ORDER BY seq
 LIMIT :limit;

-- Makes dead letters claimable again with attempts reset. `ids` NULL = no id filter; every NULL filter
-- matches all dead letters (the caller decides whether that is allowed). When any is retried, the
-- relays are notified at commit (no insert does it for an update): an idle relay claims them then,
-- not at its next poll.
--! retry_dead_letters (ids?, event_type?, aggregate_type?, aggregate_id?)
WITH retried AS (
    UPDATE outbox_events
       SET dead_lettered_at = NULL, attempts = 0, retry_after = NULL
     WHERE dead_lettered_at IS NOT NULL
       AND processed_at IS NULL
       AND (:ids::uuid[] IS NULL OR id = ANY(:ids))
       AND (:event_type::text IS NULL OR event_type = :event_type)
       AND (:aggregate_type::text IS NULL OR aggregate_type = :aggregate_type)
       AND (:aggregate_id::text IS NULL OR aggregate_id = :aggregate_id)
    RETURNING id
), woken AS (
    SELECT count(pg_notify('outbox_events', '')) AS n FROM (SELECT 1 FROM retried LIMIT 1) any_retried
)
SELECT id FROM retried, woken;

-- Deletes dead letters; the later events of their aggregates they held back become claimable, so
-- the relays are notified at commit when any is deleted, as for a retry.
--! purge_dead_letters (ids?, event_type?, aggregate_type?, aggregate_id?)
WITH purged AS (
    DELETE FROM outbox_events
     WHERE dead_lettered_at IS NOT NULL
       AND processed_at IS NULL
       AND (:ids::uuid[] IS NULL OR id = ANY(:ids))
       AND (:event_type::text IS NULL OR event_type = :event_type)
       AND (:aggregate_type::text IS NULL OR aggregate_type = :aggregate_type)
       AND (:aggregate_id::text IS NULL OR aggregate_id = :aggregate_id)
    RETURNING id
), woken AS (
    SELECT count(pg_notify('outbox_events', '')) AS n FROM (SELECT 1 FROM purged LIMIT 1) any_purged
)
SELECT id FROM purged, woken;

-- The ids of the dead letters a filter matches now, oldest first: what an operator is shown and asked
-- about before a purge, which then deletes exactly these ids (`purge_dead_letters_by_id`).
--! dead_letter_ids (ids?, event_type?, aggregate_type?, aggregate_id?)
SELECT id
  FROM outbox_dead_letters
 WHERE (:ids::uuid[] IS NULL OR id = ANY(:ids))
   AND (:event_type::text IS NULL OR event_type = :event_type)
   AND (:aggregate_type::text IS NULL OR aggregate_type = :aggregate_type)
   AND (:aggregate_id::text IS NULL OR aggregate_id = :aggregate_id)
 ORDER BY seq;

-- Deletes these dead letters (one batch of ids per call); a row no longer dead (retried, or published
-- meanwhile) is kept.
--! purge_dead_letters_by_id
DELETE FROM outbox_events
 WHERE id = ANY(:ids)
   AND dead_lettered_at IS NOT NULL
   AND processed_at IS NULL
RETURNING id;

-- Retention: deletes at most `batch_size` processed rows older than the interval; call it until it
-- returns fewer than `batch_size` rows (short statements, no long locks). Rows are matched by the
-- primary key of either layout, (id, created_at), and the condition is repeated: on the partitioned
-- layout an id alone may name more than one row (a pending one among them).
--! delete_processed_before
DELETE FROM outbox_events
 WHERE (id, created_at) IN (SELECT id, created_at FROM outbox_events
                             WHERE processed_at < now() - make_interval(secs => :older_than_secs)
                             ORDER BY processed_at
                             LIMIT :batch_size
                               FOR UPDATE SKIP LOCKED)
   AND processed_at < now() - make_interval(secs => :older_than_secs)
RETURNING id;

-- One event with everything the operator and the tests look at.
--! get_outbox_event : (retry_after?, last_error?, processed_at?, dead_lettered_at?)
SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, retry_after,
       last_error, created_at, processed_at, dead_lettered_at,
       retry_after IS NOT NULL AND retry_after > now() AS waiting_for_retry
  FROM outbox_events
 WHERE id = :id;

-- Bounds the statements of the current transaction (the relay's gauge refresh): the server cancels
-- one that runs longer, and the connection goes back to the pool free.
--! limit_transaction_statements
SELECT set_config('statement_timeout', :millis::text, true) AS applied;

-- The database's clock at this moment (the relay's gauge refresh compares it with its own).
--! database_clock
SELECT clock_timestamp() AS now;

-- A relay pool connection's server session ends itself once it has waited this long for a
-- statement outside a transaction (`idle_session_timeout`). A session whose connection stalled
-- while idle (a middlebox holding its bytes) otherwise stays until the server's TCP time-outs
-- notice, holding a connection slot: with every slot of the relay's role so held, the relay could
-- open no connection to end them, nor could a relay started again. No row (nothing set) on
-- servers before PostgreSQL 14, which have no such setting, nor on a session other than the one
-- the connection's start-up named (`:pid`): a pooler's server connection, which serves other
-- clients too.
--! limit_idle_session
SELECT set_config('idle_session_timeout', :millis::text, false) AS applied
 WHERE current_setting('server_version_num')::int >= 140000 AND pg_backend_pid() = :pid;
