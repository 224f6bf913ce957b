//! Connection and pool settings for a relay: TCP keepalives, a TCP user timeout and pool time-outs,
//! so that a dead network path is noticed in seconds instead of the kernel's default two hours.
//!
//! The relay bounds its own waits (see [`RelayConfig::publish_timeout`](crate::RelayConfig)) and
//! PostgreSQL ends a claim transaction that stops talking; these settings make the *connections*
//! fail fast as well. Apply them where you build the relay's pool and LISTEN connection:
//!
//! ```
//! use std::time::Duration;
//! let publish_timeout = Duration::from_secs(30);
//! let mut pg: tokio_postgres::Config = "host=127.0.0.1 user=postgres".parse().unwrap();
//! outbox_core::connect::harden(&mut pg, publish_timeout);
//! let manager = deadpool_postgres::Manager::new(pg, tokio_postgres::NoTls);
//! let pool = outbox_core::connect::pool_timeouts(
//!     deadpool_postgres::Pool::builder(manager).max_size(8),
//!     publish_timeout,
//! )
//! .build()
//! .unwrap();
//! # drop(pool);
//! ```

use std::time::Duration;

use super::creation_gate::CreationGate;
use super::idle_limit::{IdleLimit, limit_idle_session};
use crate::relay::CLAIM_IDLE_MARGIN;

/// Idle time before the first TCP keepalive probe.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(15);
/// Time between TCP keepalive probes.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// Unanswered probes before the connection is dropped.
pub const KEEPALIVE_RETRIES: u32 = 3;
/// Connection attempts give up after this (unless the configuration sets its own).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A pooled connection is created within this, or the attempt fails.
pub const POOL_CREATE_TIMEOUT: Duration = Duration::from_secs(10);
/// A returned connection is checked within this, or it is discarded.
pub const POOL_RECYCLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Sets TCP keepalives ([`KEEPALIVE_IDLE`], [`KEEPALIVE_INTERVAL`], [`KEEPALIVE_RETRIES`]), a TCP
/// user timeout of `publish_timeout` + [`CLAIM_IDLE_MARGIN`] (data sent and not acknowledged for
/// that long fails the connection; Linux only, ignored elsewhere) and, unless set,
/// [`CONNECT_TIMEOUT`].
pub fn harden(config: &mut tokio_postgres::Config, publish_timeout: Duration) {
    config
        .keepalives(true)
        .keepalives_idle(KEEPALIVE_IDLE)
        .keepalives_interval(KEEPALIVE_INTERVAL)
        .keepalives_retries(KEEPALIVE_RETRIES)
        .tcp_user_timeout(publish_timeout.saturating_add(CLAIM_IDLE_MARGIN));
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
}

/// Gives a pool builder its time-outs: waiting for a free connection at most `publish_timeout`,
/// creating one at most [`POOL_CREATE_TIMEOUT`], recycling one at most [`POOL_RECYCLE_TIMEOUT`]
/// (deadpool enforces them on the Tokio runtime, which this also sets).
pub fn pool_timeouts(
    builder: deadpool_postgres::PoolBuilder,
    publish_timeout: Duration,
) -> deadpool_postgres::PoolBuilder {
    builder
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(publish_timeout))
        .create_timeout(Some(POOL_CREATE_TIMEOUT))
        .recycle_timeout(Some(POOL_RECYCLE_TIMEOUT))
}

/// How long a session of a pool built with [`end_idle_sessions`], or a relay's LISTEN or
/// advertising connection, may wait for a statement outside a transaction before the server ends
/// it (`idle_session_timeout`). A relay's workers use each of its pool's connections every few
/// seconds (the fallback poll, 2 s by default, takes them in turn), and it asks its own two
/// connections whether they answer at least every 30 s, so only a session whose connection
/// stalled, or a pool left unused that long, reaches it.
pub const IDLE_SESSION_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether a refusal of `idle_session_timeout` was logged (once per process).
static REFUSED_SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Gives a pool builder a hook that sets [`IDLE_SESSION_TIMEOUT`] on each new connection's
/// server session (PostgreSQL 14 and later; older servers are left as they are, and so are the
/// server connections of a pooler, which serve other clients too), within 5 s or the connection
/// is not made.
///
/// A connection that stalls while idle in the pool (a middlebox holding its bytes, both sockets
/// open) leaves its server session behind: the relay ends such sessions from a new connection, but
/// when they hold every connection slot its role has, there is none to open, for this relay nor
/// for one started again (black-box run: publishing stopped for good). The server ends them
/// itself then, a minute on. For a pool of the relay's own: a healthy connection left idle that
/// long is closed too, and the pool opens another when it is next needed.
pub fn end_idle_sessions(
    builder: deadpool_postgres::PoolBuilder,
) -> deadpool_postgres::PoolBuilder {
    end_idle_sessions_learning(builder, true, None, None)
}

