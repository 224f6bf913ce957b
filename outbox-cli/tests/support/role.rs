//! A database role with only the relay's grants, as the README's least-privilege section gives it.

use std::time::Duration;

use outbox_tests::TestDb;

/// A database role that may only read and update the outbox's relay columns (no DDL, no business
/// tables): what the README's least-privilege grants give the relay.
pub struct RelayRole {
    name: String,
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
        RelayRole { name }
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
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let config: tokio_postgres::Config =
                    outbox_tests::db::database_url().parse().unwrap();
                if let Ok((client, conn)) = config.connect(tokio_postgres::NoTls).await {
                    tokio::spawn(conn);
                    // The test database (holding the grants) is dropped first; retry briefly.
                    for _ in 0..20 {
                        if client
                            .batch_execute(&format!("DROP ROLE IF EXISTS {name}"))
                            .await
                            .is_ok()
                        {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            })
        })
        .join();
    }
}
