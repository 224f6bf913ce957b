-- The opt-in partitioned layout (migration V4): conversion, maintenance and its figures. The DDL
-- itself lives in V4's plpgsql functions; only `DETACH PARTITION … CONCURRENTLY` / `FINALIZE`, which
-- cannot run inside a function, are issued by outbox_core::partition.

-- Converts the plain outbox_events (outbox_partitions_convert: V7's conversion, then V11's trigger
-- condition), in the caller's transaction.
--! partitions_convert
SELECT outbox_partitions_convert(:granularity::text, :ahead::int) AS report;

-- The table checks added after V4/V5 (V6's outbox_events_ensure_checks), for the converted table.
--! ensure_checks
SELECT outbox_events_ensure_checks()::text AS done;

-- The layout's settings and what the last maintenance found; no row on the plain layout.
--! partitioning_settings : (maintained_at?, retention_secs?)
SELECT granularity, ahead, maintained_at, retention_secs, kept_partitions, kept_events
  FROM outbox_partitioning;

-- A maintenance run made the partitions ahead: when, for `stats` (a run with a retention sets it too,
-- with what it kept).
--! partitions_maintained
UPDATE outbox_partitioning SET maintained_at = now();

-- The safety net's state (one row; every column NULL on the plain layout).
--! partitions_tail : (granularity?, wanted?, tail_lo?, tail_rows?, tail_detach_pending?, carve_safe?)
SELECT granularity, wanted, tail_lo, tail_rows, tail_detach_pending, carve_safe
  FROM outbox_partitions_tail();

-- After the tail was detached: partitions up to `wanted` and a fresh tail; -1 when rows reached it.
--! partitions_carve
SELECT outbox_partitions_carve(:wanted) AS created;

-- Moves rows that reached the tail into proper partitions (blocking; bounded by `lock_timeout_ms`).
--! partitions_drain_tail
SELECT outbox_partitions_drain_tail(:wanted, :lock_timeout_ms::int) AS moved;

-- The rows of the tail partition: after a drain, those it put back, dated past the partitions made
-- ahead (written by hand, a clock far ahead).
--! partitions_tail_rows
SELECT count(*) AS n FROM outbox_events
 WHERE created_at >= (SELECT lo FROM outbox_partition_list() WHERE name = 'outbox_events_p_tail');

-- Advances the horizon before which every transaction of the database has ended (V6), and says how
-- far it must reach for every partition past the retention to be retired; no row on the plain layout.
--! partitions_settle : (settled_before?, needed?)
SELECT settled_before, needed FROM outbox_partitions_settle(:retention_secs::float8);

-- Partitions wholly older than the retention, whether each may be dropped, and whether a
-- transaction that began before its end may still be open (`settling`: left for a later run).
-- `unpublished`: the leftovers that are pending events or dead letters (V10), for a kept one.
--! partitions_expired : (lo?)
SELECT name, lo, hi, droppable, leftovers, detach_pending, settling,
       CASE WHEN leftovers > 0 THEN outbox_partition_unpublished(name) ELSE 0 END AS unpublished
  FROM outbox_partitions_expired(:retention_secs::float8);

-- The pending events and dead letters of one partition (V10).
--! partition_unpublished
SELECT outbox_partition_unpublished(:name::text) AS unpublished;

-- Tables of expired periods left detached by a maintenance that stopped before dropping them (V6),
-- and the head left so whatever its age (V8; `lo` is NULL: it starts at MINVALUE).
--! partitions_orphaned : (lo?)
SELECT name, lo, hi FROM outbox_partitions_orphaned(:retention_secs::float8);

-- Drops a detached partition, or attaches it back when it holds something to keep.
--! partition_drop_detached (lo?)
SELECT outbox_partition_drop_detached(:name::text, :lo::timestamptz, :hi::timestamptz, :retention_secs::float8) AS dropped;

-- Drops the conversion's leftover plain table once its rows are past the retention.
--! partitions_drop_legacy
SELECT outbox_partitions_drop_legacy(:retention_secs::float8) AS dropped;

-- Leader election for maintenance: a session-level advisory lock, tried, never waited for.
--! try_maintenance_lock
SELECT pg_try_advisory_lock(:key) AS locked;

--! maintenance_unlock
SELECT pg_advisory_unlock(:key) AS unlocked;

-- Every partition with its bounds (NULL = unbounded) and row estimate, oldest first. The estimate
-- of a partition never analysed that holds something (reltuples -1: it read 0 for a converted
-- backlog) is the statistics' count of its live rows, kept as rows are written (it read "unknown"
-- for an hourly partition of thousands of rows: black-box run), and NULL when that is 0 too (rows
-- that came in with the partition, or statistics reset); an empty file is 0 rows for sure.
--! partition_list : (lo?, hi?, estimated_rows?)
SELECT l.name, l.lo, l.hi, l.detach_pending,
       CASE WHEN pg_relation_size(c.oid) = 0 THEN 0
            WHEN c.reltuples < 0 THEN nullif(pg_stat_get_live_tuples(c.oid), 0)
            ELSE c.reltuples::int8 END AS estimated_rows
  FROM outbox_partition_list() l
  -- to_regclass: a partition dropped since the list was read is left out, not an error.
  JOIN pg_class c ON c.oid = to_regclass(l.name)
 ORDER BY l.lo NULLS FIRST;

