//! The relay's gauges: refreshed from one light query on an interval.

use std::time::Duration;

use outbox_queries::queries::admin as admin_sql;
use tokio_util::sync::CancellationToken;

use super::in_use::InUse;
use super::{Relay, outage};
use crate::error::Error;
use crate::metrics::RelayMetrics;
use crate::publisher::Publisher;
use crate::stats;

/// How long one refresh of the metrics' gauges may take.
const GAUGE_REFRESH_TIMEOUT: Duration = Duration::from_secs(10);

impl<P: Publisher> Relay<P> {
    /// Refreshes the metrics' gauges from one cheap query on an interval. Shutdown does not wait
    /// for a refresh in progress (a pool at its limit, a slow database).
    pub(super) async fn refresh_gauges(self, metrics: RelayMetrics, shutdown: CancellationToken) {
        let (mut failures, mut warned) = (0u64, None);
        loop {
            // Bounded: a refresh stuck behind a lock or on a huge backlog must not hold a
            // connection (and freeze the gauges) for ever; `outbox_gauges_refreshed_timestamp_
            // seconds` shows the gap. The server cancels the query (a timeout here alone would
            // put the connection back in the pool with the query still running on it); the
            // timeout here covers the network on top.
            let refresh = tokio::time::timeout(GAUGE_REFRESH_TIMEOUT * 2, async {
                // Cut by the time-out, the connection is discarded (its statement unanswered)
                // rather than put back for a claim to stall on (black-box run: its session was
                // left behind a stall, with nothing to end it).
                let (pool, known) = (&self.inner.pool, &*self.inner.pool_sessions);
                let mut client = InUse::get(pool, known, GAUGE_REFRESH_TIMEOUT * 2).await?;
                let refreshed = async {
                    let tx = client.transaction().await?;
                    let millis = GAUGE_REFRESH_TIMEOUT.as_millis().to_string();
                    admin_sql::limit_transaction_statements()
                        .bind(&tx, &millis)
                        .one()
                        .await?;
                    let s = stats::gauges(&tx).await?;
                    // The database's clock against this host's, at the middle of the round trip: a
                    // short one only (a slow answer says little about the offset).
                    let before = chrono::Utc::now();
                    let db_now = admin_sql::database_clock().bind(&tx).one().await?;
                    let after = chrono::Utc::now();
                    let ahead = (after - before < chrono::TimeDelta::seconds(1))
                        .then(|| (db_now - (before + (after - before) / 2)).as_seconds_f64());
                    tx.commit().await?;
                    Ok::<_, Error>((s, ahead))
                }
                .await;
                client.done();
                refreshed
            });
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = refresh => match r {
                    Ok(Ok((s, ahead))) => {
                        if failures > 0 {
                            tracing::info!(failures, "the outbox gauges refresh again");
                            failures = 0;
                        }
                        metrics.refresh(&s);
                        if let Some(ahead) = ahead {
                            metrics.database_clock(ahead);
                        }
                    }
                    Ok(Err(e)) => {
                        failures += 1;
                        if outage::warn_now(failures == 1, &mut warned) {
                            tracing::warn!(error = %crate::error_chain(&e), failures,
                                "could not refresh the outbox gauges (this is logged once a \
                                 minute while it goes on)");
                        }
                    }
                    Err(_) => {
                        failures += 1;
                        if outage::warn_now(failures == 1, &mut warned) {
                            tracing::warn!(
                                timeout_ms = (GAUGE_REFRESH_TIMEOUT * 2).as_millis() as u64,
                                failures,
                                "could not refresh the outbox gauges in time (this is logged \
                                 once a minute while it goes on)"
                            );
                        }
                    }
                },
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(self.inner.config.metrics_interval) => {}
            }
        }
    }
}
