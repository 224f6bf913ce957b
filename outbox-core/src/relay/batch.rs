//! One batch: claim, publish, acknowledge — all inside one transaction.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Inner;
use super::ack::record_and_commit;
use super::claim::{claim, waves};
use super::guard::{Guarded, overrun, publish_guarded};
use super::held::heads;
use super::isolate::{bisect, one_by_one};
use super::outcome::{Failure, Recorder, ascii_error};
use super::transaction::ClaimTransaction;
use crate::error::{Error, ErrorKind};
use crate::publisher::{Publisher, UNAVAILABLE_RETRY_DELAY};
use outbox_queries::queries::relay as sql;

/// What one batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchReport {
    /// Events claimed.
    pub claimed: usize,
    /// Events the publisher accepted, now marked processed.
    pub published: usize,
    /// Events that failed and will be retried after a backoff.
    pub retried: usize,
    /// Events dead-lettered (permanent failure or attempts used up).
    pub dead_lettered: usize,
    /// Events whose destination was [unavailable](crate::PublishOutcome::Unavailable): put back for a
    /// short delay without an attempt counted.
    pub deferred: usize,
    /// Of the deferred events, those the publisher is still preparing
    /// ([`FailureKind::InProgress`](crate::FailureKind::InProgress): an upload of its payload
    /// going on), put back for the delay it named. No outage.
    pub in_progress: usize,
    /// Events released without an attempt counted: they followed a failed event of their aggregate,
    /// or the publisher failed as a whole. They are claimed again later.
    pub released: usize,
    /// Whether the claim was capped — by the batch size (lower after large rows), the byte budget
    /// or its share of hot aggregates' heads — so that more is likely waiting.
    pub full: bool,
}

/// Claims a batch, publishes it and records the outcome in the claiming transaction.
///
/// Returns `Err` when the database failed (the transaction rolls back: every claim is released and
/// nothing is marked), or when the publisher failed as a whole (what was published before is still
/// recorded and committed; the rest is released). A publisher that panicked is not an error of the
/// batch: the wave is published again one event at a time, the events it panics on are charged an
/// attempt like any failure (reason `panic`), and the batch is committed.
/// One batch. With `stop`, once it is cancelled no further wave is started: what was published
/// is marked and committed at once, the rest released (no attempt counted).
///
/// `room`: the most events the publisher has room for ([`Publisher::room`]); the claim takes no
/// more (at least one).
pub(crate) async fn run_batch<P: Publisher>(
    inner: &Inner<P>,
    stop: Option<&CancellationToken>,
    room: Option<usize>,
) -> Ran {
    let started = Instant::now();
    let result = claim_publish_ack(inner, stop, room).await;
    // Decided once, here, for the metric and for the worker's wait.
    let held = inner.pool.status().size;
    let slot_wait = match &result {
        Err(e) if super::slots::fewer_than_workers(e, held) => Some(held),
        _ => None,
    };
    if let Some(m) = &inner.metrics {
        match &result {
            Ok(report) if report.claimed > 0 => m.batch(started.elapsed().as_secs_f64()),
            Ok(_) => {}
            // A worker waiting for a connection slot while others work (`slots.rs`).
            Err(_) if slot_wait.is_some() => {}
            Err(_) => m.relay_error(),
        }
    }
    Ran { result, slot_wait }
}

/// A batch's result, and what its failure means for the worker that ran it.
#[derive(Debug)]
pub(crate) struct Ran {
    /// What [`run_batch`] did.
    pub(crate) result: Result<BatchReport, Error>,
    /// `Some(connections the relay's pool holds)` when the batch failed only because the database
    /// refused its worker a connection while the others hold theirs
    /// ([`fewer_than_workers`](super::slots::fewer_than_workers)): the worker waits for a slot, no
    /// failure counted.
    pub(crate) slot_wait: Option<usize>,
}

/// The server-side limits of the claim transaction, from the publish timeout: no statement and no
/// lock wait may outlast it, and a relay that stops talking (partitioned, frozen) has its session
/// ended by the server, releasing its row locks, soon after the batch's deadline.
fn session_limits(publish_timeout: std::time::Duration) -> String {
    let ms = publish_timeout.as_millis();
    let idle = ms.saturating_add(super::config::CLAIM_IDLE_MARGIN.as_millis());
    format!(
        "SET LOCAL statement_timeout = {ms}; SET LOCAL lock_timeout = {ms}; \
         SET LOCAL idle_in_transaction_session_timeout = {idle}"
    )
}

async fn claim_publish_ack<P: Publisher>(
    inner: &Inner<P>,
    stop: Option<&CancellationToken>,
    room: Option<usize>,
) -> Result<BatchReport, Error> {
    // No wait on the database outlasts the point where PostgreSQL itself ends a silent claim
    // transaction (`idle_in_transaction_session_timeout`), whatever the pool's own settings.
    let bound = inner
        .config
        .publish_timeout
        .saturating_add(super::config::CLAIM_IDLE_MARGIN);
    let mut tx = ClaimTransaction::connect(&inner.pool, &inner.pool_sessions, bound).await?;
    let result = in_transaction(inner, &mut tx, stop, room).await;
    if result.is_err() {
        // Still open when the claim or the acknowledgement failed: rolled back here, or (when that
        // fails too, or the connection stalled) the connection is closed as `tx` drops.
        tx.roll_back().await;
    }
    result
}

