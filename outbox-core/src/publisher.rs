//! The seam between the relay and a broker.

use std::future::Future;

pub use crate::claimed_event::ClaimedEvent;
use crate::failure::{FailureKind, PublishFailure};
use crate::limits::MessageLimits;
use uuid::Uuid;

/// What became of one event handed to [`Publisher::publish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishOutcome {
    /// The broker accepted the event. The relay marks it processed.
    Published,
    /// The event failed and may succeed later (throttling, a server error, a time-out). The relay
    /// counts an attempt and retries it after a backoff; after the maximum attempts it is
    /// dead-lettered.
    Retry(PublishFailure),
    /// The broker can never accept this event (invalid content, too large, no route). The relay
    /// dead-letters it at once with this reason.
    Permanent(PublishFailure),
    /// Nothing is wrong with the event, but its destination is unavailable as a whole (the queue
    /// does not exist any more, access is denied, the destination is throttled). The relay puts the
    /// event back for a short delay ([`UNAVAILABLE_RETRY_DELAY`]) *without* counting an attempt and
    /// holds back the later events of its aggregate, so a broken destination cannot dead-letter
    /// events in bulk while events for healthy destinations keep flowing. A publisher that has seen
    /// a destination broken for too long returns [`Permanent`](PublishOutcome::Permanent) instead.
    Unavailable(PublishFailure),
}

/// The longest the relay still waits for a [`publish_within`](Publisher::publish_within) call past
/// the batch's deadline before dropping it (a tenth of the publish timeout, at most this).
pub const PUBLISH_OVERRUN: std::time::Duration = std::time::Duration::from_secs(1);

/// How long the relay puts back an event whose destination was
/// [unavailable](PublishOutcome::Unavailable) (less up to 20 % jitter).
pub const UNAVAILABLE_RETRY_DELAY: std::time::Duration = std::time::Duration::from_secs(5);

/// The longest an event [unavailable](PublishOutcome::Unavailable) is put back for when its
/// failure names its own delay ([`PublishFailure::with_put_back`]): one hour.
pub const MAX_PUT_BACK: std::time::Duration = std::time::Duration::from_secs(3600);

/// The shortest an event [unavailable](PublishOutcome::Unavailable) is put back for when its
/// failure names its own delay ([`PublishFailure::with_put_back`]): 100 ms (a zero delay had a
/// worker claim the event again at once, in a loop).
pub const MIN_PUT_BACK: std::time::Duration = std::time::Duration::from_millis(100);

impl PublishOutcome {
    /// [`Retry`](PublishOutcome::Retry) with a failure of `kind`.
    pub fn retry(kind: FailureKind, message: impl Into<String>) -> Self {
        PublishOutcome::Retry(PublishFailure::new(kind, message))
    }

    /// [`Permanent`](PublishOutcome::Permanent) with a failure of `kind`.
    pub fn permanent(kind: FailureKind, message: impl Into<String>) -> Self {
        PublishOutcome::Permanent(PublishFailure::new(kind, message))
    }

    /// [`Unavailable`](PublishOutcome::Unavailable) with a failure of `kind`.
    pub fn unavailable(kind: FailureKind, message: impl Into<String>) -> Self {
        PublishOutcome::Unavailable(PublishFailure::new(kind, message))
    }

    /// The failure of a failed outcome.
    pub fn failure(&self) -> Option<&PublishFailure> {
        match self {
            PublishOutcome::Published => None,
            PublishOutcome::Retry(e)
            | PublishOutcome::Permanent(e)
            | PublishOutcome::Unavailable(e) => Some(e),
        }
    }

    /// The error text of a failed outcome.
    pub fn error(&self) -> Option<&str> {
        self.failure().map(PublishFailure::message)
    }
}

