//! Partition maintenance: partitions created ahead, the safety net drained, expired partitions
//! detached and dropped — once, whichever relay or cron job gets there first.

use std::time::Duration;

use outbox_queries::queries::partition as sql;

use super::{ddl, retire};
use crate::error::{Error, ErrorKind};

/// The advisory lock key (`pg_try_advisory_lock`, session level) that elects the one maintainer
/// among relays and `outbox partitions maintain` ("outpart" in ASCII).
pub const MAINTENANCE_LOCK_KEY: i64 = 0x006f_7574_7061_7274;

/// How long draining the tail may wait for its `ACCESS EXCLUSIVE` lock before it gives up until
/// the next run (default of [`MaintainOptions::drain_lock_timeout`]).
pub const DEFAULT_DRAIN_LOCK_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one maintenance run waits for the transactions that began before an expired
/// partition's end to finish before it leaves that partition for a later run (default of
/// [`MaintainOptions::settle_timeout`]).
pub const DEFAULT_SETTLE_TIMEOUT: Duration = Duration::from_secs(2);

/// What [`maintain`] should do.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MaintainOptions {
    /// Retire partitions whose whole range is older than this and whose rows were all published
    /// longer ago than this (`None`: create ahead only, never drop); at most
    /// [`MAX_RETENTION`](crate::MAX_RETENTION), as the relay's.
    pub retention: Option<Duration>,
    /// `lock_timeout` of the tail's drain (the one blocking step; see the README).
    pub drain_lock_timeout: Duration,
    /// How long retirement waits for the transactions that began before an expired partition's
    /// end (they may still write into it) to finish; partitions still waiting then are left for
    /// the next run and listed in [`MaintenanceReport::waiting`]. Nothing is locked meanwhile.
    /// Also how long making partitions ahead waits for the transactions holding the table to end
    /// before it detaches the tail (otherwise it leaves that for the next run).
    pub settle_timeout: Duration,
}

impl Default for MaintainOptions {
    fn default() -> Self {
        MaintainOptions {
            retention: None,
            drain_lock_timeout: DEFAULT_DRAIN_LOCK_TIMEOUT,
            settle_timeout: DEFAULT_SETTLE_TIMEOUT,
        }
    }
}

impl MaintainOptions {
    /// Create ahead only; no retention.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`retention`](Self::retention).
    pub fn retention(mut self, retention: Option<Duration>) -> Self {
        self.retention = retention;
        self
    }

    /// Sets [`drain_lock_timeout`](Self::drain_lock_timeout).
    pub fn drain_lock_timeout(mut self, timeout: Duration) -> Self {
        self.drain_lock_timeout = timeout;
        self
    }

    /// A `drain_lock_timeout` under 1 ms would reach PostgreSQL as `lock_timeout = 0`: no limit at
    /// all, the drain queueing every writer behind it for as long as a transaction holds the table.
    fn validate(&self) -> Result<(), Error> {
        if self.drain_lock_timeout < Duration::from_millis(1) {
            return Err(Error::new(
                ErrorKind::Config,
                "drain_lock_timeout must be at least 1 ms (PostgreSQL reads a lock_timeout of 0 as no limit)",
            ));
        }
        if let Some(retention) = self.retention.filter(|r| *r > crate::MAX_RETENTION) {
            return Err(Error::config(format!(
                "retention must be at most {} days, got {retention:?}",
                crate::MAX_RETENTION.as_secs() / 86_400
            )));
        }
        Ok(())
    }

    /// Sets [`settle_timeout`](Self::settle_timeout).
    pub fn settle_timeout(mut self, timeout: Duration) -> Self {
        self.settle_timeout = timeout;
        self
    }
}

/// A partition past the retention that maintenance did not drop.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct KeptPartition {
    /// Its name.
    pub name: String,
    /// Its pending events and dead letters (and events published more recently than the
    /// retention) that keep it.
    pub leftovers: i64,
    /// Of those, the pending events and dead letters: the ones that keep it past the retention
    /// for as long as they stay (the others go once they are older than the retention).
    pub unpublished: i64,
}