-- Whether `outbox_events` is partitioned, from the catalog, which every role may read (`outbox
-- stats` for a role without SELECT on `outbox_partitioning`, which the plain layout needs not).
--! events_partitioned
SELECT coalesce((SELECT c.relkind = 'p' FROM pg_class c WHERE c.oid = to_regclass('outbox_events')),
                false) AS partitioned;

-- `outbox stats`' partition line; no row on the plain layout.
--! partition_stats : (maintained_at?)
SELECT p.granularity,
       (SELECT count(*) FROM outbox_partition_list() l WHERE l.name <> 'outbox_events_p_tail') AS partitions,
       (SELECT count(*) FROM outbox_events e
         WHERE e.created_at >= (SELECT l.lo FROM outbox_partition_list() l
                                 WHERE l.name = 'outbox_events_p_tail')) AS tail_events,
       p.kept_partitions, p.kept_events, p.maintained_at,
       to_regclass('outbox_events_legacy') IS NOT NULL AS legacy_table,
       EXISTS (SELECT 1 FROM outbox_partition_list() l
                WHERE l.name = 'outbox_events_p_tail' AND NOT l.detach_pending) AS tail_attached
  FROM outbox_partitioning p;

-- The transactions holding outbox_events or a partition (V7): the tail is detached concurrently
-- only once those seen have ended.
--! table_lockers
SELECT outbox_events_lockers() AS lockers;

-- What a claim on the partitioned table locks (every attached partition and each of its indexes:
-- the claims are not pruned by `created_at`) against the server's shared lock table.
--! partition_lock_budget
SELECT (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = 'outbox_events'::regclass) AS partitions,
       (SELECT count(*) FROM pg_index x WHERE x.indrelid = 'outbox_events'::regclass) AS indexes,
       current_setting('max_locks_per_transaction')::int8
           * (current_setting('max_connections')::int8
              + current_setting('max_prepared_transactions')::int8) AS lock_slots;

-- Whether the current role may maintain the partitions: their DDL needs the owner of
-- outbox_events (or a member of the owning role; superusers are members of every role).
--! maintainer_role
SELECT current_user::text AS role, pg_get_userbyid(c.relowner)::text AS owner,
       pg_has_role(current_user, c.relowner, 'USAGE') AS may
  FROM pg_class c
 WHERE c.oid = 'outbox_events'::regclass;

-- Gives every partition of another owner to the owner of outbox_events where the current role
-- may; the rest, as "name (owned by role)".
--! reown_partitions
SELECT outbox_partitions_reown() AS left_over;

-- Sets how many partitions maintenance keeps ahead; the former figure when it changed.
--! set_ahead
UPDATE outbox_partitioning p
   SET ahead = :ahead::int
  FROM (SELECT ahead AS former FROM outbox_partitioning) f
 WHERE p.ahead <> :ahead::int
RETURNING f.former;
