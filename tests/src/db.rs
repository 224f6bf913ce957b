//! Throwaway databases: each test gets its own, migrated, and dropped afterwards.

use std::str::FromStr;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

/// The server's admin connection string.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

const START_HINT: &str = "start PostgreSQL with `bash scripts/services.sh` (or \
    `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`), or point \
    DATABASE_URL at a server where the user may create databases";

/// A fresh, uniquely named database with the outbox schema applied, dropped when this value is
/// dropped.
pub struct TestDb {
    name: String,
    config: tokio_postgres::Config,
    pool: Pool,
}

/// Connects with `config`, driving the connection on a task.
pub async fn connect(config: &tokio_postgres::Config) -> tokio_postgres::Client {
    let (client, connection) = config
        .connect(NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to PostgreSQL ({e}): {START_HINT}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// The variable that picks the layout [`TestDb::new`] gives every test: `plain` (the default),
/// `partitioned` (daily) or `partitioned-hourly`. `OUTBOX_TEST_LAYOUT=partitioned cargo test …` runs
/// a suite against the partitioned layout.
pub const LAYOUT_ENV: &str = "OUTBOX_TEST_LAYOUT";

/// The layout [`LAYOUT_ENV`] asks for: `None` for the plain table.
pub fn layout_from_env() -> Option<outbox_core::partition::Granularity> {
    match std::env::var(LAYOUT_ENV).as_deref() {
        Err(_) | Ok("") | Ok("plain") => None,
        Ok("partitioned") | Ok("partitioned-daily") => {
            Some(outbox_core::partition::Granularity::Daily)
        }
        Ok("partitioned-hourly") => Some(outbox_core::partition::Granularity::Hourly),
        Ok(other) => panic!(
            "{LAYOUT_ENV}={other}: expected plain, partitioned (daily) or partitioned-hourly"
        ),
    }
}

/// Applies the outbox migrations to the database `client` is connected to, in the layout
/// [`LAYOUT_ENV`] names (plain by default): for tests that make their database elsewhere than
/// [`TestDb`] (a throwaway cluster). Panics if they do not apply.
pub async fn migrate_in_env_layout(client: &mut tokio_postgres::Client) {
    match layout_from_env() {
        None => {
            outbox_core::migrate(client)
                .await
                .expect("outbox migrations apply to a fresh database");
        }
        Some(g) => {
            outbox_core::partition::migrate_partitioned(client, g, None)
                .await
                .expect("the partitioned layout applies to a fresh database");
        }
    }
}

impl TestDb {
    /// Creates the database and applies the outbox migrations, in the layout [`LAYOUT_ENV`] names
    /// (plain by default).
    pub async fn new() -> TestDb {
        match layout_from_env() {
            None => TestDb::plain().await,
            Some(g) => TestDb::partitioned(g).await,
        }
    }

    /// Creates the database with the plain layout, whatever [`LAYOUT_ENV`] says.
    pub async fn plain() -> TestDb {
        let db = TestDb::empty().await;
        let mut client = connect(&db.config).await;
        outbox_core::migrate(&mut client)
            .await
            .expect("outbox migrations apply to a fresh database");
        db
    }

    /// Creates the database with the partitioned layout of `granularity`.
    pub async fn partitioned(granularity: outbox_core::partition::Granularity) -> TestDb {
        let db = TestDb::empty().await;
        let mut client = connect(&db.config).await;
        outbox_core::partition::migrate_partitioned(&mut client, granularity, None)
            .await
            .expect("the partitioned layout applies to a fresh database");
        db
    }

    /// Creates the database in `encoding` (`LATIN1`, …: with the `C` locale, from `template0`) and
    /// applies the outbox migrations in the layout [`LAYOUT_ENV`] names.
    pub async fn with_encoding(encoding: &str) -> TestDb {
        assert!(
            encoding
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "an encoding name: {encoding}"
        );
        let db = TestDb::create(&format!(
            "ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        ))
        .await;
        let mut client = connect(&db.config).await;
        migrate_in_env_layout(&mut client).await;
        db
    }

    /// Creates the database in `encoding` (with the `C` locale, from `template0`) without applying
    /// any migration.
    pub async fn empty_in(encoding: &str) -> TestDb {
        assert!(
            encoding
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "an encoding name: {encoding}"
        );
        TestDb::create(&format!(
            "ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        ))
        .await
    }

    /// Creates the database without applying any migration.
    pub async fn empty() -> TestDb {
        TestDb::create("").await
    }

    /// Creates the database with `options` after `CREATE DATABASE <name>`.
    async fn create(options: &str) -> TestDb {
        let admin_config = tokio_postgres::Config::from_str(&database_url())
            .expect("DATABASE_URL is a valid connection string");
        let admin = connect(&admin_config).await;
        let name = format!("outbox_test_{}", uuid::Uuid::new_v4().simple());
        // DDL cannot take bind parameters; the name is generated above, never user input.
        admin
            .batch_execute(&format!("CREATE DATABASE {name} {options}"))
            .await
            .unwrap_or_else(|e| panic!("cannot create a test database ({e}): {START_HINT}"));
        let mut config = admin_config.clone();
        config.dbname(&name);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(16)
            .build()
            .expect("pool builds");
        TestDb { name, config, pool }
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Connection settings for this database (e.g. for the relay's LISTEN connection).
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// A connection string for this database (for child processes).
    pub fn url(&self) -> String {
        let base = database_url();
        let (server, _) = base
            .rsplit_once('/')
            .expect("DATABASE_URL names a database");
        format!("{server}/{}", self.name)
    }

    /// A pool of connections to this database.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The server's address on this machine (`127.0.0.1` and the configured port).
    pub fn server_addr(&self) -> std::net::SocketAddr {
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        std::net::SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// A pool of at most `max_size` connections to this database through `addr` instead of the
    /// server's own address (a proxy in front of it, e.g. [`DelayProxy`](crate::DelayProxy)).
    pub fn pool_via(&self, addr: std::net::SocketAddr, max_size: usize) -> Pool {
        let manager = Manager::from_config(
            self.config_via(addr),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(max_size)
            .build()
            .expect("pool builds")
    }

    /// [`pool_via`](Self::pool_via) with all `size` connections opened and idle in it (what a
    /// relay's pool holds after a busy spell: a stall then catches every one of them).
    pub async fn open_pool_via(&self, addr: std::net::SocketAddr, size: usize) -> Pool {
        let pool = self.pool_via(addr, size);
        let held = futures::future::join_all((0..size).map(|_| pool.get())).await;
        for connection in &held {
            if let Err(e) = connection {
                panic!("connection {} of {size} through {addr}: {e}", held.len());
            }
        }
        drop(held);
        assert_eq!(pool.status().size, size, "opened and idle");
        pool
    }

    /// Connection settings for this database through `addr` instead of the server's own
    /// address (a proxy in front of it). (`Config::host` adds a host: a copy of
    /// [`config`](Self::config) given the proxy's would still connect to the server first.)
    pub fn config_via(&self, addr: std::net::SocketAddr) -> tokio_postgres::Config {
        let mut config = tokio_postgres::Config::new();
        config
            .host(addr.ip().to_string())
            .port(addr.port())
            .user(self.config.get_user().unwrap_or("postgres"))
            .dbname(&self.name);
        config
    }

    /// A new connection to this database that is not from the pool.
    pub async fn connect(&self) -> tokio_postgres::Client {
        connect(&self.config).await
    }

    /// How many sessions on this database wait for a lock in a statement whose text is `LIKE`
    /// `pattern`, seen from a new connection.
    pub async fn lock_waiters(&self, pattern: &str) -> i64 {
        self.connect()
            .await
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND state = 'active' AND wait_event_type = 'Lock' AND query LIKE $1",
                &[&pattern],
            )
            .await
            .expect("read pg_stat_activity")
            .get(0)
    }

    /// The process ids of the server sessions on this database, seen from a new connection (not
    /// counted).
    pub async fn session_pids(&self) -> Vec<i32> {
        self.session_pids_where("true", &[]).await
    }

    /// The process ids of this database's sessions named `application_name`.
    pub async fn sessions_named(&self, application_name: &str) -> Vec<i32> {
        self.session_pids_where("application_name = $1", &[&application_name])
            .await
    }

    /// The process ids of this database's other sessions that match `condition`.
    async fn session_pids_where(
        &self,
        condition: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Vec<i32> {
        self.connect()
            .await
            .query(
                &format!(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
                     AND pid <> pg_backend_pid() AND {condition}"
                ),
                params,
            )
            .await
            .expect("read pg_stat_activity")
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        self.pool.close();
        let name = std::mem::take(&mut self.name);
        // Drop the database from a separate thread with its own runtime: `Drop` cannot await, and
        // the test's runtime may be shutting down.
        let handle = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let admin_config = tokio_postgres::Config::from_str(&database_url()).ok()?;
                let (client, connection) = admin_config.connect(NoTls).await.ok()?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
                    .ok()
            })
        });
        let _ = handle.join();
    }
}

impl TestDb {
    /// Events not yet published (excluding dead letters).
    pub async fn pending(&self) -> i64 {
        let client = self.pool.get().await.expect("a pooled connection");
        outbox_queries::queries::admin::outbox_pending_count()
            .bind(&client)
            .one()
            .await
            .expect("count pending events")
    }

    /// Whether every event of `ids` is processed.
    pub async fn processed(&self, ids: &[uuid::Uuid]) -> bool {
        for &id in ids {
            if self.event(id).await.processed_at.is_none() {
                return false;
            }
        }
        true
    }

    /// One outbox row, with everything tests look at.
    pub async fn event(&self, id: uuid::Uuid) -> outbox_queries::queries::admin::GetOutboxEvent {
        let client = self.pool.get().await.expect("a pooled connection");
        outbox_queries::queries::admin::get_outbox_event()
            .bind(&client, &id)
            .one()
            .await
            .expect("the event exists")
    }

    /// Dead-letters `ids` with `reason`, as the relay does after a permanent failure.
    pub async fn dead_letter(&self, ids: &[uuid::Uuid], reason: &str) {
        self.record_failures(ids, reason, 0.0, true).await;
    }

    /// Records a failed attempt of each of `ids`, to be retried after `delay_secs`, as the relay
    /// does.
    pub async fn fail(&self, ids: &[uuid::Uuid], error: &str, delay_secs: f64) {
        self.record_failures(ids, error, delay_secs, false).await;
    }

    async fn record_failures(&self, ids: &[uuid::Uuid], error: &str, delay_secs: f64, dead: bool) {
        let created_ats = self.created_ats(ids).await;
        let Some((oldest, newest)) = bounds(&created_ats) else {
            return;
        };
        let client = self.pool.get().await.expect("a pooled connection");
        let n = ids.len();
        outbox_queries::queries::relay::record_outbox_failures()
            .bind(
                &client,
                &ids,
                &created_ats,
                &vec![error; n],
                &vec![delay_secs; n],
                &vec![dead; n],
                &vec![true; n],
                &oldest,
                &newest,
            )
            .all()
            .await
            .expect("record failures");
    }

    /// Marks `ids` processed (published), as the relay does.
    pub async fn mark_processed(&self, ids: &[uuid::Uuid]) {
        let created_ats = self.created_ats(ids).await;
        let Some((oldest, newest)) = bounds(&created_ats) else {
            return;
        };
        let client = self.pool.get().await.expect("a pooled connection");
        outbox_queries::queries::relay::mark_outbox_processed()
            .bind(&client, &ids, &oldest, &newest)
            .all()
            .await
            .expect("mark processed");
    }

    /// The creation times of `ids` (each must exist), which the relay's statements take with them.
    async fn created_ats(&self, ids: &[uuid::Uuid]) -> Vec<chrono::DateTime<chrono::Utc>> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(self.event(*id).await.created_at);
        }
        out
    }
}

/// The smallest and largest of `times`, as the relay's statements take them; `None` for none.
fn bounds(
    times: &[chrono::DateTime<chrono::Utc>],
) -> Option<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)> {
    Some((*times.iter().min()?, *times.iter().max()?))
}
