-- The relay's hot path: claim, acknowledge, record failures.

-- Payload and metadata are selected as text: the relay never parses them (a payload serde_json would
-- refuse, e.g. nested deeper than 127 levels, must not fail the claim).
-- Every claim also has a byte budget: it returns the longest prefix (in `seq` order) of the rows it
-- locked whose payloads, before the last row, stay under `max_bytes` — so always at least one row.
-- Rows past the budget stay locked until the batch commits but are not loaded into the relay.
--: ClaimedRow()

-- Claim the oldest due events, skipping rows another relay holds. No per-aggregate order.
--! fetch_outbox_batch : ClaimedRow
SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, created_at
  FROM (SELECT c.*, sum(octet_length(c.payload)) OVER (ORDER BY c.seq) AS running_bytes
          FROM (
               SELECT id, seq, aggregate_type, aggregate_id, event_type, payload::text AS payload, metadata::text AS metadata,
                      attempts, created_at
                 FROM outbox_events
                WHERE processed_at IS NULL
                  AND dead_lettered_at IS NULL
                  AND (retry_after IS NULL OR retry_after <= now())
                ORDER BY seq
                LIMIT :batch_size
                  FOR UPDATE SKIP LOCKED
               ) c) w
 WHERE w.running_bytes - octet_length(w.payload) < :max_bytes
 ORDER BY w.seq;

-- Claim the head of each aggregate: a due event with no earlier unpublished (pending, waiting for retry
-- or dead) event of its aggregate. Holding the head's row lock reserves the whole aggregate: no other
-- relay can claim a later event of it while the head is unpublished.
-- Fast path: look for heads among the oldest `window` pending events only, so the cost stays bounded
-- when a few aggregates carry a long backlog (most pending rows are then not heads). Only the first
-- pending event of each aggregate in the window can be a head (any later one has it before it), so
-- only those are checked: one probe per aggregate in the window, not one per event.
-- Hot aggregates are shared out among concurrent claims: when the window holds a full batch for each
-- of `workers` claims, one claim takes at most ceil(A / workers) heads (A: the aggregates in the
-- window), and fills its batch with their followers instead. Without that, the first claim took every
-- hot aggregate's head and the other claims found nothing until it committed: one batch at a time.
-- `share` is that limit and `window_end` the window's last `seq` (the same on every row): heads of
-- aggregates beyond the window are then looked for by the slow path (`after` = `window_end`).
-- `window_rows` is how many pending events the window holds (the same on every row; fewer than
-- `window` means it holds them all) and `in_window` how many of them are the head's aggregate's: with
-- a window that is not full, nothing lies beyond it, and a head alone in it has no followers, so the
-- claim skips both look-ups (one statement at light load instead of three).
--: HeadRow()
--! fetch_outbox_heads : HeadRow
SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, created_at, share,
       window_end, window_rows, in_window
  FROM (SELECT c.*, sum(octet_length(c.payload)) OVER (ORDER BY c.seq) AS running_bytes
          FROM (
               WITH win AS MATERIALIZED (
                        SELECT id, created_at, seq, aggregate_type, aggregate_id
                          FROM outbox_events
                         WHERE processed_at IS NULL AND dead_lettered_at IS NULL
                         ORDER BY seq
                         LIMIT :window),
                    -- The first event of each aggregate in the window (hashed: no sort of the window).
                    firsts AS MATERIALIZED (
                        SELECT min(seq) AS seq, count(*) AS n FROM win GROUP BY aggregate_type, aggregate_id),
                    -- Less the heads this relay's other batches hold (`held`): they are locked, and
                    -- leaving them out here (hashed) saves a probe and a lock attempt each.
                    free AS MATERIALIZED (
                        SELECT seq FROM firsts EXCEPT SELECT unnest(:held::bigint[])),
                    share AS (
                        SELECT CASE WHEN (SELECT count(*) FROM win) < :batch_size * :workers::bigint
                                    THEN :batch_size
                                    ELSE least(:batch_size, greatest(1, (count(*) + :workers::bigint - 1) / :workers::bigint))
                               END AS n
                          FROM firsts)
               SELECT e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload::text AS payload,
                      e.metadata::text AS metadata, e.attempts,
                      e.created_at, (SELECT n FROM share) AS share,
                      (SELECT max(seq) FROM win) AS window_end, (SELECT count(*) FROM win) AS window_rows,
                      firsts.in_window
                 -- By the primary key: (id, created_at) on the partitioned layout, so each probe
                 -- goes to one partition.
                 -- Oldest first, from this claim's `slot` on (wrapping around): concurrent claims
                 -- start at different heads instead of each trying the others' fresh locks first.
                 FROM (SELECT r.id, r.created_at, r.seq, r.in_window,
                              (r.i + r.n - (:slot::bigint * ((r.n + :workers::bigint - 1) / :workers::bigint)) % r.n) % r.n AS k
                         FROM (SELECT w.id, w.created_at, w.seq, fi.n AS in_window,
                                      row_number() OVER (ORDER BY w.seq) - 1 AS i, count(*) OVER () AS n
                                 FROM win w
                                 JOIN free f ON f.seq = w.seq
                                 JOIN firsts fi ON fi.seq = w.seq) r
                        ORDER BY k) firsts
                 JOIN outbox_events e ON e.id = firsts.id AND e.created_at = firsts.created_at
                WHERE e.processed_at IS NULL
                  AND e.dead_lettered_at IS NULL
                  AND (e.retry_after IS NULL OR e.retry_after <= now())
                  -- An earlier unpublished event of the aggregate that is still pending lies in the
                  -- window (the window is the oldest pending events), so `firsts` already left it
                  -- out: only an earlier dead letter can block this head (the small blocking index).
                  AND NOT EXISTS (
                          SELECT 1
                            FROM outbox_events b
                           WHERE b.aggregate_type = e.aggregate_type
                             AND b.aggregate_id = e.aggregate_id
                             AND b.processed_at IS NULL
                             AND b.dead_lettered_at IS NOT NULL
                             AND b.seq < e.seq)
                ORDER BY firsts.k
                LIMIT (SELECT n FROM share)
                  FOR UPDATE OF e SKIP LOCKED
               ) c) w
 WHERE w.running_bytes - octet_length(w.payload) < :max_bytes
 ORDER BY w.seq;