/// How long a new connection of a pool built with [`end_idle_sessions`] has to answer the
/// statement setting the limit, after its start-up.
pub(crate) const NEW_CONNECTION_ANSWER: Duration = Duration::from_secs(5);

/// [`end_idle_sessions`] (setting the limit only when `set`: not when the connection string sets
/// its own), recording in `learned` (its connector's) whether the setting was taken, so that the
/// connector's later connections ask for it at start-up, and in `gate` whether the new
/// connection answered or stalled.
pub(crate) fn end_idle_sessions_learning(
    builder: deadpool_postgres::PoolBuilder,
    set: bool,
    learned: Option<IdleLimit>,
    gate: Option<CreationGate>,
) -> deadpool_postgres::PoolBuilder {
    builder.post_create(deadpool_postgres::Hook::async_fn(move |client, _| {
        let learned = learned.clone();
        let gate = gate.clone();
        Box::pin(async move {
            let answered = || {
                if let Some(gate) = &gate {
                    gate.answered();
                }
            };
            if !set {
                answered();
                return Ok(());
            }
            // Behind a pooler the session that answers is not the connection's own (its start-up
            // named another process): nothing is set on a server connection others share.
            let Some(pid) = crate::relay::key_data::startup_pid(client).await else {
                if let Some(learned) = &learned {
                    learned.learn(false);
                }
                answered();
                return Ok(());
            };
            let limited = limit_idle_session(client, pid);
            let outcome = tokio::time::timeout(NEW_CONNECTION_ANSWER, limited).await;
            match &outcome {
                Err(_) => {
                    if let Some(gate) = &gate {
                        gate.stalled(tokio::time::Instant::now());
                    }
                }
                Ok(_) => answered(),
            }
            match outcome {
                Ok(Ok(applied)) => {
                    if let Some(learned) = &learned {
                        learned.learn(applied);
                    }
                    Ok(())
                }
                // Best effort: a server that refuses it (one that speaks PostgreSQL's protocol
                // without the setting, say) still serves the relay, without this protection
                // (review: every connection failed).
                Ok(Err(e)) => {
                    if !REFUSED_SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        tracing::warn!(error = %crate::error_chain(&e),
                            "could not set idle_session_timeout on the relay's pool connections: sessions left by connections that stall while idle are not ended by the server");
                    }
                    Ok(())
                }
                Err(_) => Err(deadpool_postgres::HookError::message(
                    "the new connection did not answer within 5 s",
                )),
            }
        })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harden_sets_keepalives_and_timeouts_but_keeps_a_given_connect_timeout() {
        let mut c = tokio_postgres::Config::new();
        c.connect_timeout(Duration::from_secs(3));
        harden(&mut c, Duration::from_secs(30));
        assert!(c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), KEEPALIVE_IDLE);
        assert_eq!(
            c.get_tcp_user_timeout(),
            Some(&(Duration::from_secs(30) + CLAIM_IDLE_MARGIN))
        );
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(3)));
        let mut d = tokio_postgres::Config::new();
        harden(&mut d, Duration::from_secs(1));
        assert_eq!(d.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
    }

    #[test]
    fn pool_timeouts_are_set() {
        let manager =
            deadpool_postgres::Manager::new(tokio_postgres::Config::new(), tokio_postgres::NoTls);
        let pool = pool_timeouts(
            deadpool_postgres::Pool::builder(manager),
            Duration::from_secs(7),
        )
        .build()
        .unwrap();
        let t = pool.timeouts();
        assert_eq!(t.wait, Some(Duration::from_secs(7)));
        assert_eq!(t.create, Some(POOL_CREATE_TIMEOUT));
        assert_eq!(t.recycle, Some(POOL_RECYCLE_TIMEOUT));
    }
}
