//! Outages of what the relay depends on: SQS down, PostgreSQL restarted (plain and TLS), the
//! database connection black-holed, PostgreSQL down for 25 s.

use super::*;

/// 2. SQS outage of 30 s: connections refused, then 503s, then recovery. Nothing lost; the relays
///    back off (the calls during the outage are counted); the backlog drains afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_outage_of_30_seconds_loses_nothing_and_backs_off() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let db = fault_db().await;
    let role = RelayRole::create(&db).await;
    let fx = SqsFixture::start().await;
    fx.set_latency(Duration::from_millis(2));
    let url = fx.create_queue("outage");
    let mut writes = write_events(db.pool(), "o", EVENTS / 2, 200, 100, true, |_| {
        String::new()
    })
    .await;
    let spec = RelaySpec::new(role.url(&db), fx.endpoint_url(), url)
        .env("OUTBOX_SQS_CALL_TIMEOUT_MS", "2000");
    let mut relays = vec![spec.spawn(), spec.spawn()];
    // The relays are up (past their start-up check, which needs SQS) once SQS accepted something.
    let up = outbox_tests::eventually(Duration::from_secs(30), async || fx.accepted() > 0).await;
    assert!(up, "the relays published nothing within 30 s of starting");

    // The outage: 15 s of refused connections, then 15 s of 503s, while writers go on.
    fx.refuse_connections().await;
    let writing = {
        let pool = db.pool().clone();
        tokio::spawn(async move {
            write_events(&pool, "o2", EVENTS / 2, 200, 100, true, |_| String::new()).await
        })
    };
    tokio::time::sleep(Duration::from_secs(15)).await;
    fx.reset_counters();
    fx.fail_calls_for(Duration::from_secs(15), CallFault::ServiceUnavailable);
    fx.accept_connections().await;
    tokio::time::sleep(Duration::from_secs(15)).await;
    let calls_during_503s = fx.calls();
    fx.clear_faults();
    writes.extend(writing.await.unwrap());

    wait_drained(db.pool(), Duration::from_secs(90), "after the outage").await;
    let drain_after = started.elapsed();
    stop_all(&mut relays);
    let f = check(&writes.committed, &writes, &fixture_deliveries(&fx));
    report(
        "2-sqs-outage-30s",
        &f,
        started.elapsed(),
        &format!(
            "calls_during_15s_of_503s={calls_during_503s} drained_at={:.1}s",
            drain_after.as_secs_f64()
        ),
    );
    assert_eq!(
        (f.lost, f.order_violations, f.rolled_back_delivered),
        (0, 0, 0)
    );
    // 2 relays × 4 workers; a tight loop would make tens of thousands of calls in 15 s.
    assert!(
        calls_during_503s < 3_000,
        "relays back off: {calls_during_503s} calls in 15 s of 503s"
    );
    // An operator reads the outage in a few lines: when it started, the queue found down, and
    // when it ended (with a few lines of events whose calls were caught mid-flight). Before,
    // every failed call and batch of every worker logged a warning (hundreds), and nothing said
    // when it was over. (16: the queue found down is a line of its own since refused
    // connections and 503s take it down, as a silent queue; calls caught mid-flight log a few
    // per-event lines at the outage's start, and some settled only after the queue answered
    // again a few more at its end — an open LOW; 14 were seen once in CI.)
    for relay in &relays {
        let logs = relay.logs();
        let warnings = logs
            .lines()
            .filter(|l| l.contains("\"level\":\"WARN\""))
            .count();
        assert!(
            warnings <= 16,
            "{warnings} warnings for one outage of 30 s:\n{logs}"
        );
    }
    // By a relay that published after it (the other may have claimed nothing since: it says so
    // once it has been quiet for a while, see `outage.rs`).
    let logs: String = relays.iter().map(|r| r.logs()).collect();
    assert!(
        logs.contains("relay batches succeed again"),
        "the end of the outage is logged:\n{logs}"
    );
    drop(role);
}

