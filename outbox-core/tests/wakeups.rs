//! Adaptive wake-ups (migration V3): writers notify only while a relay waits, and no wake-up is lost
//! when a writer races a relay going idle.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use outbox_core::{Relay, WAITING_LOCK, emit, emit_all};
use outbox_tests::{RecordingPublisher, RunningRelay, TestDb, TestEvent, eventually, set_waiting};
use tokio_postgres::AsyncMessage;

/// A LISTEN connection: the notifications it hears, one channel name each (keep the client).
async fn listener(
    db: &TestDb,
) -> (
    tokio_postgres::Client,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let (client, mut connection) = db.config().connect(tokio_postgres::NoTls).await.unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    tokio::spawn(async move {
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(n) = message {
                let _ = tx.send(n.channel().to_string());
            }
        }
    });
    client.batch_execute("LISTEN outbox_events").await.unwrap();
    (client, rx)
}

async fn heard(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Vec<String> {
    let mut received = Vec::new();
    while let Ok(Some(channel)) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await
    {
        received.push(channel);
    }
    received
}

#[tokio::test]
async fn writers_notify_once_per_inserting_statement_only_while_a_relay_waits() {
    let db = TestDb::new().await;
    let (_listening, mut rx) = listener(&db).await;
    let client = db.pool().get().await.unwrap();

    // Nobody waits: no notification at all.
    emit(&client, &TestEvent::new("a", 1)).await.unwrap();
    assert_eq!(heard(&mut rx).await, Vec::<String>::new());

    // A relay waits (holds the waiting lock): one notification per inserting statement.
    let waiting = db.connect().await;
    set_waiting(&waiting, true).await;
    let events: Vec<TestEvent> = (0..20).map(|n| TestEvent::new("b", n)).collect();
    emit_all(&client, &events).await.unwrap();
    emit(&client, &TestEvent::new("c", 1)).await.unwrap();
    emit(&client, &TestEvent::new("d", 1)).await.unwrap();
    assert_eq!(heard(&mut rx).await, vec!["outbox_events"; 3]);

    // It stops waiting: silence again.
    set_waiting(&waiting, false).await;
    emit(&client, &TestEvent::new("e", 1)).await.unwrap();
    assert_eq!(heard(&mut rx).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_relay_asking_to_wait_makes_writers_notify_and_waits_for_their_commit() {
    let db = TestDb::new().await;
    let (_listening, mut rx) = listener(&db).await;
    let mut writer = db.connect().await;
    // A writer inserts while nobody waits: it holds the waiting lock shared until it ends.
    let tx = writer.transaction().await.unwrap();
    emit(&tx, &TestEvent::new("a", 1)).await.unwrap();
    // A relay asks to wait: its request queues behind the writer.
    let relay = db.connect().await;
    let asking = tokio::spawn(async move {
        relay
            .execute(
                "SELECT pg_advisory_lock($1, $2)",
                &[&WAITING_LOCK.0, &WAITING_LOCK.1],
            )
            .await
            .unwrap();
        relay
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!asking.is_finished(), "the relay waits for the writer");
    // Another writer meanwhile cannot take the lock shared (a request is queued): it notifies.
    let other = db.pool().get().await.unwrap();
    emit(&other, &TestEvent::new("b", 1)).await.unwrap();
    assert_eq!(heard(&mut rx).await, vec!["outbox_events"]);
    assert!(!asking.is_finished());
    tx.commit().await.unwrap();
    let _relay = tokio::time::timeout(Duration::from_secs(5), asking)
        .await
        .expect("the relay gets the lock once the writer has committed")
        .unwrap();
}

/// The race of the design: a writer inserts (the trigger looks for a waiting relay) while the relay
/// is still busy, and commits while the relay goes idle; or the other way round. With a 10-minute
/// poll, an event that waits seconds was a lost wake-up.
#[tokio::test]
async fn no_wake_up_is_lost_when_writers_race_a_relay_going_idle() {
    const ROUNDS: usize = 300;
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::new());
    let relay = Relay::builder(db.pool().clone(), Arc::clone(&publisher))
        .listen(db.config().clone())
        .poll_interval(Duration::from_secs(600))
        .concurrency(2)
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut client = db.pool().get().await.unwrap();
    let mut slowest = Duration::ZERO;
    for round in 0..ROUNDS {
        // Vary the phase against the relay's own cycle: commit at once, or hold the transaction
        // open past the moment the relay (busy with the previous event) goes idle.
        let hold = Duration::from_micros((round as u64 * 7_919) % 4_000);
        let start = Instant::now();
        let tx = client.transaction().await.unwrap();
        emit(&tx, &TestEvent::new(format!("o-{round}"), 1))
            .await
            .unwrap();
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        tx.commit().await.unwrap();
        // Polled every millisecond (not `eventually`'s 20 ms): the next round must start while the
        // relay is still finishing this one.
        let deadline = Instant::now() + Duration::from_secs(5);
        let published = loop {
            if publisher.ids().len() > round {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        assert!(
            published,
            "round {round} (held {hold:?}): the event waits for the 10-minute poll — a lost wake-up"
        );
        slowest = slowest.max(start.elapsed());
    }
    assert_eq!(publisher.ids().len(), ROUNDS);
    running.stop().await;
    eprintln!("{ROUNDS} rounds; slowest commit → publish {slowest:?}");
}

/// Whether a relay holds the waiting lock in `client`'s database (it advertises that it waits:
/// writers notify).
async fn advertising(client: &tokio_postgres::Client) -> bool {
    !outbox_tests::waiting_lock_holders(client).await.is_empty()
}

/// A relay listening for wake-ups over `publisher` (polling every 10 minutes, so a wake-up left to
/// the poll fails the test), started and idle: advertising that it waits. With a connection to
/// watch the waiting lock through.
async fn idle_relay<P: outbox_core::Publisher>(
    db: &TestDb,
    publisher: P,
    batch_size: usize,
    concurrency: usize,
) -> (RunningRelay, tokio_postgres::Client) {
    let relay = Relay::builder(db.pool().clone(), publisher)
        .listen(db.config().clone())
        .poll_interval(Duration::from_secs(600))
        .batch_size(batch_size)
        .concurrency(concurrency)
        .build()
        .unwrap();
    let running = RunningRelay::start(&relay);
    let observer = db.connect().await;
    assert!(
        eventually(Duration::from_secs(5), async || advertising(&observer)
            .await)
        .await,
        "an idle relay advertises"
    );
    (running, observer)
}

/// At light load a relay is busy a millisecond or two per event. It keeps advertising through that
/// (it used to stop and start again per event), so every commit notifies: none waits for the lock
/// to be taken again and the claim after it.
#[tokio::test]
async fn at_light_load_every_commit_notifies() {
    const EVENTS: usize = 60;
    let db = TestDb::new().await;
    let (_listening, mut rx) = listener(&db).await;
    let publisher = Arc::new(RecordingPublisher::new());
    let (running, _observer) = idle_relay(&db, Arc::clone(&publisher), 100, 1).await;
    let client = db.pool().get().await.unwrap();
    for n in 0..EVENTS {
        emit(&client, &TestEvent::new(format!("o-{n}"), 1))
            .await
            .unwrap();
        // The next event commits as soon as this one is published: while the relay is still
        // finishing its batch.
        let deadline = Instant::now() + Duration::from_secs(5);
        while publisher.ids().len() <= n {
            assert!(Instant::now() < deadline, "event {n} was not published");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let notified = heard(&mut rx).await.len();
    running.stop().await;
    // On a loaded machine a batch may now and then outlast the hold (45 of 60 notified once, with
    // the other tests' processes busy beside it); before, most commits found the lock released (24
    // of 60 notified in a run on a 2-core machine).
    assert!(
        notified >= EVENTS * 2 / 3,
        "{notified} of {EVENTS} commits notified"
    );
}

/// A relay that stays busy stops advertising soon after: under sustained load writers do not pay
/// for notifications.
#[tokio::test]
async fn a_relay_busy_for_longer_than_the_hold_stops_advertising() {
    let db = TestDb::new().await;
    let (_listening, mut rx) = listener(&db).await;
    let publisher = Arc::new(RecordingPublisher::with_delay(Duration::from_millis(20)));
    let (running, observer) = idle_relay(&db, Arc::clone(&publisher), 10, 2).await;
    // A backlog of 40 batches of 20 ms, 2 at a time: about 400 ms of work.
    let client = db.pool().get().await.unwrap();
    let backlog: Vec<TestEvent> = (0..400).map(|n| TestEvent::new("backlog", n)).collect();
    emit_all(&client, &backlog).await.unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(2), rx.recv())
            .await
            .unwrap()
            .as_deref(),
        Some("outbox_events"),
        "the backlog's commit notifies the waiting relay"
    );
    assert!(
        eventually(Duration::from_secs(2), async || !advertising(&observer)
            .await)
        .await,
        "the busy relay stops advertising"
    );
    assert!(
        publisher.ids().len() < 300,
        "still busy (the check above is not the drain's end)"
    );
    emit(&client, &TestEvent::new("meanwhile", 1))
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(100), rx.recv())
            .await
            .is_err(),
        "a commit while the relay is busy does not notify"
    );
    assert!(
        eventually(Duration::from_secs(10), async || publisher.ids().len()
            == 401)
        .await,
        "everything is published"
    );
    assert!(
        eventually(Duration::from_secs(5), async || advertising(&observer)
            .await)
        .await,
        "idle again, it advertises again"
    );
    running.stop().await;
}

/// Counts the publish calls running at the same moment (each takes `delay`).
struct ConcurrencyProbe {
    delay: Duration,
    running: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
    published: std::sync::atomic::AtomicUsize,
}

impl outbox_core::Publisher for ConcurrencyProbe {
    type Error = std::io::Error;

    async fn publish(
        &self,
        events: &[outbox_core::ClaimedEvent],
    ) -> Result<Vec<outbox_core::PublishOutcome>, Self::Error> {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.running.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        tokio::time::sleep(self.delay).await;
        self.running.fetch_sub(1, SeqCst);
        self.published.fetch_add(events.len(), SeqCst);
        Ok(vec![outbox_core::PublishOutcome::Published; events.len()])
    }
}

/// A notification wakes one idle worker; its full claim wakes the next, and so on: a backlog
/// committed while the relay waits is drained by every worker, not by the one woken.
#[tokio::test]
async fn one_notification_brings_every_worker_in_when_claims_come_back_full() {
    let db = TestDb::new().await;
    let probe = Arc::new(ConcurrencyProbe {
        delay: Duration::from_millis(50),
        running: Default::default(),
        most: Default::default(),
        published: Default::default(),
    });
    let (running, _observer) = idle_relay(&db, Arc::clone(&probe), 10, 4).await;
    let client = db.pool().get().await.unwrap();
    let backlog: Vec<TestEvent> = (0..200)
        .map(|n| TestEvent::new(format!("o-{n}"), 1))
        .collect();
    emit_all(&client, &backlog).await.unwrap();
    assert!(
        eventually(Duration::from_secs(10), async || {
            probe.published.load(std::sync::atomic::Ordering::SeqCst) == 200
        })
        .await,
        "the backlog is published without waiting for the poll"
    );
    running.stop().await;
    assert_eq!(
        probe.most.load(std::sync::atomic::Ordering::SeqCst),
        4,
        "every worker joined in"
    );
}

/// A relay that keeps up with a steady stream is idle for moments only: busy for most of the time,
/// it stops advertising all the same (until its next idle moment), so writers do not notify at every
/// commit while it works. End to end, a worker's spells can chain past the hold on a loaded machine,
/// so this test may pass by the hold alone; the share rule on its own is proven by the unit test
/// `a_relay_busy_most_of_the_time_in_short_spells_stops_advertising` in `src/relay/waiting.rs`.
#[tokio::test]
async fn a_relay_busy_most_of_the_time_stops_advertising_between_idle_moments() {
    let db = TestDb::new().await;
    let publisher = Arc::new(RecordingPublisher::with_delay(Duration::from_millis(20)));
    let (running, observer) = idle_relay(&db, Arc::clone(&publisher), 100, 1).await;
    // One event every 25 ms, each busy for 20 ms and more: about 80 % busy, in spells shorter than
    // the hold. The period is kept by an interval, not a sleep after each emit: a slower emit on a
    // loaded machine stretched the period and brought the share near three quarters (1 CI run in 2).
    let writer = tokio::spawn({
        let pool = db.pool().clone();
        async move {
            let client = pool.get().await.unwrap();
            let mut period = tokio::time::interval(Duration::from_millis(25));
            period.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            for n in 0..160 {
                period.tick().await;
                emit(&client, &TestEvent::new(format!("o-{n}"), 1))
                    .await
                    .unwrap();
            }
        }
    });
    let mut released = 0;
    while !writer.is_finished() {
        if !advertising(&observer).await {
            released += 1;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    writer.await.unwrap();
    assert!(
        eventually(Duration::from_secs(10), async || publisher.ids().len()
            == 160)
        .await,
        "everything is published"
    );
    running.stop().await;
    assert!(released > 0, "the relay never stopped advertising");
}
