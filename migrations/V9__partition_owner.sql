-- Partitions belong to the owner of outbox_events, whoever makes them. Maintenance may run as a
-- member of the owning role or as a superuser: the partitions it created were that role's, and the
-- owner (its cron job, its relays) then could not retire them ("must be owner of table
-- outbox_events_p..."), nor carve the tail it had not made: its run failed after detaching the tail,
-- which stayed detached, and once the partitions made ahead ran out every insert would have failed.
--
-- 1. outbox_partition_add gives each new partition to the owner of outbox_events.
-- 2. outbox_partitions_reown gives every partition of another owner (attached, or detached by an
--    interrupted maintenance) to the owner of outbox_events where the current role may (it is a
--    member of both roles: a superuser always is), and names the rest. Maintenance runs it first
--    and refuses to start while any is left, before it has changed anything. It runs here too.
--
-- Replacing functions takes no lock on outbox_events; giving a partition to the owner locks that
-- partition for a moment, waiting at most 5 s for it (then this fails with nothing changed, to be
-- run again).

CREATE OR REPLACE FUNCTION outbox_partition_add(name text, lo timestamptz, hi timestamptz) RETURNS void
    LANGUAGE plpgsql
    SET timezone TO 'UTC' SET datestyle TO 'ISO, YMD' AS
$$
DECLARE
    owner oid := (SELECT c.relowner FROM pg_class c WHERE c.oid = 'outbox_events'::regclass);
BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE outbox_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS) WITH (fillfactor = 60)', name);
    IF owner <> (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user) THEN
        EXECUTE format('ALTER TABLE %I OWNER TO %I', name, pg_get_userbyid(owner));
    END IF;
    PERFORM outbox_partition_attach(name, lo, hi);
END;
$$;

CREATE OR REPLACE FUNCTION outbox_partitions_reown() RETURNS text[]
    LANGUAGE plpgsql
    SET timezone TO 'UTC' SET datestyle TO 'ISO, YMD' SET lock_timeout TO '5s' AS
$$
DECLARE
    owner oid := (SELECT c.relowner FROM pg_class c WHERE c.oid = 'outbox_events'::regclass);
    part record;
    left_over text[] := '{}';
BEGIN
    FOR part IN SELECT c.oid::regclass AS rel, c.relname::text AS name, c.relowner AS relowner
                  FROM pg_class c
                 WHERE c.relkind = 'r'
                   AND c.relowner <> owner
                   AND c.relnamespace = (SELECT o.relnamespace FROM pg_class o WHERE o.oid = 'outbox_events'::regclass)
                   AND (c.oid IN (SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = 'outbox_events'::regclass)
                        OR c.relname ~ '^outbox_events_p([0-9]{8}|[0-9]{10}|_head|_tail)$')
                 ORDER BY c.relname
    LOOP
        IF pg_has_role(current_user, part.relowner, 'MEMBER') AND pg_has_role(current_user, owner, 'MEMBER') THEN
            EXECUTE format('ALTER TABLE %s OWNER TO %I', part.rel, pg_get_userbyid(owner));
        ELSE
            left_over := left_over || format('%s (owned by %s)', part.name, pg_get_userbyid(part.relowner));
        END IF;
    END LOOP;
    RETURN left_over;
END;
$$;

SELECT outbox_partitions_reown();