async fn in_transaction<P: Publisher>(
    inner: &Inner<P>,
    tx: &mut ClaimTransaction,
    stop: Option<&CancellationToken>,
    room: Option<usize>,
) -> Result<BatchReport, Error> {
    let ordered = inner.config.per_aggregate_order;
    let batch_size = room.map_or(inner.config.batch_size, |room| {
        inner.config.batch_size.min(room.max(1))
    });
    let publish_timeout = inner.config.publish_timeout;
    // `BEGIN` and the limits go out ahead of the claim, pipelined on the connection: the claim
    // costs one round trip at light load.
    let limits = session_limits(publish_timeout);
    let (events, capped) = tx
        .begin_with(&limits, async |client| {
            claim(
                client,
                batch_size,
                ordered,
                inner.config.batch_max_bytes,
                inner.config.concurrency,
                &inner.claims,
            )
            .await
        })
        .await?;
    if capped {
        // A full claim (by rows, bytes or its share of hot heads): more is likely waiting. One
        // more idle worker joins in (it wakes another if its claim is capped too), while this one
        // publishes.
        inner.wake.notify_one();
    }
    // The heads this batch holds, listed for the relay's other claims until the batch ends.
    let _held = ordered.then(|| inner.claims.held.hold(heads(&events)));
    let mut report = BatchReport {
        claimed: events.len(),
        full: capped,
        ..BatchReport::default()
    };
    if events.is_empty() {
        tx.commit().await?;
        tracing::trace!("claimed nothing");
        return Ok(report);
    }
    // The claim transaction never stays open longer than the publish timeout (bounded by
    // `RelayConfig::validate`, so this cannot overflow; a far deadline would do if it did).
    let now = Instant::now();
    let deadline = now
        .checked_add(publish_timeout)
        .unwrap_or_else(|| now + super::config::MAX_TIMEOUT);
    // With per-aggregate order, one wave per position in the aggregates, unless the publisher keeps
    // the order of an aggregate's events within one call itself.
    let waves = if ordered && !inner.publisher.keeps_aggregate_order() {
        waves(events)
    } else {
        vec![events]
    };

    let grace = inner.config.shutdown_grace;
    let mut rec = Recorder::new(inner, ordered);
    let mut whole_failure: Option<Error> = None;
    let mut out_of_time = false;
    let mut stopping = false;

    for mut wave in waves {
        if whole_failure.is_some() {
            report.released += wave.len();
            continue;
        }
        if Instant::now() >= deadline {
            // Out of time: what was published is kept (marked below); the rest waits for the
            // next claim, without an attempt counted.
            if !out_of_time {
                tracing::warn!(
                    timeout_ms = publish_timeout.as_millis() as u64,
                    "the publish timeout passed mid-batch; releasing the events not yet published"
                );
                out_of_time = true;
            }
            report.released += wave.len();
            continue;
        }
        if stop.is_some_and(CancellationToken::is_cancelled) {
            // Shutting down: no new wave. What was published is marked now (not rolled back when
            // the grace period ends, and sent again), the rest waits for the next relay.
            if !stopping {
                tracing::info!(
                    "shutting down: releasing the waves of this batch not yet published"
                );
                stopping = true;
            }
            report.released += wave.len();
            continue;
        }
        // An aggregate whose earlier event failed in this batch waits: its later events are released.
        let before = wave.len();
        wave.retain(|e| !rec.is_blocked(e));
        report.released += before - wave.len();
        if wave.is_empty() {
            continue;
        }
        let publish = publish_guarded(&inner.publisher, &wave, deadline, overrun(publish_timeout));
        let Some(guarded) = cut_at_shutdown(publish, stop, grace).await else {
            // Shutting down, and this call would have outlasted the grace period: it is dropped
            // (its events are released and may be sent again) so that what the earlier waves
            // published is still marked before the grace period ends, not rolled back with it.
            tracing::warn!(
                events = wave.len(),
                "shutting down: the publish call in flight was cut short to commit the batch \
                 within the grace period; its events are released"
            );
            stopping = true;
            report.released += wave.len();
            continue;
        };
        match guarded {
            Guarded::Done(Ok(outcomes)) => rec.record_all(&wave, outcomes, &mut report),
            Guarded::Done(Err(e)) => {
                // An outage, or an event the publisher fails on every time: halves tell them
                // apart (not for a wave holding an aggregate's events in order).
                // Not at shutdown: the parts would be more calls (each cut short like the first).
                let isolated = if wave.len() > 1
                    && !(ordered && inner.publisher.keeps_aggregate_order())
                    && !stop.is_some_and(CancellationToken::is_cancelled)
                {
                    let parts = bisect(&inner.publisher, &wave, deadline, publish_timeout);
                    cut_at_shutdown(parts, stop, grace).await.flatten()
                } else {
                    None
                };
                match isolated {
                    Some(outcomes) => {
                        tracing::warn!(
                            events = wave.len(), error = %crate::error_chain(&e),
                            "the publisher failed as a whole, but not on every part of the wave; \
                             published it in parts"
                        );
                        rec.record_all(&wave, outcomes, &mut report);
                    }
                    None => {
                        report.released += wave.len();
                        whole_failure = Some(
                            Error::new(ErrorKind::Publish, "the publisher failed").with_source(e),
                        );
                    }
                }
            }
            Guarded::TimedOut => {
                report.released += wave.len();
                whole_failure = Some(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "publishing did not finish within {publish_timeout:?} (+ {:?})",
                        overrun(publish_timeout)
                    ),
                ));
            }
            Guarded::Panicked(message) => {
                // Find the event(s) it panics on: the wave again, one event at a time.
                tracing::error!(
                    events = wave.len(), panic = %message,
                    "the publisher panicked; publishing this wave one event at a time"
                );
                let singles =
                    one_by_one(&inner.publisher, &wave, ordered, deadline, publish_timeout);
                let singles = match stop.is_some_and(CancellationToken::is_cancelled) {
                    // At shutdown: not one call per event; the wave waits for the next relay.
                    true => None,
                    false => cut_at_shutdown(singles, stop, grace).await,
                };
                match singles {
                    Some(outcomes) => rec.record_all(&wave, outcomes, &mut report),
                    None => {
                        stopping = true;
                        report.released += wave.len();
                    }
                }
            }
        }
    }

    let (published, mut failures, tallies) = rec.finish();
    storable(inner, tx, &mut failures).await?;
    record_and_commit(tx, &published, &failures, inner.config.deletes_on_ack()).await?;
    // Committed: claim them again when they are due, not at the next poll of an idle relay.
    for f in failures.iter().filter(|f| !f.dead) {
        if let Ok(delay) = Duration::try_from_secs_f64(f.delay_secs) {
            inner.due.schedule(delay);
        }
    }
    tallies.count(inner.metrics.as_ref());
    report.published = published.len();
    // Put back for an unavailable destination: not those the publisher is still preparing (an
    // upload running on), which it sends at their next claim.
    let put_back = failures.iter().filter(|f| f.outage).count();
    if put_back > 0 {
        // Not per event, nor per batch: a broken destination (or S3) holds back thousands of
        // events, claimed again every few seconds (see `outage.rs`).
        // The line names one reason (the last event put back): "destination unavailable" alone
        // did not say which, nor that an S3 upload's first slow-link time-out is not counted.
        let reason = failures
            .iter()
            .rev()
            .find(|f| f.outage)
            .map_or("", |f| f.error.as_str());
        inner
            .outage
            .deferred(put_back, UNAVAILABLE_RETRY_DELAY, reason);
    }
    match whole_failure {
        // The publisher's failure (kind `Publish`, or `Timeout` for a publish over its time
        // limit): its end is a batch that publishes (see `outage.rs`).
        Some(e) => Err(e.publishers()),
        None => Ok(report),
    }
}

