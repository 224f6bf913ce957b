//! The consumer's view of the services a delivery needs besides SQS: after a failure of the
//! database (or of S3, for offloaded payloads), the work that needs it waits, until a probe finds
//! it answering again.
//!
//! Every delivery of a message counts against the queue's `maxReceiveCount`. Without this, a
//! database outage of half a minute (a failover) received, failed and hid every message in the
//! queue again and again, on the retry back-off, until the redrive policy moved healthy messages
//! to the dead-letter queue. With it, a message in hand when the outage starts fails once; the
//! others stay in the queue, or hidden by their unit's heartbeat, untouched.
//!
//! - The database: receivers stop asking SQS for messages and units wait before their next
//!   message.
//! - S3: units wait before reading an offloaded payload; messages that carry their payload go on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use outbox_core::CancellationToken;
use tokio::sync::Mutex;

/// The first pause between probes of a service that failed; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause between probes.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Why a probe failed: the service answered with an error, or did not answer in time.
#[derive(Debug)]
pub(crate) enum ProbeError {
    /// It failed; the error.
    Failed(String),
    /// No answer within the probe's time, this long.
    Silent(Duration),
}

/// What a gate's log lines say: the service and the work that waits for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wording {
    /// The service, as a sentence starts: "the database", "S3".
    pub(crate) service: &'static str,
    /// What pauses while it fails: "receiving".
    pub(crate) paused: &'static str,
}

/// The database's wording.
pub(crate) const DATABASE: Wording = Wording {
    service: "the database",
    paused: "receiving",
};

/// S3's wording.
pub(crate) const S3: Wording = Wording {
    service: "S3",
    paused: "reading offloaded payloads",
};

/// Whether a service is known to be failing, and the one probe that finds out when it is back.
#[derive(Debug)]
pub(crate) struct Gate {
    wording: Wording,
    down: AtomicBool,
    /// Failures recorded so far: a probe's success opens the gate only if none was recorded
    /// while it ran (the service may have answered the probe and then failed again).
    failures: AtomicU64,
    probing: Mutex<()>,
}

impl Gate {
    /// An open gate for the service `wording` names.
    pub(crate) fn new(wording: Wording) -> Gate {
        Gate {
            wording,
            down: AtomicBool::new(false),
            failures: AtomicU64::new(0),
            probing: Mutex::new(()),
        }
    }

    /// Records a failure of the service: the next [`wait_up`](Self::wait_up) probes before it
    /// returns.
    pub(crate) fn failed(&self) {
        self.failures.fetch_add(1, Ordering::SeqCst);
        self.down.store(true, Ordering::SeqCst);
    }

