//! The consumer's view of its database: after a database failure, receivers stop asking SQS for
//! messages and units wait before their next message, until the database answers again.
//!
//! Every delivery of a message counts against the queue's `maxReceiveCount`. Without this, a
//! database outage of half a minute (a failover) received, failed and hid every message in the
//! queue again and again, on the retry back-off, until the redrive policy moved healthy messages
//! to the dead-letter queue. With it, a message in hand when the outage starts fails once; the
//! others stay in the queue, or hidden by their unit's heartbeat, untouched.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::Pool;
use outbox_core::CancellationToken;
use tokio::sync::Mutex;

/// The first pause between probes of a database that failed; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause between probes.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Whether the database is known to be failing, and the one probe that finds out when it is back.
#[derive(Debug, Default)]
pub(crate) struct DatabaseGate {
    down: AtomicBool,
    probing: Mutex<()>,
}

impl DatabaseGate {
    /// Records a database failure: the next [`wait_up`](Self::wait_up) probes before it returns.
    pub(crate) fn failed(&self) {
        self.down.store(true, Ordering::SeqCst);
    }

    /// Returns at once while no failure is recorded; otherwise probes the database (a connection
    /// from `pool` and `SELECT 1`, each probe within `timeout`) until it answers. One caller
    /// probes, the others wait for it. `false` when `token` is cancelled first.
    pub(crate) async fn wait_up(
        &self,
        pool: &Pool,
        consumer: &str,
        timeout: Duration,
        token: &CancellationToken,
    ) -> bool {
        if !self.down.load(Ordering::SeqCst) {
            return true;
        }
        let _probing = tokio::select! {
            _ = token.cancelled() => return false,
            guard = self.probing.lock() => guard,
        };
        let (mut pause, mut logged) = (FIRST_PAUSE, false);
        while self.down.load(Ordering::SeqCst) {
            let probe = async {
                let client = pool.get().await.map_err(|e| e.to_string())?;
                match tokio::time::timeout(timeout, client.simple_query("SELECT 1")).await {
                    Ok(Ok(_)) => Ok(()),
                    // A connection that failed or did not answer is closed, not handed back to
                    // the pool for the next probe.
                    Ok(Err(e)) => {
                        drop(deadpool_postgres::Object::take(client));
                        Err(e.to_string())
                    }
                    Err(_) => {
                        drop(deadpool_postgres::Object::take(client));
                        Err(format!("no answer to SELECT 1 within {timeout:?}"))
                    }
                }
            };
            // Opening a connection after an outage (TCP, TLS, authentication) may take longer
            // than a query: the whole probe gets twice the time.
            match tokio::time::timeout(timeout.saturating_mul(2), probe).await {
                Ok(Ok(_)) => {
                    self.down.store(false, Ordering::SeqCst);
                    if logged {
                        tracing::info!(consumer, "the database answers again: receiving");
                    }
                    break;
                }
                Ok(Err(error)) if !logged => {
                    tracing::warn!(consumer, %error,
                        "the database is failing: receiving paused until it answers");
                    logged = true;
                }
                Err(_) if !logged => {
                    tracing::warn!(
                        consumer,
                        timeout_ms = timeout.as_millis() as u64,
                        "the database does not answer: receiving paused until it does"
                    );
                    logged = true;
                }
                _ => {}
            }
            tokio::select! {
                _ = token.cancelled() => return false,
                _ = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(MAX_PAUSE);
        }
        true
    }
}
