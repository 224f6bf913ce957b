//! One transaction interleaving two aggregates, `a`, whose first event a slow service holds, and
//! `b`: what the tests of "a slow service holds only its own aggregate" emit and check.

use std::time::{Duration, Instant};

use outbox_core::{Emitter, OutboxEvent};
use uuid::Uuid;

use crate::{TestDb, TestEvent, eventually};

/// The events of [`HeldAggregate::emit`].
#[derive(Debug)]
pub struct HeldAggregate {
    /// `a`'s first event (the one the slow service holds).
    pub a1: Uuid,
    /// `a`'s second event.
    pub a2: Uuid,
    /// `b`'s four events.
    pub b: Vec<Uuid>,
}

impl HeldAggregate {
    /// Emits, in one transaction, `first` (which must be of aggregate `order`/`a`), `b` 1, `a` 2
    /// and `b` 2 to 4 ([`TestEvent`]s).
    pub async fn emit(
        db: &TestDb,
        emitter: &Emitter,
        first: &(impl OutboxEvent + Sync),
    ) -> HeldAggregate {
        let mut client = db.pool().get().await.expect("a pooled connection");
        let tx = client.transaction().await.expect("begin");
        let a1 = emitter.emit(&tx, first).await.expect("emit a 1");
        let mut b = vec![
            emitter
                .emit(&tx, &TestEvent::new("b", 1))
                .await
                .expect("emit b 1"),
        ];
        let a2 = emitter
            .emit(&tx, &TestEvent::new("a", 2))
            .await
            .expect("emit a 2");
        for n in 2..=4 {
            b.push(
                emitter
                    .emit(&tx, &TestEvent::new("b", n))
                    .await
                    .expect("emit b"),
            );
        }
        tx.commit().await.expect("commit");
        HeldAggregate { a1, a2, b }
    }

    /// With a relay running: waits for `b`'s events, which must be published within `b_within`,
    /// then for `a`'s (20 s at most), which must be published in order, no attempt counted.
    /// Returns how long `b`'s and `a`'s took.
    pub async fn published(&self, db: &TestDb, b_within: Duration) -> (Duration, Duration) {
        let started = Instant::now();
        let b_done = eventually(Duration::from_secs(10), async || {
            db.processed(&self.b).await
        })
        .await;
        let b_took = started.elapsed();
        assert!(b_done, "b's events were not published");
        assert!(
            b_took < b_within,
            "b's events waited {b_took:?} for `a`'s slow service"
        );
        let a = [self.a1, self.a2];
        let a_done = eventually(Duration::from_secs(20), async || db.processed(&a).await).await;
        let a_took = started.elapsed();
        eprintln!("b published after {b_took:?}, a after {a_took:?}");
        assert!(a_done, "a's events were not published");
        let (e1, e2) = (db.event(self.a1).await, db.event(self.a2).await);
        assert!(e1.processed_at <= e2.processed_at, "a's events in order");
        assert_eq!((e1.attempts, e2.attempts), (0, 0), "nothing counted");
        (b_took, a_took)
    }
}
