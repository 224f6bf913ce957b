//! Helpers for tests of the partitioned layout.

use std::time::{Duration, Instant};

use outbox_core::partition::{self, MaintainOptions, MaintenanceReport};

use crate::TestDb;

impl TestDb {
    /// One maintenance run of the test's own; panics if it fails. A relay's housekeeping may hold
    /// the maintainers' election lock for a moment (its first round starts with the relay): a run
    /// skipped for that is tried again, for up to 10 s.
    pub async fn maintain(&self, options: &MaintainOptions) -> MaintenanceReport {
        let client = self.connect().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = partition::maintain(&client, options)
                .await
                .expect("maintenance succeeds");
            if !r.skipped {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "another maintainer held the lock for 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Runs `statements` (simple query protocol) on a fresh connection; panics with them on error.
    pub async fn execute(&self, statements: &str) {
        self.connect()
            .await
            .batch_execute(statements)
            .await
            .unwrap_or_else(|e| panic!("{statements}: {e:?}"));
    }

    /// Gives every table and view of the database's `public` schema (the outbox's, partitions
    /// included) to `role`, and lets it create tables there: as when that role ran `outbox
    /// migrate` and maintains the partitions.
    pub async fn give_tables_to(&self, role: &str) {
        self.execute(&format!(
            "GRANT CREATE, USAGE ON SCHEMA public TO {role};
             DO $$
             DECLARE r regclass;
             BEGIN
                 FOR r IN SELECT c.oid::regclass FROM pg_class c
                           WHERE c.relnamespace = 'public'::regnamespace
                             AND c.relkind IN ('r', 'p', 'v')
                 LOOP
                     EXECUTE format('ALTER TABLE %s OWNER TO {role}', r);
                 END LOOP;
             END $$;"
        ))
        .await;
    }

    /// The partitions of `outbox_events`, oldest first (empty on the plain layout).
    pub async fn partition_names(&self) -> Vec<String> {
        outbox_core::partition::list_partitions(&self.connect().await)
            .await
            .expect("list partitions")
            .into_iter()
            .map(|p| p.name)
            .collect()
    }

    /// On an hourly partitioned layout whose head was dropped: a partition for each hour `k` of
    /// `hours` hours before the current hour's start, each with `rows` events written then and
    /// published an hour ago (so past a retention of up to an hour).
    pub async fn add_old_hours(&self, hours: std::ops::RangeInclusive<i32>, rows: i32) {
        for k in hours {
            self.execute(&format!(
                "SELECT outbox_partition_add(outbox_partition_name(lo, 'hourly'), lo, lo + interval '1 hour')
                   FROM (SELECT date_trunc('hour', now(), 'UTC') - interval '{k} hours' AS lo) t;
                 INSERT INTO outbox_events
                        (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
                 SELECT 'old', i::text, 'old.event', '{{}}',
                        date_trunc('hour', now(), 'UTC') - interval '{k} hours' + interval '1 minute',
                        now() - interval '1 hour'
                   FROM generate_series(1, {rows}) i;"
            ))
            .await;
        }
    }
}
