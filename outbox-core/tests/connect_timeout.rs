//! Opening a connection is bounded as a whole. tokio-postgres' `connect_timeout` covers only the
//! TCP connect: a server (or a middlebox) that accepts and then never answers hung every command,
//! the relay's start-up check and its LISTEN connection for ever. And a password provider that
//! panics fails the attempt, not the task opening it.

use std::time::{Duration, Instant};

use outbox_core::connect::PgConnector;

/// A server that accepts connections and never answers: its address, and the task holding them.
async fn silent_server() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (addr, silent)
}

#[tokio::test]
async fn a_server_that_accepts_and_never_answers_fails_within_the_connect_timeout() {
    let (addr, silent) = silent_server().await;
    for mode in ["require", "disable"] {
        let url = format!("postgres://u@{addr}/db?sslmode={mode}&connect_timeout=1");
        let connector = PgConnector::from_url(&url).unwrap();
        let started = Instant::now();
        let e = tokio::time::timeout(Duration::from_secs(10), connector.connect())
            .await
            .unwrap_or_else(|_| panic!("sslmode={mode}: still waiting after 10 s"))
            .err()
            .expect("no server answered");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(900), "{mode}: {took:?}");
        assert!(took < Duration::from_secs(5), "{mode}: {took:?}");
        let text = e.to_string();
        assert!(text.contains("no answer within"), "{mode}: {text}");
        assert!(text.contains(&addr.to_string()), "{mode}: {text}");
    }
    silent.abort();
}

/// Each host of a multi-host URL gets its own `connect_timeout`, for the whole attempt: a first host
/// that accepts and then never answers used up the time of all of them (one budget for the whole
/// opening), so the healthy second host was never tried.
#[tokio::test]
async fn a_stalled_first_host_leaves_the_second_its_own_time() {
    let (addr, silent) = silent_server().await;
    let db = outbox_tests::TestDb::new().await;
    let real = db.server_addr();
    let url = format!(
        "postgres://postgres@{addr},{real}/{}?sslmode=disable&connect_timeout=2",
        db.name()
    );
    let connector = PgConnector::from_url(&url).unwrap();
    let started = Instant::now();
    let client = connector
        .connect_spawned()
        .await
        .expect("the second host answers");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1900), "{took:?}");
    let one: i32 = client.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
    // The pool takes the same way (it gave up at its own 10 s before, however long the attempts).
    let pool = connector.relay_pool(1, Duration::from_secs(30)).unwrap();
    assert_eq!(pool.timeouts().create, None, "bounded by the connector");
    let _pooled = pool
        .get()
        .await
        .expect("a pooled connection through the second host");
    silent.abort();
}

/// A password provider is the caller's code: one that panics fails the connection attempt with
/// an error that says so. The panic unwound through the task opening the connection — the relay's
/// LISTEN task died without a word, and the relay went on polling only.
#[tokio::test]
async fn a_password_provider_that_panics_fails_the_attempt_instead_of_the_task() {
    struct Panics;
    impl outbox_core::connect::PasswordProvider for Panics {
        type Error = std::io::Error;
        async fn password(&self) -> Result<outbox_core::connect::Password, Self::Error> {
            panic!("injected provider panic")
        }
    }
    let connector = PgConnector::from_url("postgres://u@127.0.0.1:5432/postgres")
        .unwrap()
        .password_provider(Panics);
    let opened = tokio::spawn(async move { connector.connect().await.map(|_| ()) })
        .await
        .expect("the task opening the connection does not panic");
    let text = outbox_core::error_chain(&opened.unwrap_err());
    assert!(
        text.contains("password provider panicked") && text.contains("injected provider panic"),
        "{text}"
    );
}

/// A pool that cannot open a connection says the server's reason: it said "Error occurred while
/// creating a new object: db error" (found by a black-box run).
#[tokio::test]
async fn a_pool_refused_a_connection_says_the_servers_reason() {
    let db = outbox_tests::TestDb::new().await;
    let role = outbox_tests::TestRole::create(&db, "limited", "LOGIN CONNECTION LIMIT 0").await;
    let url = role.url(&db);
    let pool = PgConnector::from_url(&url).unwrap().pool(1).unwrap();
    let Err(e) = pool.get().await else {
        panic!("the role may not connect")
    };
    let e = outbox_core::Error::from(e);
    let text = e.to_string();
    assert!(text.contains("too many connections for role"), "{text}");
}

/// The relay's pool connections are named (`outbox-relay`), unless the connection string names
/// them: an operator counting who holds the server's connection slots saw them unnamed, the
/// LISTEN and waiting connections alone named (black-box run).
#[tokio::test]
async fn the_relays_pool_connections_are_named() {
    let db = outbox_tests::TestDb::new().await;
    let name_of = async |url: &str| {
        let pool = PgConnector::from_url(url)
            .unwrap()
            .relay_pool(1, Duration::from_secs(30))
            .unwrap();
        let client = pool.get().await.unwrap();
        let row = client
            .query_one("SHOW application_name", &[])
            .await
            .unwrap();
        row.get::<_, String>(0)
    };
    assert_eq!(
        name_of(&db.url()).await,
        outbox_core::RELAY_APPLICATION_NAME
    );
    let named = format!(
        "{}{}application_name=billing",
        db.url(),
        if db.url().contains('?') { "&" } else { "?" }
    );
    assert_eq!(name_of(&named).await, "billing");
    // Named in `options`: the start-up packet's default would win over it (review).
    let in_options = format!(
        "{}{}options=-c%20application_name%3Dledger",
        db.url(),
        if db.url().contains('?') { "&" } else { "?" }
    );
    assert_eq!(name_of(&in_options).await, "ledger");
}