/// A broker the relay publishes to: the extension point that the SQS publisher, test fixtures and
/// other brokers implement.
///
/// The relay calls [`publish`](Publisher::publish) with events in `seq` order. When the relay keeps
/// per-aggregate order (the default), one call never holds two events of the same aggregate, so an
/// implementation may send the events of one call concurrently and in any order.
pub trait Publisher: Send + Sync + 'static {
    /// The error of a call that failed as a whole.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Publishes `events` and returns one outcome per event, in the same order.
    ///
    /// Return `Err` only when the call failed as a whole and nothing is known to have been accepted
    /// (broker unreachable, every request failed): the relay publishes the events again in two
    /// halves, and when both fail too, releases them without counting an attempt and backs off.
    /// (While one half goes through, the failing one is halved down to the event that fails the
    /// call, which counts an attempt.) A missing outcome is treated as
    /// [`PublishOutcome::Retry`].
    fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Self::Error>> + Send;

    /// Like [`publish`](Publisher::publish), knowing the batch's deadline: the relay calls this one.
    ///
    /// Return by `deadline` with an outcome for every event: what the broker accepted as
    /// [`Published`](PublishOutcome::Published) (the relay marks it, so it is not published again),
    /// and the events you did not get to send in time as
    /// [`Unavailable`](PublishOutcome::Unavailable) (put back without an attempt counted). The relay
    /// stops waiting a tenth of the publish timeout (at most [`PUBLISH_OVERRUN`]) after `deadline`
    /// and then drops the call, releasing every event of it — including any the broker accepted,
    /// which are then published again.
    ///
    /// The default ignores the deadline and calls [`publish`](Publisher::publish).
    fn publish_within(
        &self,
        events: &[ClaimedEvent],
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Self::Error>> + Send {
        let _ = deadline;
        self.publish(events)
    }

    /// The shortest publish timeout this publisher can work with for a call of `events` events
    /// (e.g. its broker-call timeout times the rounds of calls it needs). [`RelayBuilder::build`]
    /// refuses a [`publish_timeout`](crate::RelayConfig::publish_timeout) not above
    /// `min_publish_timeout(1)` and warns when it is below `min_publish_timeout(batch_size)`. The
    /// default is zero.
    ///
    /// [`RelayBuilder::build`]: crate::RelayBuilder::build
    fn min_publish_timeout(&self, events: usize) -> std::time::Duration {
        let _ = events;
        std::time::Duration::ZERO
    }

    /// Checks at start-up that the broker is reachable and configured (queues exist, credentials
    /// work). The relay refuses to start when it fails. The default checks nothing.
    fn check(&self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        async { Ok(()) }
    }

    /// What this publisher's broker accepts in a message. [`Emitter::for_publisher`] checks events
    /// against it before writing them, so an event the broker would refuse fails in the writer's
    /// transaction. The default is [`MessageLimits::DEFAULT`].
    ///
    /// [`Emitter::for_publisher`]: crate::Emitter::for_publisher
    fn limits(&self) -> MessageLimits {
        MessageLimits::DEFAULT
    }

    /// Whether one [`publish`](Publisher::publish) call may hold several events of one aggregate
    /// with per-aggregate order kept by the publisher: it gets them in `seq` order, the broker
    /// accepts none of them ahead of an earlier one, and once one fails the later ones of its
    /// aggregate in that call are not sent (their outcome is not `Published`). The relay, keeping
    /// per-aggregate order, then hands over a whole batch in one call instead of one wave per
    /// position in the aggregates (one call per event of a hot aggregate). The default is `false`.
    fn keeps_aggregate_order(&self) -> bool {
        false
    }

    /// At the relay's shutdown, once its batches have ended: waits at most `within` for the broker
    /// calls this publisher let go on after their publish returned (their events put back
    /// [`Unavailable`](PublishOutcome::Unavailable) with [`FailureKind::InProgress`]), and returns
    /// the ids of the events those calls got accepted that no publish has reported yet. The relay
    /// marks them published, so that the next start does not send them again (cut at shutdown,
    /// every such call's events were). The default has none.
    fn settle(&self, within: std::time::Duration) -> impl Future<Output = Vec<Uuid>> + Send {
        let _ = within;
        async { Vec::new() }
    }

    /// How many more events this publisher could take now without putting any back for want of
    /// room (its broker calls in flight all taken by calls that went on after their publish, a
    /// destination answering slowly), or `None` when it has no such limit or cannot tell. While
    /// it has no room, it may wait a while (about a second) for some before answering.
    ///
    /// The relay's workers ask before each claim and claim at most that many events, none at
    /// `Some(0)` (they ask again), so that a publisher that can only put a batch back is not
    /// handed one: every event claimed and put back is a row written. The default is `None`, at
    /// once.
    fn room(&self) -> impl Future<Output = Option<usize>> + Send {
        async { None }
    }

    /// While the relay runs: the ids of the events that broker calls which went on after their
    /// publish returned (their events put back [`Unavailable`](PublishOutcome::Unavailable) with
    /// [`FailureKind::InProgress`](crate::FailureKind::InProgress)) got accepted since last asked,
    /// each returned once, without waiting. The relay asks four times a second and marks them
    /// published, so that such an event is marked as its call ends, not at its next claim, and
    /// can be put back until its call cannot be running any more: no other relay claims it and
    /// sends it again meanwhile. The default has none.
    fn settled(&self) -> Vec<Uuid> {
        Vec::new()
    }

    /// Resolves once the publisher finds a destination it had found not answering (down)
    /// answering again, after the future was made. It may resolve at other times too: a worker
    /// woken for nothing claims once more and backs off again.
    ///
    /// The relay's workers, backing off after batches that failed as a whole because the
    /// publisher failed (its broker down: the back-off grows to 30 s), wait for it as well as for
    /// the back-off, so that they resume within moments of the broker answering again, not when
    /// their back-off ends (black-box run: nothing sent for 5.4 s after a queue black-holed for
    /// 30 s answered again; longer outages left longer gaps). The default never resolves.
    fn recovered(&self) -> impl Future<Output = ()> + Send {
        std::future::pending()
    }
}

/// A shared publisher (e.g. one SQS client behind several relays) publishes as the publisher itself.
impl<P: Publisher> Publisher for std::sync::Arc<P> {
    type Error = P::Error;

    fn publish(
        &self,
        events: &[ClaimedEvent],
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Self::Error>> + Send {
        (**self).publish(events)
    }

    fn publish_within(
        &self,
        events: &[ClaimedEvent],
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = Result<Vec<PublishOutcome>, Self::Error>> + Send {
        (**self).publish_within(events, deadline)
    }

    fn min_publish_timeout(&self, events: usize) -> std::time::Duration {
        (**self).min_publish_timeout(events)
    }

    fn check(&self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        (**self).check()
    }

    fn limits(&self) -> MessageLimits {
        (**self).limits()
    }

    fn keeps_aggregate_order(&self) -> bool {
        (**self).keeps_aggregate_order()
    }

    fn settle(&self, within: std::time::Duration) -> impl Future<Output = Vec<Uuid>> + Send {
        (**self).settle(within)
    }

    fn room(&self) -> impl Future<Output = Option<usize>> + Send {
        (**self).room()
    }

    fn settled(&self) -> Vec<Uuid> {
        (**self).settled()
    }

    fn recovered(&self) -> impl Future<Output = ()> + Send {
        (**self).recovered()
    }
}
