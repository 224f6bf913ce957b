//! The outbox's state at a glance.

use crate::client::GenericClient;
use outbox_queries::queries::admin as sql;

use crate::error::Error;

/// Counts of the outbox's state, from one cheap query over partial indexes (what `outbox stats`
/// prints and the relay's gauges show).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct OutboxStats {
    /// Events not yet published, excluding dead letters.
    pub pending: i64,
    /// Pending events due now (not waiting for a retry, nor held back behind an earlier event).
    pub due_now: i64,
    /// Pending events not waiting for a retry themselves but behind an earlier event of their
    /// aggregate that is (or that is a dead letter): a relay that keeps per-aggregate order (the
    /// default) publishes them after it, once it is retried (or the dead letter retried or purged).
    pub held_back: i64,
    /// Pending events due later: waiting for a retry after a failure (an attempt counted), or
    /// put back without one (their destination down or slow, their call going on).
    pub waiting_retry: i64,
    /// Dead letters.
    pub dead_letters: i64,
    /// Age in seconds of the pending event first in line: the lowest `seq` (commit order), from
    /// its `created_at` (its transaction's start). `None` when nothing is pending.
    pub oldest_pending_age_secs: Option<f64>,
    /// Aggregates with a dead letter: their later events, written or to come, wait for it (a
    /// relay keeping per-aggregate order).
    pub blocked_aggregates: i64,
    /// Events published in the last hour.
    pub published_last_hour: i64,
}

impl From<sql::OutboxStats> for OutboxStats {
    fn from(s: sql::OutboxStats) -> Self {
        OutboxStats {
            pending: s.pending,
            due_now: s.due_now,
            held_back: s.held_back,
            waiting_retry: s.waiting_retry,
            dead_letters: s.dead_letters,
            oldest_pending_age_secs: s.oldest_pending_age_secs,
            blocked_aggregates: s.blocked_aggregates,
            published_last_hour: s.published_last_hour,
        }
    }
}

/// The figures the relay's gauges show, from a lighter query than [`stats`] (no join).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Gauges {
    pub(crate) pending: i64,
    pub(crate) dead_letters: i64,
    pub(crate) oldest_pending_age_secs: Option<f64>,
    pub(crate) blocked_aggregates: i64,
}

/// Reads what the relay's gauges show.
pub(crate) async fn gauges<C: GenericClient>(client: &C) -> Result<Gauges, Error> {
    let g = sql::outbox_gauges().bind(client).one().await?;
    Ok(Gauges {
        pending: g.pending,
        dead_letters: g.dead_letters,
        oldest_pending_age_secs: g.oldest_pending_age_secs,
        blocked_aggregates: g.blocked_aggregates,
    })
}

/// Reads the outbox's state: pending events (due now, held back, waiting for a retry), dead letters,
/// the oldest pending event's age, aggregates blocked by a dead letter, and events published in the
/// last hour.
pub async fn stats<C: GenericClient>(client: &C) -> Result<OutboxStats, Error> {
    Ok(sql::outbox_stats().bind(client).one().await?.into())
}
