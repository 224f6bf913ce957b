//! A relay whose only destination stopped answering resumes as soon as it answers again.

use std::time::{Duration, Instant};

use outbox_core::{Relay, emit};
use outbox_sqs::SqsPublisher;
use outbox_sqs_fixture::SqsFixture;
use outbox_tests::{LogCapture, RunningRelay, TestDb, TestEvent};

/// Workers backing off while every destination is down (each batch failing as a whole: the
/// back-off grows to 30 s) go on within moments of one answering again, not when their back-off
/// ends (black-box run: nothing sent for 5.4 s after a queue black-holed for 30 s answered again;
/// here, at the eighth failure in a row, a worker sleeps 12.8 s ± 20 %).
#[tokio::test]
async fn workers_backing_off_while_the_queue_was_down_resume_once_it_answers() {
    let logs = LogCapture::default();
    let _logs = logs.install();
    let db = TestDb::new().await;
    let fx = SqsFixture::start().await;
    let url = fx.create_queue("q");
    let publisher = SqsPublisher::builder()
        .sdk_config(outbox_tests::sqs::sdk_config_for(&fx.endpoint_url()).await)
        .default_queue(url)
        .max_attempts(1)
        .call_timeout(Duration::from_secs(3))
        .breaker_probe_interval(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let relay = Relay::builder(db.pool().clone(), publisher)
        .concurrency(1)
        .poll_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let client = db.pool().get().await.unwrap();
    // Started (its start-up check answered) and relaying.
    let first = emit(&client, &TestEvent::new("o-0", 1)).await.unwrap();
    let relaying = outbox_tests::eventually(Duration::from_secs(10), async || {
        db.processed(&[first]).await
    })
    .await;
    assert!(relaying);
    fx.silence_queue("q");
    let id = emit(&client, &TestEvent::new("o-1", 1)).await.unwrap();
    let backed_off = outbox_tests::eventually(Duration::from_secs(40), async || {
        logs.text().matches("relay batch failed").count() >= 8
    })
    .await;
    assert!(backed_off, "{}", logs.text());
    assert_eq!(fx.messages().len(), 1, "nothing answered since");

    fx.answer_queue("q");
    let answered = Instant::now();
    let published =
        outbox_tests::eventually(Duration::from_secs(30), async || db.processed(&[id]).await).await;
    let took = answered.elapsed();
    running.stop().await;
    assert!(published, "never published");
    assert!(
        took < Duration::from_secs(5),
        "published {took:?} after the queue answered again"
    );
    assert_eq!(fx.messages().len(), 2, "sent once");
}
