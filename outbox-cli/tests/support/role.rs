//! A database role with only the relay's grants, as the README's least-privilege section gives it.

use std::time::Duration;

use outbox_tests::TestDb;

/// A database role that may only read and update the outbox's relay columns (no DDL, no business
/// tables): what the README's least-privilege grants give the relay.
pub struct RelayRole {
    name: String,
    /// The database holding the role's grants.
    database: String,
}

impl RelayRole {
    /// Creates the role on `db`'s server with the documented grants on `db`.
    pub async fn create(db: &TestDb) -> RelayRole {
        let name = format!("outbox_relay_{}", &db.name()["outbox_test_".len()..][..12]);
        let admin = db.connect().await;
        admin
            .batch_execute(&format!(
                "CREATE ROLE {name} LOGIN;
                 GRANT CONNECT ON DATABASE {db} TO {name};
                 GRANT USAGE ON SCHEMA public TO {name};
                 GRANT SELECT ON outbox_events, outbox_schema_history TO {name};
                 GRANT UPDATE (attempts, retry_after, last_error, processed_at, dead_lettered_at)
                     ON outbox_events TO {name};",
                db = db.name()
            ))
            .await
            .expect("create the relay role");
        RelayRole {
            name,
            database: db.name().to_string(),
        }
    }

    /// `db`'s URL with this role as the user.
    pub fn url(&self, db: &TestDb) -> String {
        db.url()
            .replacen("postgres@", &format!("{}@", self.name), 1)
    }

    /// The role's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for RelayRole {
    fn drop(&mut self) {
        let name = self.name.clone();
        let database = self.database.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(drop_role(name, database));
        })
        .join();
    }
}

/// Drops role `name`. A role holding grants cannot be dropped, and a test drops its role before
/// its database (locals drop in reverse): in the database, `DROP OWNED BY` revokes them first
/// (it left every role behind, ~30 per run of the suite, as `DROP ROLE` alone was refused until it
/// gave up). Once the database is gone, its grants went with it.
async fn drop_role(name: String, database: String) {
    let admin: tokio_postgres::Config = outbox_tests::db::database_url().parse().unwrap();
    let mut in_database = admin.clone();
    in_database.dbname(&database);
    if let Ok((client, conn)) = in_database.connect(tokio_postgres::NoTls).await {
        tokio::spawn(conn);
        let dropped = client
            .batch_execute(&format!("DROP OWNED BY {name}; DROP ROLE IF EXISTS {name}"))
            .await;
        if dropped.is_ok() {
            return;
        }
    }
    if let Ok((client, conn)) = admin.connect(tokio_postgres::NoTls).await {
        tokio::spawn(conn);
        // The database may be on its way out; retry briefly.
        for _ in 0..20 {
            let dropped = client
                .batch_execute(&format!("DROP ROLE IF EXISTS {name}"))
                .await;
            if dropped.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
