//! A database role with only the relay's grants, as the README's least-privilege section gives it.

use outbox_tests::{TestDb, TestRole};

/// A database role that may only read and update the outbox's relay columns (no DDL, no business
/// tables): what the README's least-privilege grants give the relay. Dropped with the guard.
pub struct RelayRole(TestRole);

impl RelayRole {
    /// Creates the role on `db`'s server with the documented grants on `db`.
    pub async fn create(db: &TestDb) -> RelayRole {
        let role = TestRole::create(db, "outbox_relay", "LOGIN").await;
        db.execute(&format!(
            "GRANT CONNECT ON DATABASE {db} TO {name};
             GRANT USAGE ON SCHEMA public TO {name};
             GRANT SELECT ON outbox_events, outbox_schema_history TO {name};
             GRANT UPDATE (attempts, retry_after, last_error, processed_at, dead_lettered_at)
                 ON outbox_events TO {name};",
            db = db.name(),
            name = role.name()
        ))
        .await;
        RelayRole(role)
    }

    /// `db`'s URL with this role as the user.
    pub fn url(&self, db: &TestDb) -> String {
        self.0.url(db)
    }

    /// The role's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }
}