/// 3. PostgreSQL restart mid-drain (a throwaway cluster): relays reconnect, LISTEN resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_drain_loses_nothing_and_listen_resumes() {
    postgres_restart_scenario(false).await;
}

/// 3b. The same against a TLS-only server, every connection `verify-full`: the pool and LISTEN
///     reconnect over TLS after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_over_tls_loses_nothing_and_listen_resumes() {
    postgres_restart_scenario(true).await;
}

/// Creates database `outbox` through `admin_url`, migrates it (in the layout OUTBOX_TEST_LAYOUT
/// names, like every TestDb of the suite) and returns a pool on `url`, which survives restarts.
async fn outbox_on(admin_url: &str, url: &str) -> deadpool_postgres::Pool {
    let admin_client = outbox_core::PgConnector::from_url(admin_url)
        .unwrap()
        .connect_spawned()
        .await
        .unwrap();
    admin_client
        .batch_execute("CREATE DATABASE outbox")
        .await
        .unwrap();
    let connector = outbox_core::PgConnector::from_url(url).unwrap();
    let mut client = connector.connect_spawned().await.unwrap();
    outbox_tests::db::migrate_in_env_layout(&mut client).await;
    assert_env_layout(&client).await;
    deadpool_postgres::Pool::builder(connector.manager(deadpool_postgres::ManagerConfig {
        recycling_method: deadpool_postgres::RecyclingMethod::Verified,
    }))
    .max_size(8)
    .build()
    .unwrap()
}

/// A relay on `database_url` publishing to `queue`, polling only once a minute: what it publishes
/// sooner, a wake-up brought.
fn long_poll_relay(database_url: &str, queue: &TestQueue) -> RelaySpec {
    RelaySpec::new(
        database_url.to_owned(),
        outbox_tests::sqs::endpoint(),
        queue.url().to_string(),
    )
    .arg("--poll-interval")
    .arg("60s")
}

/// 3c. PostgreSQL down for 25 s, then back: the relay publishes again within seconds. Before,
///     its workers (and its LISTEN connection) had backed off to 25 s and more between attempts
///     and it stayed idle that long once the database was back (black-box run: 16 s after a
///     95 s outage); now the LISTEN connection tries at least every 5 s and its return wakes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_long_postgres_outage_the_relay_resumes_within_seconds() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start();
    let url = |db: &str| format!("{}?sslmode=disable", cluster.url(db));
    let pool = outbox_on(&url("postgres"), &url("outbox")).await;
    let queue = TestQueue::standard().await;
    // A long poll: only a worker trying again publishes the events written after the outage.
    let mut relays = vec![long_poll_relay(&url("outbox"), &queue).spawn()];
    let up = outbox_tests::eventually(Duration::from_secs(30), async || {
        relays[0].logs().contains("relay started")
    })
    .await;
    assert!(up, "the relay started");
    cluster.stop();
    tokio::time::sleep(Duration::from_secs(25)).await;
    cluster.start_again();
    let back = Instant::now();
    let first = write_events(&pool, "after", 100, 50, 50, false, |_| String::new()).await;
    wait_drained(&pool, Duration::from_secs(60), "after the outage").await;
    // Then the relay idles: a writer wakes it only once its connection advertising waiting is
    // back (a recheck found events written after the first wake-up waiting 8-21 s for it).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second = write_events(&pool, "later", 10, 10, 10, false, |_| String::new()).await;
    wait_drained(&pool, Duration::from_secs(60), "later after the outage").await;
    let took = back.elapsed();
    stop_all(&mut relays);
    assert_eq!((first.committed.len(), second.committed.len()), (100, 10));
    assert!(
        took < Duration::from_secs(12),
        "published {took:?} after the database was back:\n{}",
        relays[0].logs()
    );
}