/// What one [`maintain`] call did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct MaintenanceReport {
    /// Another maintainer held the lock: this call did nothing.
    pub skipped: bool,
    /// Partitions created ahead.
    pub created: u32,
    /// Events moved out of the tail partition (the safety net) into their own partitions.
    pub drained: i64,
    /// Partitions detached and dropped.
    pub dropped: Vec<String>,
    /// Partitions past the retention kept for their leftovers.
    pub kept: Vec<KeptPartition>,
    /// Partitions past the retention left for a later run because a transaction that began
    /// before their end was still open: it may still write an event into them.
    pub waiting: Vec<String>,
    /// Whether `outbox_events_legacy` (left by a conversion) was dropped.
    pub legacy_dropped: bool,
    /// Set when the partitions are too many for the server's lock table (also logged as a
    /// warning): see [`CONCURRENT_CLAIMS`](super::CONCURRENT_CLAIMS).
    pub lock_warning: Option<String>,
}

/// Maintains the partitioned layout on `client` (a connection of its own: the election lock is a
/// session lock, released before returning — and with the connection, should this future be
/// dropped half-way):
///
/// 1. **Ahead**: keeps partitions ready up to [`Granularity::default_ahead`](super::Granularity)
///    (or the `ahead` given at conversion) periods beyond the current one. The tail partition is
///    detached with `DETACH … CONCURRENTLY` while no row can reach it, the new partitions are
///    created and attached (`ATTACH` takes SHARE UPDATE EXCLUSIVE: writers and relays go on), and
///    a fresh tail is attached after them.
/// 2. **Safety net**: when rows reached the tail (maintenance did not run for that long), they are
///    moved into proper partitions in one transaction under `ACCESS EXCLUSIVE`, bounded by
///    [`drain_lock_timeout`](MaintainOptions::drain_lock_timeout) — the only step that makes
///    writers wait.
/// 3. **Retention** (with [`retention`](MaintainOptions::retention)): each partition whose range
///    ended more than the retention ago and whose rows were all published more than the retention
///    ago is detached concurrently, checked again, and dropped. One holding a pending event or a
///    dead letter is kept (and reported, and counted in [`partition_stats`](super::partition_stats)).
///    An event's `created_at` is its transaction's start, so a transaction that began before a
///    partition's end can still write into it: retirement first waits (up to
///    [`settle_timeout`](MaintainOptions::settle_timeout)) until every transaction of the
///    database that began before the partition's end has finished, and otherwise leaves the
///    partition for a later run ([`waiting`](MaintenanceReport::waiting)).
///    The conversion's `outbox_events_legacy` is dropped under the same rule.
///
/// Retention runs before the other two steps: it finishes a retirement that was interrupted
/// mid-detach, which would otherwise keep the tail from being detached.
///
/// Only one maintainer works at a time (advisory lock [`MAINTENANCE_LOCK_KEY`]); the others
/// return at once with [`skipped`](MaintenanceReport::skipped). On the plain layout, and with a
/// `drain_lock_timeout` under 1 ms, this is an [`ErrorKind::Config`] error. DDL needs the table's
/// owner: run it as the role that migrated (or a member of it). Any other role gets an
/// [`ErrorKind::Config`] error saying so, even on a run that would have had nothing to do — a
/// scheduled run under the wrong role must not look healthy until the day it has to create a
/// partition. Partitions belong to the table's owner (migration V9); one of another owner is
/// given to it first where this role may (a superuser, a member of both), and otherwise the run
/// is refused the same way, naming them, before anything changes.
pub async fn maintain(
    client: &tokio_postgres::Client,
    options: &MaintainOptions,
) -> Result<MaintenanceReport, Error> {
    options.validate()?;
    if let Some(refusal) = refusal(client).await? {
        return Err(Error::config(refusal));
    }
    let locked = sql::try_maintenance_lock()
        .bind(client, &MAINTENANCE_LOCK_KEY)
        .one()
        .await?;
    if !locked {
        return Ok(MaintenanceReport {
            skipped: true,
            ..MaintenanceReport::default()
        });
    }
    let result = run(client, options).await;
    let unlocked = sql::maintenance_unlock()
        .bind(client, &MAINTENANCE_LOCK_KEY)
        .one()
        .await;
    let report = result?;
    unlocked?;
    Ok(report)
}

