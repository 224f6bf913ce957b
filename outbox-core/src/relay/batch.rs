//! One batch: claim, publish, acknowledge — all inside one transaction.

use std::collections::HashMap;

use outbox_queries::queries::relay as sql;
use tokio::time::Instant;
use uuid::Uuid;

use super::Inner;
use crate::backoff::Disposition;
use crate::error::{Error, ErrorKind};
use crate::publisher::{ClaimedEvent, PublishOutcome, Publisher, UNAVAILABLE_RETRY_DELAY};

/// What one batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// Events claimed.
    pub claimed: usize,
    /// Events the publisher accepted, now marked processed.
    pub published: usize,
    /// Events that failed and will be retried after a backoff.
    pub retried: usize,
    /// Events dead-lettered (permanent failure or attempts used up).
    pub dead_lettered: usize,
    /// Events whose destination was [unavailable](PublishOutcome::Unavailable): put back for a
    /// short delay without an attempt counted.
    pub deferred: usize,
    /// Events released without an attempt counted: they followed a failed event of their aggregate,
    /// or the publisher failed as a whole. They are claimed again later.
    pub released: usize,
    /// Whether the claim returned a full batch (more may be waiting).
    pub full: bool,
}

/// A failed event, as recorded in one statement.
struct Failure {
    id: Uuid,
    error: String,
    delay_secs: f64,
    dead: bool,
    /// Whether the failure counts as an attempt (not when the destination was unavailable).
    counted: bool,
}

/// Splits events (in `seq` order) into waves: wave `k` holds the `k`-th event of every aggregate, so
/// a wave never holds two events of one aggregate and waves run in order.
pub(crate) fn waves(events: Vec<ClaimedEvent>) -> Vec<Vec<ClaimedEvent>> {
    let mut depth: HashMap<(String, String), usize> = HashMap::new();
    let mut waves: Vec<Vec<ClaimedEvent>> = Vec::new();
    for event in events {
        let d = depth
            .entry((event.aggregate_type.clone(), event.aggregate_id.clone()))
            .or_insert(0);
        if waves.len() <= *d {
            waves.push(Vec::new());
        }
        waves[*d].push(event);
        *d += 1;
    }
    waves
}

/// How many of the oldest pending events the fast head search looks at, per event of the batch.
const HEAD_WINDOW_PER_EVENT: usize = 10;
/// The fast head search looks at no fewer pending events than this.
const MIN_HEAD_WINDOW: usize = 1_000;

/// Claims the next events: with per-aggregate order, the heads of aggregates plus the due events
/// that follow them; without, simply the oldest due events.
///
/// Heads are searched among the oldest pending events first (cheap when events spread over many
/// aggregates); when that finds too few and more events are pending beyond it, the search walks the
/// aggregate index instead (one probe per aggregate: cheap when a few aggregates carry a long backlog,
/// and no aggregate starves behind a blocked one).
async fn claim(
    tx: &deadpool_postgres::Transaction<'_>,
    batch_size: usize,
    ordered: bool,
) -> Result<Vec<ClaimedEvent>, Error> {
    let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let limit = as_i64(batch_size);
    if !ordered {
        return Ok(sql::fetch_outbox_batch()
            .prepare(tx)
            .await?
            .bind(tx, &limit)
            .all()
            .await?);
    }
    let window = as_i64(
        batch_size
            .saturating_mul(HEAD_WINDOW_PER_EVENT)
            .max(MIN_HEAD_WINDOW),
    );
    let mut events = sql::fetch_outbox_heads()
        .prepare(tx)
        .await?
        .bind(tx, &window, &limit)
        .all()
        .await?;
    if events.len() < batch_size
        && sql::outbox_pending_beyond()
            .prepare(tx)
            .await?
            .bind(tx, &window)
            .one()
            .await?
    {
        let exclude: Vec<uuid::Uuid> = events.iter().map(|e| e.id).collect();
        let more = sql::fetch_outbox_heads_by_aggregate()
            .prepare(tx)
            .await?
            .bind(tx, &exclude, &as_i64(batch_size - events.len()))
            .all()
            .await?;
        events.extend(more);
    }
    let room = batch_size.saturating_sub(events.len());
    if room > 0 && !events.is_empty() {
        let types: Vec<&str> = events.iter().map(|e| e.aggregate_type.as_str()).collect();
        let ids: Vec<&str> = events.iter().map(|e| e.aggregate_id.as_str()).collect();
        let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
        let followers = sql::fetch_outbox_followers()
            .prepare(tx)
            .await?
            .bind(tx, &types, &ids, &seqs, &as_i64(room))
            .all()
            .await?;
        events.extend(followers);
    }
    events.sort_by_key(|e| e.seq);
    Ok(events)
}

