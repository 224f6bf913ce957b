//! A relay running on a task, stopped on demand.

use std::time::{Duration, Instant};

use outbox_core::{CancellationToken, Publisher, Relay};
use tokio::task::JoinHandle;

/// A relay started with [`RunningRelay::start`]; [`stop`](RunningRelay::stop) cancels it and checks
/// it returned cleanly.
pub struct RunningRelay {
    stop: CancellationToken,
    task: JoinHandle<Result<(), outbox_core::Error>>,
}

impl RunningRelay {
    /// Runs `relay` until stopped.
    pub fn start<P: Publisher>(relay: &Relay<P>) -> RunningRelay {
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (relay, stop) = (relay.clone(), stop.clone());
            async move { relay.run(stop).await }
        });
        RunningRelay { stop, task }
    }

    /// Cancels the relay and waits for it; panics if it failed.
    pub async fn stop(self) {
        self.stop.cancel();
        self.task
            .await
            .expect("the relay task")
            .expect("the relay returns cleanly");
    }
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes; returns whether it held.
pub async fn eventually(timeout: Duration, mut cond: impl AsyncFnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond().await
}

/// Takes (`true`) or releases (`false`) the waiting lock on `client`'s session, as a relay whose
/// workers all went idle advertises that it waits (writers then notify), and stops.
pub async fn set_waiting(client: &tokio_postgres::Client, waiting: bool) {
    let sql = if waiting {
        "SELECT pg_advisory_lock($1, $2)"
    } else {
        "SELECT pg_advisory_unlock($1, $2)"
    };
    let (k1, k2) = outbox_core::WAITING_LOCK;
    client
        .execute(sql, &[&k1, &k2])
        .await
        .expect("the waiting lock");
}

/// The sessions holding the waiting lock in `observer`'s database (advisory locks are per
/// database: a relay waiting on another database of the server, a demo's or another test's, is
/// not this one's).
pub async fn waiting_lock_holders(observer: &tokio_postgres::Client) -> Vec<i32> {
    let (k1, k2) = outbox_core::WAITING_LOCK;
    observer
        .query(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::int::oid \
             AND objid = $2::int::oid AND objsubid = 2 AND mode = 'ExclusiveLock' AND granted \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[&k1, &k2],
        )
        .await
        .expect("the waiting lock's holders")
        .iter()
        .map(|r| r.get(0))
        .collect()
}