/// Why the current role may not maintain the partitions (it neither owns `outbox_events` nor is a
/// member of its owner), or `None` when it may.
pub(crate) async fn refusal(client: &tokio_postgres::Client) -> Result<Option<String>, Error> {
    let r = sql::maintainer_role().bind(client).one().await?;
    Ok((!r.may).then(|| {
        format!(
            "role {} may not maintain partitions: their DDL needs the owner of outbox_events, {}; \
             run it as {} (or a member of it that inherits its privileges)",
            r.role, r.owner, r.owner
        )
    }))
}

/// Why maintenance does not start while partitions belong to roles this one cannot act for.
fn foreign_refusal(foreign: &[String]) -> String {
    format!(
        "partitions of outbox_events belong to another role than the table's owner, and this role \
         may not give them to it: {}; run `outbox partitions maintain` once as a superuser (or as \
         a member of both roles), which gives them to the owner",
        foreign.join(", ")
    )
}

async fn run(
    client: &tokio_postgres::Client,
    options: &MaintainOptions,
) -> Result<MaintenanceReport, Error> {
    // Partitions of another owner (made before migration V9 by another maintainer): this role
    // could not detach, drain or drop them — a tail it cannot read stayed detached. Given to the
    // table's owner where this role may; refused before anything changes otherwise.
    let foreign = sql::reown_partitions().bind(client).one().await?;
    if !foreign.is_empty() {
        return Err(Error::config(foreign_refusal(&foreign)));
    }
    let mut report = MaintenanceReport::default();
    // Retirement first: it finishes an interrupted retirement's `DETACH … CONCURRENTLY`, and while
    // one is pending PostgreSQL refuses to detach the tail concurrently — `ahead` failed on it,
    // every run, and never got to the retirement that would have finished it. Partitions are made
    // ahead whether retirement succeeded or not (a view on the legacy table can make its drop fail
    // on every run): writers need them; retirement can wait.
    let retired = match options.retention {
        Some(retention) => {
            retire::retire(client, retention, options.settle_timeout, &mut report).await
        }
        None => Ok(()),
    };
    ahead(client, options, &mut report).await?;
    stamp(client).await?;
    retired?;
    report.lock_warning = super::lock_budget::check(client).await?;
    if let Some(warning) = &report.lock_warning {
        tracing::warn!("partition maintenance: {warning}");
    }
    Ok(report)
}

/// Notes when this run made the partitions ahead, for `stats`. Bookkeeping that does not fail the
/// run for a role that may maintain the table but not write `outbox_partitioning` (a member of a
/// new owner of `outbox_events`, the settings table left to the role that migrated).
async fn stamp(client: &tokio_postgres::Client) -> Result<(), Error> {
    match sql::partitions_maintained().bind(client).await {
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) => {
            tracing::debug!("partition maintenance: outbox_partitioning not stamped: {e}");
            Ok(())
        }
        done => done.map(|_| ()).map_err(Error::from),
    }
}

/// Step 1 and 2: partitions ahead, the tail drained.
async fn ahead(
    client: &tokio_postgres::Client,
    options: &MaintainOptions,
    report: &mut MaintenanceReport,
) -> Result<(), Error> {
    let tail = sql::partitions_tail().bind(client).one().await?;
    let (Some(_), Some(wanted)) = (tail.granularity, tail.wanted) else {
        return Err(Error::new(
            ErrorKind::Config,
            "outbox_events is not partitioned: run `outbox migrate --partitioned` first",
        ));
    };
    match tail.tail_lo {
        // A carve was interrupted: the tail is detached (or its detach pending). Finish it.
        None => {
            if tail.tail_detach_pending == Some(true) {
                ddl::finalize_detach(client, TAIL).await?;
            }
            carve(client, wanted, options, report).await
        }
        // Rows reached the safety net: move them into partitions of their own.
        Some(_) if tail.tail_rows == Some(true) => drain(client, wanted, options, report).await,
        Some(lo) if lo >= wanted => Ok(()),
        Some(_) if tail.carve_safe == Some(true) => {
            if !lockers_end(client, options.settle_timeout).await? {
                // Rows keep going into the attached tail; the next run tries again (and should
                // maintenance not get through for `ahead` periods, the drain moves them).
                tracing::info!(
                    "partition maintenance left the tail for the next run: a transaction has held \
                     outbox_events longer than the settle timeout (a long report, pg_dump)"
                );
                return Ok(());
            }
            ddl::detach_concurrently(client, TAIL).await?;
            carve(client, wanted, options, report).await
        }
        Some(_) => drain(client, wanted, options, report).await,
    }
}