    /// Whether a failure is recorded and no probe has found the service back since.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    /// Returns at once while no failure is recorded; otherwise runs `probe` (which keeps to its
    /// own time limit) until it succeeds. One caller probes, the others wait for it. `false` when
    /// `token` is cancelled first, a probe under way included.
    pub(crate) async fn wait_up<F, Fut>(
        &self,
        consumer: &str,
        token: &CancellationToken,
        probe: F,
    ) -> bool
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<(), ProbeError>>,
    {
        if !self.down.load(Ordering::SeqCst) {
            return true;
        }
        let _probing = tokio::select! {
            _ = token.cancelled() => return false,
            guard = self.probing.lock() => guard,
        };
        let Wording { service, paused } = self.wording;
        let (mut pause, mut logged) = (FIRST_PAUSE, false);
        while self.down.load(Ordering::SeqCst) {
            let failures = self.failures.load(Ordering::SeqCst);
            let answer = tokio::select! {
                _ = token.cancelled() => return false,
                answer = probe() => answer,
            };
            match answer {
                Ok(()) => {
                    self.down.store(false, Ordering::SeqCst);
                    if self.failures.load(Ordering::SeqCst) == failures {
                        if logged {
                            tracing::info!(consumer, "{service} answers again: {paused} again");
                        }
                        break;
                    }
                    // A failure recorded while the probe ran, or while the gate was being opened
                    // (read after opening: a failure this read misses stores `down` after it), is
                    // newer than the probe's answer: closed again, probed again.
                    self.down.store(true, Ordering::SeqCst);
                }
                Err(ProbeError::Failed(error)) if !logged => {
                    tracing::warn!(consumer, %error,
                        "{service} is failing: {paused} paused until it answers");
                    logged = true;
                }
                Err(ProbeError::Silent(timeout)) if !logged => {
                    tracing::warn!(
                        consumer,
                        timeout_ms = timeout.as_millis() as u64,
                        "{service} does not answer: {paused} paused until it does"
                    );
                    logged = true;
                }
                Err(_) => {}
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

/// Probes the database: a connection from `pool` and the inbox's own query (a database that
/// answers `SELECT 1` but whose `processed_events` is missing or denied would open the gate for
/// every message to fail on: black-box run), the query within `timeout` and
/// the whole probe within twice that (opening a connection after an outage, with TCP, TLS and
/// authentication, may take longer than a query). A connection whose query failed, did not
/// answer, or was cut short (the probe dropped at shutdown) is closed, not handed back to the
/// pool, which is the application's too.
pub(crate) async fn probe_database(
    pool: &deadpool_postgres::Pool,
    timeout: Duration,
) -> Result<(), ProbeError> {
    let probe = async {
        let client = Discard(Some(pool.get().await.map_err(|e| e.to_string())?));
        let Some(conn) = client.0.as_ref() else {
            return Err("no connection".to_owned());
        };
        let inbox = outbox_core::was_processed(&***conn, "", uuid::Uuid::nil());
        match tokio::time::timeout(timeout, inbox).await {
            Ok(Ok(_)) => {
                client.keep();
                Ok(())
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer to the inbox's query within {timeout:?}")),
        }
    };
    let whole = timeout.saturating_mul(2);
    match tokio::time::timeout(whole, probe).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(ProbeError::Failed(error)),
        Err(_) => Err(ProbeError::Silent(whole)),
    }
}

/// A pooled connection that is closed when dropped, unless [`keep`](Self::keep) hands it back to
/// the pool first.
struct Discard(Option<deadpool_postgres::Object>);

impl Discard {
    fn keep(mut self) {
        // Dropping the object itself returns it to the pool.
        drop(self.0.take());
    }
}

impl Drop for Discard {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test]
    async fn an_open_gate_never_probes_and_a_closed_one_probes_until_an_answer() {
        let gate = Gate::new(S3);
        let token = CancellationToken::new();
        let probes = AtomicUsize::new(0);
        let probe = || async {
            let n = probes.fetch_add(1, Ordering::SeqCst);
            if n < 2 {
                Err(ProbeError::Failed("down".into()))
            } else {
                Ok(())
            }
        };
        assert!(gate.wait_up("c", &token, probe).await);
        assert_eq!(probes.load(Ordering::SeqCst), 0);
        gate.failed();
        assert!(gate.wait_up("c", &token, probe).await);
        assert_eq!(probes.load(Ordering::SeqCst), 3);
        assert!(gate.wait_up("c", &token, probe).await);
        assert_eq!(probes.load(Ordering::SeqCst), 3, "open again");
    }

    /// A failure recorded while a probe runs (a unit's call failing just after the probe was
    /// answered) keeps the gate closed: the probe's answer is older. Before, the gate opened and
    /// every waiting unit went on to fail once more.
    #[tokio::test]
    async fn a_failure_during_a_probe_keeps_the_gate_closed() {
        let gate = Gate::new(S3);
        let token = CancellationToken::new();
        let probes = AtomicUsize::new(0);
        gate.failed();
        let probe = || async {
            if probes.fetch_add(1, Ordering::SeqCst) == 0 {
                gate.failed();
            }
            Ok(())
        };
        assert!(gate.wait_up("c", &token, probe).await);
        assert_eq!(
            probes.load(Ordering::SeqCst),
            2,
            "probed again after the new failure"
        );
        assert!(!gate.is_down());
    }

    /// A database probe cut short (shutdown ends the wait while `SELECT 1` hangs on a silent
    /// connection) closes its connection. Before, the connection went back to the pool, the
    /// application's too, with its query never to be answered ahead of the next user's.
    #[tokio::test]
    async fn a_database_probe_cut_short_closes_its_connection() {
        let db = outbox_tests::TestDb::new().await;
        let proxy = outbox_tests::BlackHoleProxy::start(db.server_addr()).await;
        let pool = db.pool_via(proxy.addr(), 2);
        drop(pool.get().await.expect("a connection through the proxy"));
        assert_eq!(pool.status().size, 1, "one idle connection");
        proxy.black_hole();
        let probe = probe_database(&pool, Duration::from_secs(10));
        let cut = tokio::time::timeout(Duration::from_millis(300), probe).await;
        assert!(cut.is_err(), "the probe hangs on the silent connection");
        assert_eq!(pool.status().size, 0, "closed, not handed back to the pool");
    }

    /// Shutdown while a probe hangs (the service black-holed: connections open, nothing comes
    /// back): the wait ends at once. Before, the probe ran to its own time limit first (twice
    /// the database probe's 10 s at least), and shutdown waited that long.
    #[tokio::test]
    async fn cancellation_ends_the_wait_while_a_probe_hangs() {
        let gate = Gate::new(DATABASE);
        gate.failed();
        let token = CancellationToken::new();
        let cancel = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            cancel.cancel();
        });
        let waited = tokio::time::timeout(
            Duration::from_secs(5),
            gate.wait_up("c", &token, std::future::pending),
        )
        .await;
        assert_eq!(waited.ok(), Some(false), "the wait ends with the token");
    }
}