-- Whether pending events lie beyond the fast path's window (then heads may hide there).
--! outbox_pending_beyond
SELECT EXISTS (
    SELECT 1
      FROM outbox_events
     WHERE processed_at IS NULL AND dead_lettered_at IS NULL
     ORDER BY seq
    OFFSET :window
     LIMIT 1) AS beyond;

-- Slow path: the first unpublished event of every aggregate, found by skipping through the aggregate
-- index (one probe per aggregate with unpublished events, however long their backlogs), keeping those
-- that are due and not dead, oldest first. `exclude` holds heads this transaction already claimed;
-- only heads after `after` (a `seq`) are taken: beyond the fast path's window when that window's
-- heads are shared out among claims (see `fetch_outbox_heads`), so the slow path claims the quiet
-- aggregates behind a hot backlog without taking the hot heads other claims are meant to get.
--! fetch_outbox_heads_by_aggregate : ClaimedRow
SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, created_at
  FROM (SELECT c.*, sum(octet_length(c.payload)) OVER (ORDER BY c.seq) AS running_bytes
          FROM (
               WITH RECURSIVE firsts AS (
                   (SELECT aggregate_type, aggregate_id, seq
                      FROM outbox_events
                     WHERE processed_at IS NULL
                     ORDER BY aggregate_type, aggregate_id, seq
                     LIMIT 1)
                   UNION ALL
                   (SELECT n.aggregate_type, n.aggregate_id, n.seq
                      FROM firsts f,
                           LATERAL (SELECT o.aggregate_type, o.aggregate_id, o.seq
                                      FROM outbox_events o
                                     WHERE o.processed_at IS NULL
                                       AND (o.aggregate_type, o.aggregate_id) > (f.aggregate_type, f.aggregate_id)
                                     ORDER BY o.aggregate_type, o.aggregate_id, o.seq
                                     LIMIT 1) n)
               )
               -- Each first, oldest first, looked up on its own (one index probe, and the lock, per
               -- first, only until the batch is full) — never a join the planner could turn into a
               -- scan of every pending row per first when its statistics are stale.
               SELECT e.*
                 FROM (SELECT aggregate_type, aggregate_id, seq FROM firsts WHERE seq > :after ORDER BY seq) f,
                      LATERAL (SELECT o.id, o.seq, o.aggregate_type, o.aggregate_id, o.event_type,
                                      o.payload::text AS payload, o.metadata::text AS metadata, o.attempts,
                                      o.created_at
                                 FROM outbox_events o
                                WHERE o.aggregate_type = f.aggregate_type
                                  AND o.aggregate_id = f.aggregate_id
                                  AND o.seq = f.seq
                                  AND o.processed_at IS NULL
                                  AND o.dead_lettered_at IS NULL
                                  AND (o.retry_after IS NULL OR o.retry_after <= now())
                                  AND o.id <> ALL(:exclude)
                                  FOR UPDATE SKIP LOCKED) e
                ORDER BY f.seq
                LIMIT :batch_size
               ) c) w
 WHERE w.running_bytes - octet_length(w.payload) < :max_bytes
 ORDER BY w.seq;

