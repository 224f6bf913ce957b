//! Events a publisher puts back for a delay it names ([`PublishFailure::with_put_back`]): an S3
//! upload going on without its publish, due a second later.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::{FailureKind, PublishFailure, PublishOutcome, Relay, emit};
use outbox_tests::{FlakyPublisher, TestDb, TestEvent};
use uuid::Uuid;

/// A publisher that names how long to put an event back ([`PublishFailure::with_put_back`]: an
/// S3 upload going on without its publish, due a second later) gets that delay, not the default
/// 4-5 s, at least 100 ms and at most an hour; an event still in progress is no outage to warn about.
#[tokio::test]
async fn an_event_put_back_with_its_own_delay_is_due_then_and_is_no_outage() {
    let logs = outbox_tests::LogCapture::default();
    let _guard = logs.install();
    let db = TestDb::new().await;
    let publisher = Arc::new(FlakyPublisher::new(|e| {
        let delay = match outbox_tests::note(e).as_deref() {
            Some("soon") => Duration::from_millis(300),
            Some("now") => Duration::ZERO,
            _ => Duration::MAX,
        };
        let failure =
            PublishFailure::new(FailureKind::InProgress, "uploading").with_put_back(delay);
        Some(PublishOutcome::Unavailable(failure))
    }));
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .build()
        .unwrap();
    let client = db.pool().get().await.unwrap();
    let soon = emit(&client, &TestEvent::new("a", 1).note("soon"))
        .await
        .unwrap();
    let later = emit(&client, &TestEvent::new("b", 1).note("later"))
        .await
        .unwrap();
    let now = emit(&client, &TestEvent::new("c", 1).note("now"))
        .await
        .unwrap();
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.deferred, report.in_progress), (3, 3), "{report:?}");
    // Due in how many ms, and after how many attempts. The three are recorded by one statement:
    // the differences between their due times are their delays' (whatever the machine's load).
    let due = async |id: Uuid| {
        let row = client
            .query_one(
                "SELECT (extract(epoch FROM retry_after - clock_timestamp()) * 1000)::float8, \
                        (extract(epoch FROM retry_after) * 1000)::float8, attempts \
                   FROM outbox_events WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap();
        (
            row.get::<_, f64>(0),
            row.get::<_, f64>(1),
            row.get::<_, i32>(2),
        )
    };
    let (soon_in, soon_at, soon_attempts) = due(soon).await;
    assert!(soon_in <= 300.0, "due in {soon_in} ms, not 4-5 s");
    assert_eq!(soon_attempts, 0);
    let (_, now_at, _) = due(now).await;
    let gap = now_at - soon_at;
    assert!(
        (-210.0..=-190.0).contains(&gap),
        "at least 100 ms: {gap} ms from the 300 ms one"
    );
    let (_, later_at, _) = due(later).await;
    let gap = later_at - soon_at;
    assert!(
        (3_599_600.0..=3_599_800.0).contains(&gap),
        "at most an hour: {gap} ms from the 300 ms one"
    );
    assert!(
        !logs
            .text()
            .contains("events put back without counting an attempt"),
        "{}",
        logs.text()
    );
}
