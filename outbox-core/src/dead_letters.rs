//! Dead letters: events the relay gave up on, listed, retried or purged by an operator.

use crate::client::GenericClient;
use outbox_queries::queries::admin as sql;
use uuid::Uuid;

use crate::error::Error;

/// Runs one of the generated statements that take a [`DeadLetterFilter`]'s four parameters.
macro_rules! by_filter {
    ($statement:expr, $client:expr, $filter:expr) => {
        $statement
            .bind(
                $client,
                &$filter.ids,
                &$filter.event_type.as_deref(),
                &$filter.aggregate_type.as_deref(),
                &$filter.aggregate_id.as_deref(),
            )
            .all()
            .await?
    };
}

/// A dead-lettered event as listed by [`list_dead_letters`] (no payload: listings are for logs and
/// terminals).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The event id.
    pub id: Uuid,
    /// Its position in the outbox (insertion order).
    pub seq: i64,
    /// The aggregate type.
    pub aggregate_type: String,
    /// The aggregate id.
    pub aggregate_id: String,
    /// The event type.
    pub event_type: String,
    /// Failed attempts before it was dead-lettered.
    pub attempts: u32,
    /// The last failure's reason.
    pub last_error: Option<String>,
    /// When the event was written.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When it was dead-lettered.
    pub dead_lettered_at: chrono::DateTime<chrono::Utc>,
}

impl From<sql::ListDeadLetters> for DeadLetter {
    fn from(d: sql::ListDeadLetters) -> Self {
        DeadLetter {
            id: d.id,
            seq: d.seq,
            aggregate_type: d.aggregate_type,
            aggregate_id: d.aggregate_id,
            event_type: d.event_type,
            // The schema's CHECK keeps attempts non-negative.
            attempts: u32::try_from(d.attempts).unwrap_or(0),
            last_error: d.last_error,
            created_at: d.created_at,
            dead_lettered_at: d.dead_lettered_at,
        }
    }
}

/// Which dead letters an operation applies to. Every criterion given must match; an empty filter
/// matches every dead letter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadLetterFilter {
    /// Only these event ids.
    pub ids: Option<Vec<Uuid>>,
    /// Only this event type.
    pub event_type: Option<String>,
    /// Only this aggregate type.
    pub aggregate_type: Option<String>,
    /// Only this aggregate id.
    pub aggregate_id: Option<String>,
}

impl DeadLetterFilter {
    /// Whether the filter matches every dead letter.
    pub fn is_empty(&self) -> bool {
        self.ids.is_none()
            && self.event_type.is_none()
            && self.aggregate_type.is_none()
            && self.aggregate_id.is_none()
    }
}

/// Lists up to `limit` dead letters matching `filter`, oldest first.
pub async fn list_dead_letters<C: GenericClient>(
    client: &C,
    filter: &DeadLetterFilter,
    limit: i64,
) -> Result<Vec<DeadLetter>, Error> {
    Ok(sql::list_dead_letters()
        .bind(
            client,
            &filter.ids,
            &filter.event_type.as_deref(),
            &filter.aggregate_type.as_deref(),
            &filter.aggregate_id.as_deref(),
            &limit,
        )
        .all()
        .await?
        .into_iter()
        .map(DeadLetter::from)
        .collect())
}

/// Makes the matching dead letters pending again with attempts reset; returns their ids. The relay
/// publishes them on its next claim (in order, within their aggregates): when any is retried, the
/// relays are notified as the transaction commits, so an idle relay claims them then.
pub async fn retry_dead_letters<C: GenericClient>(
    client: &C,
    filter: &DeadLetterFilter,
) -> Result<Vec<Uuid>, Error> {
    Ok(by_filter!(sql::retry_dead_letters(), client, filter))
}

/// Deletes the matching dead letters for good; returns their ids. Later events of their aggregates
/// are unblocked (the relays are notified as the transaction commits, as for a retry).
pub async fn purge_dead_letters<C: GenericClient>(
    client: &C,
    filter: &DeadLetterFilter,
) -> Result<Vec<Uuid>, Error> {
    Ok(by_filter!(sql::purge_dead_letters(), client, filter))
}

/// Dead letters deleted per statement by [`purge_dead_letter_ids`].
pub const PURGE_BATCH_SIZE: usize = 1_000;

/// The ids of the dead letters matching `filter` now, oldest first — what an operator is shown
/// before a purge. Hand them to [`purge_dead_letter_ids`] after the confirmation, so that the purge
/// deletes exactly what was shown: a dead letter that appears in between is not deleted.
pub async fn dead_letter_ids<C: GenericClient>(
    client: &C,
    filter: &DeadLetterFilter,
) -> Result<Vec<Uuid>, Error> {
    Ok(by_filter!(sql::dead_letter_ids(), client, filter))
}

/// Deletes the dead letters with these ids, [`PURGE_BATCH_SIZE`] per statement (each its own
/// short statement, no long locks); returns the ids deleted. An id that is no longer a dead letter
/// (retried or published meanwhile, or already gone) is skipped.
pub async fn purge_dead_letter_ids<C: GenericClient>(
    client: &C,
    ids: &[Uuid],
) -> Result<Vec<Uuid>, Error> {
    let mut deleted = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(PURGE_BATCH_SIZE) {
        deleted.extend(
            sql::purge_dead_letters_by_id()
                .bind(client, &chunk)
                .all()
                .await?,
        );
    }
    Ok(deleted)
}
