//! Crashes and stops: `kill -9` mid-drain, SIGTERM mid-drain.

use super::*;

/// 1. `kill -9` of the relay at random moments while it drains, then a restart. FIFO queue on
///    fauxqs: the dedup id (= event id) makes SQS drop re-sends, so zero duplicates; a standard
///    queue (the fixture, recording every send) shows at most the batches in flight per kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_nothing() {
    let _serial = SERIAL.lock().await;
    for fifo in [true, false] {
        let started = Instant::now();
        let db = fault_db().await;
        let role = RelayRole::create(&db).await;
        // A marker in every payload: the relays' logs must never show it.
        let marker = format!("payload-marker-{}", uuid::Uuid::new_v4().simple());
        let writes = write_events(db.pool(), "k", EVENTS, 200, 100, true, |_| marker.clone()).await;
        let queue = if fifo {
            Some(TestQueue::fifo().await)
        } else {
            None
        };
        let fx = if fifo {
            None
        } else {
            Some(SqsFixture::start().await)
        };
        let (endpoint, url) = match (&queue, &fx) {
            (Some(q), _) => (outbox_tests::sqs::endpoint(), q.url().to_string()),
            (_, Some(fx)) => {
                fx.set_latency(Duration::from_millis(5));
                (fx.endpoint_url(), fx.create_queue("kill9"))
            }
            _ => unreachable!(),
        };
        let spec = RelaySpec::new(role.url(&db), endpoint, url.clone())
            .arg("--batch-size")
            .arg("100")
            .env("RUST_LOG", "debug");
        let (batch, concurrency) = (100, 4);
        let mut kills = 0;
        let mut killed = Vec::new();
        let mut relay = spec.spawn();
        for _ in 0..3 {
            let wait = 150 + (rand_u64() % 400);
            tokio::time::sleep(Duration::from_millis(wait)).await;
            if pending(db.pool()).await == 0 {
                break;
            }
            relay.kill9();
            kills += 1;
            killed.push(std::mem::replace(&mut relay, spec.spawn()));
        }
        wait_drained(db.pool(), Duration::from_secs(90), "after kills").await;
        relay.sigterm();
        assert!(relay.wait(Duration::from_secs(10)).success());
        // Debug logs of every relay process, the killed ones included: no payload, no secret.
        let logs: String = killed.iter().chain([&relay]).map(|r| r.logs()).collect();
        assert!(
            logs.contains("\"message\":\"published\""),
            "debug logs were captured"
        );
        assert!(!logs.contains(&marker), "a payload leaked into the logs");
        assert!(
            !logs.contains("test-secret-never-logged"),
            "the AWS secret leaked into the logs"
        );
        let deliveries = match (&queue, &fx) {
            (Some(q), _) => {
                drain_queue(
                    q.client(),
                    q.url(),
                    writes.committed.len(),
                    Duration::from_millis(500),
                    Duration::from_secs(60),
                )
                .await
            }
            (_, Some(fx)) => fixture_deliveries(fx),
            _ => unreachable!(),
        };
        let f = check(&writes.committed, &writes, &deliveries);
        let kind = if fifo {
            "fifo/fauxqs"
        } else {
            "standard/fixture"
        };
        report(
            &format!("1-kill-9 ({kind})"),
            &f,
            started.elapsed(),
            &format!("kills={kills}"),
        );
        assert_eq!(f.lost, 0);
        assert_eq!(f.rolled_back_delivered, 0);
        assert_eq!(f.order_violations, 0);
        assert!(kills > 0, "the relay was killed mid-drain");
        if fifo {
            assert_eq!(f.duplicates, 0, "SQS FIFO dedup drops re-sends");
        } else {
            assert!(
                f.duplicates <= kills * batch * concurrency,
                "at most the batches in flight per kill"
            );
        }
        drop(role);
    }
}

/// 6. SIGTERM during a full drain: the process exits within the grace period, nothing lost,
///    nothing marked that was not published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_full_drain_exits_in_time_and_marks_only_what_was_published() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let db = fault_db().await;
    let role = RelayRole::create(&db).await;
    let fx = SqsFixture::start().await;
    fx.set_latency(Duration::from_millis(20));
    let url = fx.create_queue("sigterm");
    let writes = write_events(db.pool(), "s", EVENTS, 200, 100, true, |_| String::new()).await;
    let spec = RelaySpec::new(role.url(&db), fx.endpoint_url(), url)
        .arg("--shutdown-grace")
        .arg("3s");
    let mut relay = spec.spawn();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let stopping = Instant::now();
    relay.sigterm();
    let status = relay.wait(Duration::from_secs(10));
    let stop_took = stopping.elapsed();
    assert!(status.success(), "clean exit: {status:?}");
    assert!(
        stop_took < Duration::from_secs(4),
        "exited within the grace period: {stop_took:?}"
    );

    let published: std::collections::HashSet<String> = fx
        .messages()
        .iter()
        .map(|m| m.attributes["event_id"].clone())
        .collect();
    let ids: Vec<uuid::Uuid> = writes.committed.iter().map(|w| w.id).collect();
    let processed = processed_ids(db.pool(), &ids).await;
    let marked_unpublished = processed
        .iter()
        .filter(|id| !published.contains(&id.to_string()))
        .count();
    let left = pending(db.pool()).await;
    assert!(left > 0, "the drain was still going at SIGTERM");

    // A new relay finishes the job.
    let mut relay = spec.spawn();
    wait_drained(db.pool(), Duration::from_secs(60), "after restart").await;
    relay.sigterm();
    assert!(relay.wait(Duration::from_secs(10)).success());
    let f = check(&writes.committed, &writes, &fixture_deliveries(&fx));
    report(
        "6-sigterm-mid-drain",
        &f,
        started.elapsed(),
        &format!(
            "stop_took={:.2}s pending_at_stop={left} marked_but_unpublished={marked_unpublished}",
            stop_took.as_secs_f64()
        ),
    );
    assert_eq!(marked_unpublished, 0);
    assert_eq!(
        (f.lost, f.order_violations, f.rolled_back_delivered),
        (0, 0, 0)
    );
    drop(role);
}