/// Claims a batch, publishes it and records the outcome in the claiming transaction.
///
/// Returns `Err` when the database failed (the transaction rolls back: every claim is released and
/// nothing is marked) or when the publisher failed as a whole (what was published before is still
/// recorded and committed; the rest is released).
pub(crate) async fn run_batch<P: Publisher>(inner: &Inner<P>) -> Result<BatchReport, Error> {
    let started = Instant::now();
    let result = claim_publish_ack(inner).await;
    if let Some(m) = &inner.metrics {
        match &result {
            Ok(report) if report.claimed > 0 => m.batch(started.elapsed().as_secs_f64()),
            Ok(_) => {}
            Err(_) => m.relay_error(),
        }
    }
    result
}

async fn claim_publish_ack<P: Publisher>(inner: &Inner<P>) -> Result<BatchReport, Error> {
    let (batch_size, ordered) = (inner.config.batch_size, inner.config.per_aggregate_order);
    let (publisher, policy, metrics) = (&inner.publisher, &inner.policy, inner.metrics.as_ref());
    let publish_timeout = inner.config.publish_timeout;
    let mut client = inner.pool.get().await?;
    let tx = client.transaction().await?;
    let events = claim(&tx, batch_size, ordered).await?;
    let mut report = BatchReport {
        claimed: events.len(),
        full: events.len() >= batch_size,
        ..BatchReport::default()
    };
    if events.is_empty() {
        tx.commit().await?;
        return Ok(report);
    }
    // The claim transaction never stays open longer than the publish timeout.
    let deadline = Instant::now() + publish_timeout;
    let waves = if ordered { waves(events) } else { vec![events] };

    let mut published: Vec<Uuid> = Vec::new();
    let mut failures: Vec<Failure> = Vec::new();
    let mut blocked: Vec<(String, String)> = Vec::new();
    let mut whole_failure: Option<Error> = None;

    for mut wave in waves {
        if whole_failure.is_some() {
            report.released += wave.len();
            continue;
        }
        // An aggregate whose earlier event failed in this batch waits: its later events are released.
        let before = wave.len();
        wave.retain(|e| {
            !blocked
                .iter()
                .any(|(t, i)| *t == e.aggregate_type && *i == e.aggregate_id)
        });
        report.released += before - wave.len();
        if wave.is_empty() {
            continue;
        }
        match tokio::time::timeout_at(deadline, publisher.publish(&wave)).await {
            Ok(Ok(outcomes)) => {
                let mut outcomes = outcomes.into_iter();
                for event in &wave {
                    let outcome = outcomes.next().unwrap_or_else(|| {
                        PublishOutcome::Retry("the publisher returned no outcome".into())
                    });
                    let (error, permanent) = match outcome {
                        PublishOutcome::Published => {
                            tracing::debug!(
                                event_id = %event.id, event_type = %event.event_type,
                                aggregate_id = %event.aggregate_id, attempt = event.attempts + 1,
                                "published"
                            );
                            published.push(event.id);
                            if let Some(m) = metrics {
                                let age = chrono::Utc::now() - event.created_at;
                                m.published(&event.event_type, age.as_seconds_f64());
                            }
                            continue;
                        }
                        PublishOutcome::Retry(e) => (e, false),
                        PublishOutcome::Permanent(e) => (e, true),
                        PublishOutcome::Unavailable(e) => {
                            report.deferred += 1;
                            let delay =
                                UNAVAILABLE_RETRY_DELAY.mul_f64(1.0 - 0.2 * rand::random::<f64>());
                            tracing::warn!(
                                event_id = %event.id, event_type = %event.event_type,
                                aggregate_id = %event.aggregate_id, attempt = event.attempts + 1,
                                retry_in_ms = delay.as_millis() as u64, error = %e,
                                "destination unavailable; event put back without counting an attempt"
                            );
                            if ordered {
                                blocked.push((
                                    event.aggregate_type.clone(),
                                    event.aggregate_id.clone(),
                                ));
                            }
                            failures.push(Failure {
                                id: event.id,
                                error: e,
                                delay_secs: delay.as_secs_f64(),
                                dead: false,
                                counted: false,
                            });
                            continue;
                        }
                    };
                    let attempts = u32::try_from(event.attempts).unwrap_or(0);
                    let disposition = policy.on_failure(attempts, permanent, rand::random());
                    let (dead, delay_secs) = match disposition {
                        Disposition::DeadLetter => {
                            report.dead_lettered += 1;
                            tracing::error!(
                                event_id = %event.id, event_type = %event.event_type,
                                aggregate_id = %event.aggregate_id, attempt = event.attempts + 1,
                                permanent, error = %error, "event dead-lettered"
                            );
                            (true, 0.0)
                        }
                        Disposition::RetryAfter(d) => {
                            report.retried += 1;
                            tracing::warn!(
                                event_id = %event.id, event_type = %event.event_type,
                                aggregate_id = %event.aggregate_id, attempt = event.attempts + 1,
                                retry_in_ms = d.as_millis() as u64, error = %error,
                                "publish failed; will retry"
                            );
                            (false, d.as_secs_f64())
                        }
                    };
                    if let Some(m) = metrics {
                        m.failed(&event.event_type, dead);
                    }
                    if ordered {
                        blocked.push((event.aggregate_type.clone(), event.aggregate_id.clone()));
                    }
                    failures.push(Failure {
                        id: event.id,
                        error,
                        delay_secs,
                        dead,
                        counted: true,
                    });
                }
            }
            Ok(Err(e)) => {
                report.released += wave.len();
                whole_failure =
                    Some(Error::new(ErrorKind::Publish, "the publisher failed").with_source(e));
            }
            Err(_) => {
                report.released += wave.len();
                whole_failure = Some(Error::new(
                    ErrorKind::Timeout,
                    format!("publishing did not finish within {publish_timeout:?}"),
                ));
            }
        }
    }

    if !published.is_empty() {
        sql::mark_outbox_processed()
            .prepare(&tx)
            .await?
            .bind(&tx, &published)
            .all()
            .await?;
    }
    if !failures.is_empty() {
        let ids: Vec<Uuid> = failures.iter().map(|f| f.id).collect();
        let errors: Vec<&str> = failures.iter().map(|f| f.error.as_str()).collect();
        let delays: Vec<f64> = failures.iter().map(|f| f.delay_secs).collect();
        let dead: Vec<bool> = failures.iter().map(|f| f.dead).collect();
        let counted: Vec<bool> = failures.iter().map(|f| f.counted).collect();
        sql::record_outbox_failures()
            .prepare(&tx)
            .await?
            .bind(&tx, &ids, &errors, &delays, &dead, &counted)
            .all()
            .await?;
    }
    tx.commit().await?;
    report.published = published.len();
    match whole_failure {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: i64, aggregate: &str) -> ClaimedEvent {
        ClaimedEvent {
            id: Uuid::new_v4(),
            seq,
            aggregate_type: "order".into(),
            aggregate_id: aggregate.into(),
            event_type: "order.created".into(),
            payload: serde_json::json!({}),
            metadata: serde_json::json!({}),
            attempts: 0,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn waves_hold_one_event_per_aggregate_in_seq_order() {
        let events = vec![
            event(1, "a"),
            event(2, "b"),
            event(3, "a"),
            event(4, "a"),
            event(5, "c"),
            event(6, "b"),
        ];
        let w: Vec<Vec<i64>> = waves(events)
            .iter()
            .map(|w| w.iter().map(|e| e.seq).collect())
            .collect();
        assert_eq!(w, vec![vec![1, 2, 5], vec![3, 6], vec![4]]);
    }

    #[test]
    fn aggregates_of_different_types_do_not_share_a_wave_slot() {
        let mut other = event(2, "a");
        other.aggregate_type = "payment".into();
        let w = waves(vec![event(1, "a"), other]);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].len(), 2);
    }
}
