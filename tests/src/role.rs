//! A database role that a test creates and that goes with it.

use std::time::Duration;

use crate::TestDb;

/// A role on the test server, named after the test's database, dropped when this guard drops, with
/// whatever it owns or was granted in that database. Roles are the server's, not the database's:
/// a role a test creates outlives the test's database unless it is dropped (one was left per run
/// of the suite by a test that dropped only one of its two roles).
pub struct TestRole {
    name: String,
    /// The database holding the role's objects and grants.
    database: String,
}

impl TestRole {
    /// Creates role `<prefix>_<12 characters of db's name>` with `options` (`LOGIN`, `CONNECTION
    /// LIMIT 0`, or nothing) on `db`'s server. The name is unique per test database, so tests may
    /// run side by side; the same prefix twice on one database is a test's mistake (the server
    /// refuses it).
    pub async fn create(db: &TestDb, prefix: &str, options: &str) -> TestRole {
        let name = format!("{prefix}_{}", &db.name()["outbox_test_".len()..][..12]);
        db.execute(&format!("CREATE ROLE {name} {options}")).await;
        TestRole {
            name,
            database: db.name().to_string(),
        }
    }

    /// The role's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `db`'s URL with this role as the user.
    pub fn url(&self, db: &TestDb) -> String {
        db.url()
            .replacen("postgres@", &format!("{}@", self.name), 1)
    }
}

impl Drop for TestRole {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.name);
        let database = std::mem::take(&mut self.database);
        // `Drop` cannot await, and the test's runtime may be shutting down: a thread of its own.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(drop_role(&name, &database));
        })
        .join();
    }
}

/// Drops role `name`. A role that owns objects or holds grants cannot be dropped, and a test's
/// roles drop before its database (locals drop in reverse): in the database, what it owns is given
/// to the administrator and what it was granted is revoked first (`DROP OWNED BY` alone would
/// drop what it owns, and is refused where other objects depend on that: the outbox's table and
/// partitions owned by a test's role, left on the server). Once the database is gone, they went
/// with it; the server may still be removing it, so `DROP ROLE` is retried for a few seconds.
async fn drop_role(name: &str, database: &str) {
    let Ok(admin) = crate::db::database_url().parse::<tokio_postgres::Config>() else {
        return;
    };
    let mut in_database = admin.clone();
    in_database.dbname(database);
    if let Ok((client, conn)) = in_database.connect(tokio_postgres::NoTls).await {
        tokio::spawn(conn);
        let dropped = client
            .batch_execute(&format!(
                "REASSIGN OWNED BY {name} TO CURRENT_USER; DROP OWNED BY {name}; \
                 DROP ROLE IF EXISTS {name}"
            ))
            .await;
        if dropped.is_ok() {
            return;
        }
    }
    if let Ok((client, conn)) = admin.connect(tokio_postgres::NoTls).await {
        tokio::spawn(conn);
        for _ in 0..20 {
            let dropped = client
                .batch_execute(&format!("DROP ROLE IF EXISTS {name}"))
                .await;
            if dropped.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn exists(db: &TestDb, name: &str) -> bool {
        db.connect()
            .await
            .query_one("SELECT count(*) FROM pg_roles WHERE rolname = $1", &[&name])
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 1
    }

    /// A role that owns the outbox's tables, with a view of another role's over them, and holds
    /// grants is gone once its guard drops, its database still there.
    #[tokio::test]
    async fn a_dropped_role_owning_tables_leaves_no_role_behind() {
        let db = TestDb::new().await;
        let role = TestRole::create(&db, "outbox_role_test", "LOGIN").await;
        let name = role.name().to_string();
        db.give_tables_to(&name).await;
        // Something of the administrator's depends on what the role owns.
        db.execute("CREATE VIEW role_test_ids AS SELECT id FROM outbox_events")
            .await;
        db.execute(&format!(
            "GRANT CONNECT ON DATABASE {} TO {name}",
            db.name()
        ))
        .await;
        assert!(exists(&db, &name).await, "the role was created");
        drop(role);
        assert!(
            !exists(&db, &name).await,
            "role {name} is left on the server"
        );
    }
}