async fn postgres_restart_scenario(tls: bool) {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let tls_cluster = tls.then(tls_cluster::TlsCluster::start);
    let plain_cluster = (!tls).then(Cluster::start);
    let (cluster, query) = match (&tls_cluster, &plain_cluster) {
        (Some(t), _) => (&t.cluster, t.verify_full()),
        (None, Some(c)) => (c, "sslmode=disable".to_string()),
        (None, None) => unreachable!("one cluster was started"),
    };
    let url = |db: &str| format!("{}?{query}", cluster.url(db));
    let pool = outbox_on(&url("postgres"), &url("outbox")).await;

    let queue = TestQueue::fifo().await;
    let mut writes = write_events(&pool, "r", EVENTS, 200, 100, true, |_| String::new()).await;
    // A long poll: after the restart, only a resumed LISTEN delivers new events quickly.
    let spec = long_poll_relay(&url("outbox"), &queue);
    let mut relays = vec![spec.spawn(), spec.spawn()];
    // Restart once both are draining: a relay whose start-up checks meet the restart exits 1 (a
    // supervisor starts it again), which a fixed 700 ms left to chance on a loaded machine (both
    // relays gone, nothing drained in 90 s, once in a run with four tests at a time).
    let draining = outbox_tests::eventually(Duration::from_secs(30), async || {
        relays.iter().all(|r| r.logs().contains("relay started"))
    })
    .await;
    assert!(draining, "both relays started");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before_restart = pending(&pool).await;
    cluster.restart();
    // Let the relays notice and reconnect, then write more: NOTIFY must wake them.
    tokio::time::sleep(Duration::from_secs(4)).await;
    wait_drained(&pool, Duration::from_secs(90), "after the restart").await;
    let late_start = Instant::now();
    writes.extend(write_events(&pool, "late", 500, 50, 50, false, |_| String::new()).await);
    wait_drained(
        &pool,
        Duration::from_secs(20),
        "events written after the restart",
    )
    .await;
    let late_latency = late_start.elapsed();
    stop_all(&mut relays);
    let deliveries = drain_queue(
        queue.client(),
        queue.url(),
        writes.committed.len(),
        Duration::from_millis(500),
        Duration::from_secs(60),
    )
    .await;
    let f = check(&writes.committed, &writes, &deliveries);
    // The restart in the logs: the LISTEN connection's loss once (not once per failed reconnect
    // while the server was down) and its return.
    for relay in &relays {
        let logs = relay.logs();
        assert!(
            logs.matches("LISTEN connection lost").count() <= 1,
            "the loss is logged once:\n{logs}"
        );
        assert!(
            logs.contains("LISTEN connection back"),
            "the return is logged:\n{logs}"
        );
        // A few lines for the restart: the batch, the LISTEN and the waiting connections, perhaps
        // a gauge refresh (and the plaintext notice at start). Before, each pooled connection's
        // end also warned, twice (`database connection closed`, deadpool's `could not be
        // recycled`).
        let warnings: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains("\"level\":\"WARN\""))
            .collect();
        assert!(
            warnings.len() <= 6
                && !warnings
                    .iter()
                    // The pooled connections' own lines; the batch's failure may name the
                    // closed connection itself (its error is `connection closed` or 57P01,
                    // depending on when the restart cut it: a second CI run flaked on it).
                    .any(|w| w.contains("\"message\":\"database connection closed")
                        || w.contains("recycled")),
            "{} warnings:\n{}",
            warnings.len(),
            warnings.join("\n")
        );
    }
    if let Some(t) = &tls_cluster {
        let logs: String = relays.iter().map(|r| r.logs()).collect();
        assert_eq!(
            logs.matches("\"tls\":true").count(),
            2,
            "both relays on TLS: {logs}"
        );
        assert_eq!(t.plaintext_refusals(), 0, "nothing tried plaintext");
    }
    report(
        if tls {
            "3b-postgres-restart-tls"
        } else {
            "3-postgres-restart"
        },
        &f,
        started.elapsed(),
        &format!(
            "pending_at_restart={before_restart} post_restart_batch_delivered_in={:.2}s",
            late_latency.as_secs_f64()
        ),
    );
    assert!(before_restart > 0, "the restart happened mid-drain");
    assert_eq!(
        (
            f.lost,
            f.order_violations,
            f.rolled_back_delivered,
            f.duplicates
        ),
        (0, 0, 0, 0)
    );
    assert!(
        late_latency < Duration::from_secs(10),
        "LISTEN resumed: not waiting for the 60 s poll"
    );
}