-- The due events that follow claimed heads in their aggregates, up to the first one that is waiting for
-- a retry or dead. The heads' locks already reserve these aggregates.
-- Shared out evenly among the heads: each aggregate's followers are ranked (its first follower 1, the
-- next 2, ...) and the batch takes them rank by rank, so that every aggregate gets about the same number
-- (more where others have fewer). With per-aggregate order a batch publishes in waves, one event per
-- aggregate each, so the batch's longest run of one aggregate is its number of sequential calls: taken
-- in `seq` order instead, one of three hot aggregates often got half of the batch (about 40 waves for
-- 100 events where 34 do). Each aggregate is read through its own index range, at most `limit` rows.
--! fetch_outbox_followers : ClaimedRow
WITH chosen AS MATERIALIZED (
       SELECT f.id, f.created_at, f.seq, h.aggregate_type, h.aggregate_id
         FROM unnest(:aggregate_types::text[], :aggregate_ids::text[], :head_seqs::bigint[])
              AS h(aggregate_type, aggregate_id, seq)
        -- The first event after the head that holds the rest back (waiting for a
        -- retry, or dead): one probe of the small blocking index per head, however
        -- many followers (a check per follower cost a probe each when the planner
        -- did not keep its result: 582 of the claim's 1 243 buffers with 1 000 000
        -- published rows in the table, benchmark 5).
        CROSS JOIN LATERAL (
              SELECT coalesce(min(b.seq), 9223372036854775807) AS seq
                FROM outbox_events b
               WHERE b.aggregate_type = h.aggregate_type
                 AND b.aggregate_id = h.aggregate_id
                 AND b.processed_at IS NULL
                 AND (b.dead_lettered_at IS NOT NULL OR b.retry_after IS NOT NULL)
                 AND b.seq > h.seq
                 AND (b.dead_lettered_at IS NOT NULL OR b.retry_after > now())) blocked
        CROSS JOIN LATERAL (
              SELECT r.id, r.created_at, r.seq, row_number() OVER (ORDER BY r.seq) AS rank
                FROM (SELECT o.id, o.created_at, o.seq
                        FROM outbox_events o
                       -- The row comparisons (with the equalities) bound the
                       -- aggregate index's range, head to blocker, and nothing
                       -- else: walking the pending index from the head's `seq`
                       -- instead, which the planner prefers when its statistics
                       -- show few aggregates, reads the whole backlog behind a head
                       -- with few followers.
                       WHERE o.aggregate_type = h.aggregate_type
                         AND o.aggregate_id = h.aggregate_id
                         AND (o.aggregate_type, o.aggregate_id, o.seq)
                             > (h.aggregate_type, h.aggregate_id, h.seq)
                         AND (o.aggregate_type, o.aggregate_id, o.seq)
                             < (h.aggregate_type, h.aggregate_id, blocked.seq)
                         AND o.processed_at IS NULL
                         AND o.dead_lettered_at IS NULL
                         AND (o.retry_after IS NULL OR o.retry_after <= now())
                       ORDER BY o.aggregate_type, o.aggregate_id, o.seq
                       LIMIT :limit) r) f
        ORDER BY f.rank, f.seq
        LIMIT :limit),
     -- Locked without waiting: a row another transaction holds (an operator's `SELECT … FOR
     -- UPDATE`, a retry or purge under way) is skipped, and so is every later one of its aggregate
     -- (below), so that none is published ahead of it. Waiting for it held the whole batch up to
     -- the statement timeout and then rolled it back, again at every claim, and stalled the other
     -- aggregates the batch had claimed (black-box run).
     locked AS (
       -- By the primary key: (id, created_at) on the partitioned layout.
       SELECT e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload::text AS payload,
              e.metadata::text AS metadata, e.attempts, e.created_at
         FROM chosen
         JOIN outbox_events e ON e.id = chosen.id AND e.created_at = chosen.created_at
        WHERE e.processed_at IS NULL
          AND e.dead_lettered_at IS NULL
          FOR UPDATE OF e SKIP LOCKED),
     -- Per aggregate, the first chosen follower not locked here (held elsewhere, or no longer
     -- pending): nothing from it on is taken.
     gaps AS (
       SELECT c.aggregate_type, c.aggregate_id, min(c.seq) AS seq
         FROM chosen c
        WHERE NOT EXISTS (SELECT 1 FROM locked l WHERE l.id = c.id AND l.created_at = c.created_at)
        GROUP BY c.aggregate_type, c.aggregate_id)
SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, metadata, attempts, created_at
  FROM (SELECT l.*, sum(octet_length(l.payload)) OVER (ORDER BY l.seq) AS running_bytes
          FROM locked l
          LEFT JOIN gaps g ON g.aggregate_type = l.aggregate_type AND g.aggregate_id = l.aggregate_id
         WHERE g.seq IS NULL OR l.seq < g.seq) w
 WHERE w.running_bytes - octet_length(w.payload) < :max_bytes
 ORDER BY w.seq;

-- Acknowledge every published event of a batch in one statement, stamped with the database clock at
-- acknowledgement (`clock_timestamp()`), not the claim transaction's start.
-- `oldest` and `newest` are the smallest and largest `created_at` of the claimed rows: on the
-- partitioned layout PostgreSQL prunes every partition outside that range when the statement starts
-- (`id = ANY(…)` alone probes every partition's primary key: an array parameter cannot prune). The
-- `+ interval '0 s'` is deliberate: it makes the bounds stable expressions, which the planner cannot
-- prune with but the executor can, so a custom plan is no cheaper than the generic one and the
-- prepared statement settles on its generic plan instead of being planned again (~0.3 ms with 30
-- partitions) at every acknowledgement; the generic plan prunes at executor start-up. On the plain
-- layout the bounds are one more condition on the primary-key probe.
-- `last_error` says why an event is not published yet: a published one's is cleared (before, an
-- event put back during an outage kept the outage's text once published, with `attempts` 0).
--! mark_outbox_processed
UPDATE outbox_events
   SET processed_at = clock_timestamp(), retry_after = NULL, last_error = NULL
 WHERE id = ANY(:ids)
   AND created_at >= :oldest::timestamptz + interval '0 s'
   AND created_at <= :newest::timestamptz + interval '0 s'
   AND processed_at IS NULL
RETURNING id;

-- Record every failure of a batch in one statement: attempts + 1 (unless the failure was the
-- destination's, not the event's: `counted` false), the error kept, and either a retry time computed
-- from the database clock at the time of recording (`clock_timestamp()`, not the claim transaction's
-- start) plus the backoff the relay chose, or dead-lettering.
-- Rows are matched by their whole primary key on the partitioned layout, `(id, created_at)`, and
-- `oldest` / `newest` (the smallest and largest of `created_ats`) prune the partitions outside that
-- range when the statement starts, with the generic plan, as in `mark_outbox_processed`.
--! record_outbox_failures
UPDATE outbox_events e
   -- Saturating: an `int` at its top (a row edited by hand) must not fail the statement, which
   -- would roll the whole batch back and leave the row due for ever.
   SET attempts = e.attempts + CASE WHEN f.counted AND e.attempts < 2147483647 THEN 1 ELSE 0 END,
       last_error = f.error,
       retry_after = CASE WHEN f.dead THEN NULL ELSE clock_timestamp() + make_interval(secs => f.delay_secs) END,
       dead_lettered_at = CASE WHEN f.dead THEN clock_timestamp() ELSE NULL END
  FROM unnest(:ids::uuid[], :created_ats::timestamptz[], :errors::text[], :delay_secs::float8[], :dead::bool[],
              :counted::bool[])
       AS f(id, created_at, error, delay_secs, dead, counted)
 WHERE e.id = f.id
   AND e.created_at = f.created_at
   AND e.created_at >= :oldest::timestamptz + interval '0 s'
   AND e.created_at <= :newest::timestamptz + interval '0 s'
   AND e.processed_at IS NULL
RETURNING e.id;

-- Acknowledge by deleting, for a relay with a zero retention (nothing is kept once published):
-- no new row version and no new index entries, the least WAL an acknowledgement can cost.
-- Pruned by creation time like `mark_outbox_processed`.
--! delete_outbox_published
DELETE FROM outbox_events
 WHERE id = ANY(:ids)
   AND created_at >= :oldest::timestamptz + interval '0 s'
   AND created_at <= :newest::timestamptz + interval '0 s'
   AND processed_at IS NULL
RETURNING id;

-- At the relay's shutdown, the events whose broker calls ended after their publish had returned
-- and were accepted (`Publisher::settle`): marked published (or, with a zero retention, deleted), so
-- that the next start does not send them again. No claim holds them and their creation times are
-- not known here: every partition's primary key is probed, once per shutdown. A row another relay
-- has claimed meanwhile is skipped (`SKIP LOCKED`: a shutdown does not wait for its batch), as is
-- one already marked. Returned with its type and age for the relay's metrics.
--: SettledRow()

--! mark_outbox_settled : SettledRow
UPDATE outbox_events e
   SET processed_at = clock_timestamp(), retry_after = NULL, last_error = NULL
 WHERE e.id IN (SELECT id FROM outbox_events
                 WHERE id = ANY(:ids) AND processed_at IS NULL
                   FOR UPDATE SKIP LOCKED)
   AND e.processed_at IS NULL
RETURNING e.event_type, extract(epoch FROM clock_timestamp() - e.created_at)::float8 AS age_secs;

--! delete_outbox_settled : SettledRow
DELETE FROM outbox_events e
 WHERE e.id IN (SELECT id FROM outbox_events
                 WHERE id = ANY(:ids) AND processed_at IS NULL
                   FOR UPDATE SKIP LOCKED)
   AND e.processed_at IS NULL
RETURNING e.event_type, extract(epoch FROM clock_timestamp() - e.created_at)::float8 AS age_secs;

-- Whether the database can store any text the relay writes: its encoding holds every Unicode
-- character (UTF8), or it takes bytes as they come (SQL_ASCII). Elsewhere (LATIN1, WIN1252, …) the
-- relay writes its error texts in ASCII: one character the encoding lacks would fail the failure
-- statement and roll the whole batch back, for ever.
--! server_takes_any_text
SELECT current_setting('server_encoding') IN ('UTF8', 'SQL_ASCII') AS any_text;

-- Whether this session may write: not on a read-only server (a failover's demoted primary, a replica
-- behind the address, `default_transaction_read_only`). The probe that finds the database back while
-- the relay's workers back off after database failures.
--! session_writable
SELECT current_setting('transaction_read_only') = 'off' AS writable;