const TAIL: &str = "outbox_events_p_tail";

async fn carve(
    client: &tokio_postgres::Client,
    wanted: chrono::DateTime<chrono::Utc>,
    options: &MaintainOptions,
    report: &mut MaintenanceReport,
) -> Result<(), Error> {
    let created = sql::partitions_carve().bind(client, &wanted).one().await?;
    if created < 0 {
        // Rows reached the tail while it was being detached: it is attached back; drain it.
        return drain(client, wanted, options, report).await;
    }
    report.created += created.unsigned_abs();
    if created > 0 {
        tracing::info!(created, "partition maintenance created partitions ahead");
    }
    Ok(())
}

async fn drain(
    client: &tokio_postgres::Client,
    wanted: chrono::DateTime<chrono::Utc>,
    options: &MaintainOptions,
    report: &mut MaintenanceReport,
) -> Result<(), Error> {
    let lock_timeout_ms = i32::try_from(options.drain_lock_timeout.as_millis()).unwrap_or(i32::MAX);
    let before = partition_count(client).await?;
    let moved = sql::partitions_drain_tail()
        .bind(client, &wanted, &lock_timeout_ms)
        .one()
        .await
        .map_err(|e| {
            let timed_out = e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE);
            let e = Error::from(e);
            if timed_out {
                e.context(format!(
                    "draining the tail partition waited {:?} (the drain lock timeout) for its \
                     lock behind another transaction (pg_dump, a long report); nothing was \
                     moved, the next run tries again",
                    options.drain_lock_timeout
                ))
            } else {
                e
            }
        })?;
    let after = partition_count(client).await?;
    // The drain takes every row of the tail out and puts back those dated past the partitions
    // made ahead: they did not move (counted as moved, they made a run that moved one row of two
    // say "moved 2").
    let put_back = sql::partitions_tail_rows().bind(client).one().await?;
    let moved = moved.saturating_sub(put_back).max(0);
    report.drained += moved;
    report.created += u32::try_from(after.saturating_sub(before)).unwrap_or(u32::MAX);
    tracing::warn!(
        moved,
        "partition maintenance drained the tail partition (maintenance had not run for longer \
         than the partitions created ahead, or rows were written with a later created_at)"
    );
    Ok(())
}

/// Whether every transaction now holding `outbox_events` (or a partition) ends within `wait`.
/// `DETACH … CONCURRENTLY` of the tail waits for all of them, and the tail takes no row while it
/// waits: a transaction that holds the table for hours (pg_dump) would have made every writer of
/// a row at or after the tail's start fail, once time got there.
pub(super) async fn lockers_end(
    client: &tokio_postgres::Client,
    wait: Duration,
) -> Result<bool, Error> {
    let seen = sql::table_lockers().bind(client).one().await?;
    let deadline = tokio::time::Instant::now().checked_add(wait);
    loop {
        let now = sql::table_lockers().bind(client).one().await?;
        if !seen.iter().any(|t| now.contains(t)) {
            return Ok(true);
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            return Ok(false);
        }
        tokio::time::sleep(LOCKERS_POLL).await;
    }
}

/// How often [`lockers_end`] looks again.
const LOCKERS_POLL: Duration = Duration::from_millis(5);

async fn partition_count(client: &tokio_postgres::Client) -> Result<usize, Error> {
    Ok(sql::partition_list().bind(client).all().await?.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_lock_timeout_under_a_millisecond_is_refused_not_unlimited() {
        let zero = MaintainOptions::new().drain_lock_timeout(Duration::from_micros(999));
        let e = zero.validate().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        assert!(e.to_string().contains("drain_lock_timeout"), "{e}");
        MaintainOptions::new()
            .drain_lock_timeout(Duration::from_millis(1))
            .validate()
            .unwrap();
    }
}
