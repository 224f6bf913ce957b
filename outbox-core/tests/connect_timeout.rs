//! Opening a connection is bounded as a whole. tokio-postgres' `connect_timeout` covers only the
//! TCP connect: a server (or a middlebox) that accepts and then never answers hung every command,
//! the relay's start-up check and its LISTEN connection for ever.

use std::time::{Duration, Instant};

use outbox_core::connect::PgConnector;

#[tokio::test]
async fn a_server_that_accepts_and_never_answers_fails_within_the_connect_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
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

/// A relay's pool waits for a new connection as long as the connector gives one opening: each host
/// of a multi-host URL its connect timeout. It cancelled every opening after a fixed 10 s, so with
/// `connect_timeout=11` and a first host that never answers, the pool never reached the second host
/// (the start-up check, with the full budget, did: "ready", then every claim failed).
#[tokio::test]
async fn the_relay_pool_gives_a_new_connection_every_hosts_connect_timeout() {
    let connector = PgConnector::from_url(
        "postgres://u@10.0.0.1,10.0.0.2/db?connect_timeout=11&target_session_attrs=read-write",
    )
    .unwrap();
    let pool = connector.relay_pool(2, Duration::from_secs(30)).unwrap();
    assert_eq!(pool.timeouts().create, Some(Duration::from_secs(22)));
    let one = PgConnector::from_url("postgres://u@h/db").unwrap();
    let pool = one.relay_pool(2, Duration::from_secs(30)).unwrap();
    assert_eq!(
        pool.timeouts().create,
        Some(outbox_core::connect::POOL_CREATE_TIMEOUT)
    );
}
