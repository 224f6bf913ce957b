//! The relay's counters count what committed: a batch whose commit fails published nothing and
//! dead-lettered nothing (its events are claimed and published again).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outbox_core::{
    ClaimedEvent, FailureKind, PublishFailure, PublishOutcome, Publisher, Relay, RelayMetrics,
    emit_all,
};
use outbox_tests::{TestDb, TestEvent};

/// Publishes every event but the one of aggregate `bad` (refused for good); on its first call it
/// first ends the relay's session (the claim transaction, idle while the batch publishes), so that
/// the batch cannot commit.
struct EndsTheClaimOnce {
    killer: tokio_postgres::Client,
    armed: AtomicBool,
}

impl Publisher for EndsTheClaimOnce {
    type Error = tokio_postgres::Error;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        if self.armed.swap(false, Ordering::SeqCst) {
            self.killer
                .execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                      WHERE datname = current_database() AND pid <> pg_backend_pid() \
                        AND state = 'idle in transaction'",
                    &[],
                )
                .await?;
        }
        Ok(events
            .iter()
            .map(|e| match e.aggregate_id.as_str() {
                "bad" => PublishOutcome::Permanent(PublishFailure::new(
                    FailureKind::InvalidContent,
                    "refused by the test",
                )),
                _ => PublishOutcome::Published,
            })
            .collect())
    }
}

/// The value of the sample of `metrics` whose line starts with `series`.
fn sample(metrics: &RelayMetrics, series: &str) -> f64 {
    metrics
        .encode()
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Before, the counters were added as the outcomes came in, ahead of the commit: a batch that
/// then failed to commit had counted its dead letter (alerting on one that did not exist) and its
/// published events, which were counted again when published for real.
#[tokio::test]
async fn a_batch_that_does_not_commit_counts_nothing() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    emit_all(
        &client,
        &[TestEvent::new("good", 1), TestEvent::new("bad", 1)],
    )
    .await
    .unwrap();
    let metrics = RelayMetrics::new();
    let relay = Relay::builder(
        db.pool().clone(),
        EndsTheClaimOnce {
            killer: db.connect().await,
            armed: AtomicBool::new(true),
        },
    )
    .metrics(metrics.clone())
    .max_attempts(1)
    .build()
    .unwrap();

    relay
        .run_once()
        .await
        .expect_err("the claim's session was ended before its commit");
    assert_eq!(sample(&metrics, "outbox_events_published_total"), 0.0);
    assert_eq!(sample(&metrics, "outbox_events_dead_lettered_total"), 0.0);
    assert_eq!(sample(&metrics, "outbox_events_failed_total"), 0.0);

    // Published again for real (the pool replaces the ended connection): counted once.
    let mut report = None;
    for _ in 0..50 {
        match relay.run_once().await {
            Ok(r) => {
                report = Some(r);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let report = report.expect("the relay claims again on a new connection");
    assert_eq!(
        (report.published, report.dead_lettered),
        (1, 1),
        "{report:?}"
    );
    assert_eq!(sample(&metrics, "outbox_events_published_total"), 1.0);
    assert_eq!(sample(&metrics, "outbox_events_dead_lettered_total"), 1.0);
}

/// Puts back (unavailable) the events of aggregate `down`, publishes the rest.
struct OneDestinationDown;

impl Publisher for OneDestinationDown {
    type Error = std::convert::Infallible;

    async fn publish(&self, events: &[ClaimedEvent]) -> Result<Vec<PublishOutcome>, Self::Error> {
        Ok(events
            .iter()
            .map(|e| match e.aggregate_id.as_str() {
                "down" => PublishOutcome::unavailable(FailureKind::Unreachable, "S3 down"),
                _ => PublishOutcome::Published,
            })
            .collect())
    }
}

/// Events put back without an attempt (a destination or S3 down) are counted. Before, no metric
/// moved while an offload bucket was unreachable: only the oldest pending age showed it.
#[tokio::test]
async fn events_put_back_unsent_are_counted_as_deferred() {
    let db = TestDb::new().await;
    let client = db.pool().get().await.unwrap();
    emit_all(
        &client,
        &[TestEvent::new("up", 1), TestEvent::new("down", 1)],
    )
    .await
    .unwrap();
    let metrics = RelayMetrics::new();
    let relay = Relay::builder(db.pool().clone(), OneDestinationDown)
        .metrics(metrics.clone())
        .build()
        .unwrap();
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.published, report.deferred), (1, 1), "{report:?}");
    assert_eq!(
        sample(
            &metrics,
            "outbox_events_deferred_total{event_type=\"order.test\",reason=\"unreachable\"}"
        ),
        1.0,
        "{}",
        metrics.encode()
    );
    assert_eq!(sample(&metrics, "outbox_events_failed_total"), 0.0);
}
