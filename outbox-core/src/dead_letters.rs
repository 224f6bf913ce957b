//! Dead letters: events the relay gave up on, listed, retried or purged by an operator.

use outbox_queries::client::GenericClient;
use outbox_queries::queries::admin as sql;
use uuid::Uuid;

use crate::error::Error;

/// A dead-lettered event as listed by [`list_dead_letters`] (no payload: listings are for logs and
/// terminals).
pub use outbox_queries::queries::admin::ListDeadLetters as DeadLetter;

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

/// Lists up to `limit` dead letters matching `filter` (ids are ignored here), oldest first.
pub async fn list_dead_letters<C: GenericClient>(
    client: &C,
    filter: &DeadLetterFilter,
    limit: i64,
) -> Result<Vec<DeadLetter>, Error> {
    Ok(sql::list_dead_letters()
        .bind(
            client,
            &filter.event_type.as_deref(),
            &filter.aggregate_type.as_deref(),
            &filter.aggregate_id.as_deref(),
            &limit,
        )
        .all()
        .await?)
}

/// Makes the matching dead letters pending again with attempts reset; returns their ids. The relay
/// publishes them on its next claim (in order, within their aggregates).
pub async fn retry_dead_letters<C: GenericClient>(
    client: &C,
    filter: &DeadLetterFilter,
) -> Result<Vec<Uuid>, Error> {
    Ok(sql::retry_dead_letters()
        .bind(
            client,
            &filter.ids,
            &filter.event_type.as_deref(),
            &filter.aggregate_type.as_deref(),
            &filter.aggregate_id.as_deref(),
        )
        .all()
        .await?)
}

/// Deletes the matching dead letters for good; returns their ids. Later events of their aggregates
/// are unblocked.
pub async fn purge_dead_letters<C: GenericClient>(
    client: &C,
    filter: &DeadLetterFilter,
) -> Result<Vec<Uuid>, Error> {
    Ok(sql::purge_dead_letters()
        .bind(
            client,
            &filter.ids,
            &filter.event_type.as_deref(),
            &filter.aggregate_type.as_deref(),
            &filter.aggregate_id.as_deref(),
        )
        .all()
        .await?)
}