/// `publish`, unless `stop` is cancelled while it runs and three quarters of `grace` pass after
/// that: then `None`, leaving the rest of the grace period to commit what was published before.
async fn cut_at_shutdown<T>(
    publish: impl std::future::Future<Output = T>,
    stop: Option<&CancellationToken>,
    grace: std::time::Duration,
) -> Option<T> {
    let Some(stop) = stop else {
        return Some(publish.await);
    };
    tokio::select! {
        biased;
        done = publish => Some(done),
        () = async {
            stop.cancelled().await;
            tokio::time::sleep(grace.mul_f64(0.75)).await;
        } => None,
    }
}

/// Writes the failures' error texts in ASCII when the database's encoding lacks characters they
/// hold (LATIN1, …): one such character would fail the statement that records them, roll the batch
/// back, and the same failure would repeat for ever. The encoding is read once per relay, with the
/// first failure to record.
async fn storable<P: Publisher>(
    inner: &Inner<P>,
    tx: &mut ClaimTransaction,
    failures: &mut [Failure],
) -> Result<(), Error> {
    if failures.iter().all(|f| f.error.is_ascii()) {
        return Ok(());
    }
    let any_text = match inner.any_text.get() {
        Some(&any) => any,
        None => {
            let any = tx
                .run(async |client| {
                    Ok(sql::server_takes_any_text()
                        .prepare(client)
                        .await?
                        .bind(client)
                        .one()
                        .await?)
                })
                .await?;
            let _ = inner.any_text.set(any);
            any
        }
    };
    if !any_text {
        for f in failures {
            f.error = ascii_error(&f.error);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_limits_derive_from_the_publish_timeout() {
        let s = session_limits(std::time::Duration::from_millis(2_500));
        assert!(s.contains("statement_timeout = 2500;"), "{s}");
        assert!(s.contains("lock_timeout = 2500;"), "{s}");
        let idle = 2_500 + super::super::config::CLAIM_IDLE_MARGIN.as_millis();
        assert!(
            s.ends_with(&format!("idle_in_transaction_session_timeout = {idle}")),
            "{s}"
        );
    }
}
