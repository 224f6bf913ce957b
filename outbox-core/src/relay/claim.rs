//! Claiming: which events one batch takes, and the waves it publishes them in.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use outbox_queries::queries::relay as sql;

use super::held::Held;
use crate::claimed_event::HeadWindow;
use crate::error::Error;
use crate::publisher::ClaimedEvent;

/// Splits events (in `seq` order) into waves: wave `k` holds the `k`-th event of every aggregate, so
/// a wave never holds two events of one aggregate and waves run in order.
pub(crate) fn waves(events: Vec<ClaimedEvent>) -> Vec<Vec<ClaimedEvent>> {
    // Each event's wave, keyed by borrowed aggregate names (no copy per event).
    let mut seen: HashMap<(&str, &str), usize> = HashMap::with_capacity(events.len());
    let depths: Vec<usize> = events
        .iter()
        .map(|e| {
            let d = seen
                .entry((e.aggregate_type.as_str(), e.aggregate_id.as_str()))
                .or_insert(0);
            *d += 1;
            *d - 1
        })
        .collect();
    drop(seen);
    let mut waves: Vec<Vec<ClaimedEvent>> = Vec::new();
    for (event, d) in events.into_iter().zip(depths) {
        while waves.len() <= d {
            waves.push(Vec::new());
        }
        waves[d].push(event);
    }
    waves
}

/// How many of the oldest pending events the fast head search looks at, per event of the batch.
const HEAD_WINDOW_PER_EVENT: usize = 10;
/// The fast head search looks at no fewer pending events than this.
const MIN_HEAD_WINDOW: usize = 1_000;

/// The relay's running estimate of the payload size of a claimed row, so that the row limit of a
/// claim follows the byte budget: the database then locks (and converts to text) about as many rows
/// as the budget lets through, not `batch_size` large rows of which most are trimmed.
#[derive(Debug, Default)]
pub(crate) struct RowSize(AtomicUsize);

impl RowSize {
    /// The row limit for a claim: `batch_size`, or fewer when recent rows were large (twice the
    /// rows the budget holds at the recent size, so the budget, not the limit, trims).
    fn limit(&self, batch_size: usize, max_bytes: usize) -> usize {
        match self.0.load(Ordering::Relaxed) {
            0 => batch_size,
            avg => (max_bytes / avg).saturating_mul(2).clamp(1, batch_size),
        }
    }

    fn observe(&self, events: &[ClaimedEvent]) {
        if let Some(avg) = bytes(events).checked_div(events.len()) {
            self.0.store(avg.max(1), Ordering::Relaxed);
        }
    }
}

/// How often, at most, a relay's claims look beyond the head window while the window's heads are
/// shared out among its workers (a few aggregates carry a backlog that fills the window). The
/// look walks the aggregate index for the quiet aggregates behind that backlog; doing it on
/// every claim cost a sixth of the ordered throughput with 10 hot aggregates (benchmark 6), while
/// each look claims up to a batch of them.
const BEYOND_WINDOW_EVERY: Duration = Duration::from_millis(100);

/// Paces the look beyond the head window (see [`BEYOND_WINDOW_EVERY`]) across a relay's workers.
#[derive(Debug)]
pub(crate) struct BeyondWindow {
    started: Instant,
    /// Milliseconds after `started` of the last look; `u64::MAX` before the first.
    last_ms: AtomicU64,
}

impl Default for BeyondWindow {
    fn default() -> Self {
        BeyondWindow {
            started: Instant::now(),
            last_ms: AtomicU64::new(u64::MAX),
        }
    }
}