/// 12. The database connection black-holed mid-batch: a relay process whose batches are in the
///     middle of publishing loses every packet to and from PostgreSQL (no FIN, no RST). PostgreSQL
///     ends its silent claim transactions after the publish timeout + 5 s, and a second relay
///     publishes those events within that bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_black_holed_mid_batch_holds_its_rows_no_longer_than_the_bound() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let db = fault_db().await;
    let role = RelayRole::create(&db).await;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("black-hole");
    let writes = write_events(db.pool(), "b", EVENTS, 200, 100, true, |_| String::new()).await;
    let proxy = outbox_tests::BlackHoleProxy::start("127.0.0.1:5432".parse().unwrap()).await;
    let direct = role.url(&db);
    assert!(direct.contains("127.0.0.1:5432"), "{direct}");
    let through_proxy = format!(
        "{}?application_name=cut-off-relay",
        direct.replace("127.0.0.1:5432", &proxy.addr().to_string())
    );
    let publish_timeout = Duration::from_secs(4);
    let spec = |database_url: String| {
        RelaySpec::new(database_url, fx.endpoint_url(), url.clone())
            .env("OUTBOX_PUBLISH_TIMEOUT_MS", "4000")
            .env("OUTBOX_SQS_CALL_TIMEOUT_MS", "3000")
    };
    // Every SQS call of the first relay takes 2 s: its batches are mid-publish when the cut comes.
    fx.set_latency(Duration::from_secs(2));
    let mut cut_off = spec(through_proxy).spawn();
    let deadline = Instant::now() + Duration::from_secs(20);
    while fx.calls_to("SendMessageBatch") == 0 {
        assert!(Instant::now() < deadline, "the first relay never published");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.black_hole();
    let cut = Instant::now();
    fx.set_latency(Duration::ZERO);
    let mut healthy = spec(direct).spawn();
    // The cut-off relay's claim transactions, as PostgreSQL sees them, until it ends them.
    let client = db.pool().get().await.unwrap();
    let open_claims = async || -> i64 {
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                  WHERE application_name = 'cut-off-relay' AND xact_start IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    };
    let claims_at_cut = open_claims().await;
    while open_claims().await > 0 && cut.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let released = cut.elapsed();
    wait_drained(db.pool(), Duration::from_secs(90), "after the black hole").await;
    let took = cut.elapsed();
    if std::env::var("SHOW_LOGS").is_ok() {
        for (name, logs) in [("healthy", healthy.logs()), ("cut-off", cut_off.logs())] {
            for line in logs.lines().filter(|l| !l.contains("\"INFO\"")).take(15) {
                eprintln!("{name}: {}", &line[..line.len().min(400)]);
            }
        }
    }
    healthy.sigterm();
    assert!(healthy.wait(Duration::from_secs(10)).success());
    cut_off.kill9();
    let f = check(&writes.committed, &writes, &fixture_deliveries(&fx));
    // PostgreSQL ends a silent claim transaction at publish timeout + margin after its last
    // statement, which came at the latest at the cut; 2 s of slack for a loaded machine.
    let bound = publish_timeout + outbox_core::CLAIM_IDLE_MARGIN + Duration::from_secs(2);
    report(
        "12-db-black-holed-mid-batch",
        &f,
        started.elapsed(),
        &format!(
            "claims_at_cut={claims_at_cut} rows_released_after={:.1}s bound={:.1}s \
             drained_after={:.1}s",
            released.as_secs_f64(),
            bound.as_secs_f64(),
            took.as_secs_f64()
        ),
    );
    assert!(
        claims_at_cut > 0,
        "the cut came while the relay held claims"
    );
    assert!(
        released <= bound,
        "the cut-off relay's rows were released {released:?} after the cut; bound {bound:?}"
    );
    assert_eq!(
        (f.lost, f.order_violations, f.rolled_back_delivered),
        (0, 0, 0)
    );
    drop(role);
}