impl BeyondWindow {
    /// Whether this claim takes the next look (at most one per interval across the workers).
    fn due(&self) -> bool {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        let last = self.last_ms.load(Ordering::Relaxed);
        let every = u64::try_from(BEYOND_WINDOW_EVERY.as_millis()).unwrap_or(u64::MAX);
        if last != u64::MAX && now.saturating_sub(last) < every {
            return false;
        }
        self.last_ms
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// What a relay's claims share.
#[derive(Debug, Default)]
pub(crate) struct ClaimState {
    /// The running estimate of a claimed row's payload size.
    row_size: RowSize,
    /// Paces claims' looks beyond the head window while its heads are shared out.
    beyond_window: BeyondWindow,
    /// The heads the relay's in-flight batches hold (per-aggregate order).
    pub(crate) held: Held,
    /// Claims so far: a claim's slot among the workers (where its head search starts).
    claims: AtomicUsize,
    /// Claims so far that found events: whether the relay's workers are busy with work, or only
    /// looking (`waiting.rs`).
    pub(crate) found: FoundWork,
}

/// How many of a relay's claims found events, shared with the task advertising waiting: a slow
/// claim that finds nothing is no work (see `waiting.rs`).
#[derive(Debug, Default, Clone)]
pub(crate) struct FoundWork(Arc<AtomicU64>);

impl FoundWork {
    /// Claims that found events so far.
    pub(crate) fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts a claim that found events.
    pub(crate) fn found(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the head search's window says about the claim's other look-ups, from the heads it returned:
/// whether the window held every pending event (then nothing lies beyond it: no slow path), and
/// whether any head may have followers. A window that is not full holds its heads' whole
/// aggregates, so a head alone in it of its aggregate has none. At light load a claim is then one
/// statement instead of three. (Events committed since the search are for the next claim.)
fn look_ups<'a>(heads: impl IntoIterator<Item = &'a HeadWindow>, window: i64) -> (bool, bool) {
    let mut heads = heads.into_iter().peekable();
    let whole = heads.peek().is_some_and(|w| w.rows < window);
    let followed = !whole || heads.any(|w| w.in_window > 1);
    (whole, followed)
}

/// The payload bytes of `events`.
fn bytes(events: &[ClaimedEvent]) -> usize {
    events.iter().map(|e| e.payload().len()).sum()
}

/// Claims the next events: with per-aggregate order, the heads of aggregates plus the due events
/// that follow them; without, simply the oldest due events. At most `batch_size` events, and no
/// more than `max_bytes` of payload beyond the first event (a larger first event is claimed alone).
///
/// Heads are searched among the oldest pending events first (cheap when events spread over many
/// aggregates); when that finds too few and more events are pending beyond it, the search walks the
/// aggregate index instead (one probe per aggregate: cheap when a few aggregates carry a long backlog,
/// and no aggregate starves behind a blocked one).
///
/// When a few aggregates carry a backlog, one claim takes only its share of their heads (about
/// `1 / workers` of the aggregates in the window, `workers` being the relay's concurrency) and fills
/// the batch with their followers, so that concurrent claims take disjoint aggregates instead of one
/// batch holding every head while the others find nothing (see `fetch_outbox_heads`). Aggregates
/// whose events all lie beyond the window are still looked for by the slow path then, at most every
/// [`BEYOND_WINDOW_EVERY`] per relay, so that none starves behind the hot ones.
///
/// The relay's workers do not trip over each other's heads: the search leaves out the heads the
/// relay's in-flight batches hold ([`Held`]) before touching a row, and consecutive claims start at
/// different slots of the window's heads, so that a claim rarely meets a row another claim of the
/// relay has just locked (`SKIP LOCKED` still passes over those, and over other relays' heads).
///
/// Returns the events and whether the claim was capped — by its row limit (the batch size, lower
/// after large rows), its byte budget, or its share of hot heads — so that more is likely waiting.
pub(crate) async fn claim(
    tx: &deadpool_postgres::Client,
    batch_size: usize,
    ordered: bool,
    max_bytes: usize,
    workers: usize,
    state: &ClaimState,
) -> Result<(Vec<ClaimedEvent>, bool), Error> {
    let (row_size, beyond_window) = (&state.row_size, &state.beyond_window);
    let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let batch_size = row_size.limit(batch_size, max_bytes);
    let limit = as_i64(batch_size);
    let budget = as_i64(max_bytes);
    if !ordered {
        let events = sql::fetch_outbox_batch()
            .prepare(tx)
            .await?
            .bind(tx, &limit, &budget)
            .map(ClaimedEvent::from_row)
            .all()
            .await?;
        row_size.observe(&events);
        if !events.is_empty() {
            state.found.found();
        }
        let capped = capped(&events, batch_size, max_bytes);
        return Ok((events, capped));
    }
    // Room for a full batch per worker, so that hot aggregates can be shared out (see below).
    let window = as_i64(
        batch_size
            .saturating_mul(HEAD_WINDOW_PER_EVENT.max(workers))
            .max(MIN_HEAD_WINDOW),
    );
    // Consecutive claims (of different workers, mostly) start their head search at different
    // slots of the window's heads.
    let slot = as_i64(state.claims.fetch_add(1, Ordering::Relaxed) % workers.max(1));
    let heads = sql::fetch_outbox_heads()
        .prepare(tx)
        .await?
        .bind(
            tx,
            &window,
            &state.held.seqs(),
            &limit,
            &as_i64(workers.max(1)),
            &slot,
            &budget,
        )
        .map(ClaimedEvent::from_head)
        .all()
        .await?;
    // This claim's share of the window's heads (see `fetch_outbox_heads`). While heads are shared
    // out, the slow path looks only beyond the window, and only now and then (`BeyondWindow`): for
    // quiet aggregates behind a hot backlog, not for the hot heads left to other claims. No
    // restriction when the fast path found no head (every head in the window is taken, or none is
    // due: the slow path can only find others).
    let after = heads
        .first()
        .filter(|(_, w)| usize::try_from(w.share).is_ok_and(|share| share < batch_size))
        .map_or(i64::MIN, |(_, w)| w.end);
    let (whole, followed) = look_ups(heads.iter().map(|(_, w)| w), window);
    let mut events: Vec<ClaimedEvent> = heads.into_iter().map(|(event, _)| event).collect();
    // The budget left for more events (none once it is spent).
    let left = |events: &[ClaimedEvent]| max_bytes.saturating_sub(bytes(events));
    if events.len() < batch_size
        && !whole
        && left(&events) > 0
        && (after == i64::MIN || beyond_window.due())
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
            .bind(
                tx,
                &after,
                &exclude,
                &as_i64(batch_size - events.len()),
                &as_i64(left(&events)),
            )
            .map(ClaimedEvent::from_row)
            .all()
            .await?;
        events.extend(more);
    }
    let room = batch_size.saturating_sub(events.len());
    if room > 0 && followed && !events.is_empty() && left(&events) > 0 {
        let types: Vec<&str> = events.iter().map(|e| e.aggregate_type.as_str()).collect();
        let ids: Vec<&str> = events.iter().map(|e| e.aggregate_id.as_str()).collect();
        let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
        let followers = sql::fetch_outbox_followers()
            .prepare(tx)
            .await?
            .bind(
                tx,
                &types,
                &ids,
                &seqs,
                &as_i64(room),
                &as_i64(left(&events)),
            )
            .map(ClaimedEvent::from_row)
            .all()
            .await?;
        events.extend(followers);
    }
    row_size.observe(&events);
    if !events.is_empty() {
        state.found.found();
    }
    events.sort_by_key(|e| e.seq);
    // A claim that took only its share of hot heads left the rest to other claims.
    let capped = capped(&events, batch_size, max_bytes) || after != i64::MIN;
    Ok((events, capped))
}

/// Whether a claim of `events` hit its row `limit` or (within an average row) its byte budget.
fn capped(events: &[ClaimedEvent], limit: usize, max_bytes: usize) -> bool {
    let used = bytes(events);
    events.len() >= limit
        || used
            .checked_div(events.len())
            .is_some_and(|avg| used.saturating_add(avg.max(1)) > max_bytes)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A claimed event of aggregate `order`/`aggregate` (also for the relay's other unit tests).
    pub(in crate::relay) fn event(seq: i64, aggregate: &str) -> ClaimedEvent {
        ClaimedEvent::for_test(
            uuid::Uuid::new_v4(),
            seq,
            "order",
            aggregate,
            "order.created",
            "{}",
            "{}",
            0,
        )
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

    fn head(rows: i64, in_window: i64) -> HeadWindow {
        HeadWindow {
            share: 100,
            end: 0,
            rows,
            in_window,
        }
    }

    #[test]
    fn a_claim_is_capped_by_its_row_limit_or_its_byte_budget() {
        let small: Vec<ClaimedEvent> = (0..3).map(|n| event(n, "a")).collect();
        assert!(
            capped(&small, 3, 1_000),
            "the row limit (lowered after large rows)"
        );
        assert!(!capped(&small, 4, 1_000));
        // Each event's payload is "{}" (2 bytes): 6 used, room for no 4th in 7.
        assert!(capped(&small, 100, 7), "the byte budget");
        assert!(!capped(&small, 100, 8));
        assert!(!capped(&[], 100, 8), "nothing claimed");
    }

    #[test]
    fn a_window_that_holds_every_pending_event_spares_the_other_look_ups() {
        // Light load: one event pending, one head, alone: nothing beyond, no followers.
        assert_eq!(look_ups(&[head(1, 1)], 1_000), (true, false));
        // Two heads of a not full window, one with another event of its aggregate in it.
        assert_eq!(look_ups(&[head(3, 1), head(3, 2)], 1_000), (true, true));
        // A full window: events may lie beyond it, followers too.
        assert_eq!(look_ups(&[head(1_000, 1)], 1_000), (false, true));
        // No head: the window says nothing (every head in it may be held by other claims).
        assert_eq!(look_ups(&[], 1_000), (false, true));
    }

    #[test]
    fn the_look_beyond_the_window_is_taken_once_per_interval() {
        let beyond = BeyondWindow::default();
        assert!(beyond.due(), "the first look is due at once");
        assert!(!beyond.due(), "and the next only after the interval");
        std::thread::sleep(BEYOND_WINDOW_EVERY + Duration::from_millis(20));
        assert!(beyond.due());
        assert!(!beyond.due());
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
