//! A unit of work: one message, or on a FIFO queue the messages of one group from one receive
//! batch, handled one after the other on one handler, with a heartbeat keeping the waiting ones
//! hidden; what a unit does not handle is released for a later receive.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::Message;
#[cfg(test)]
use aws_sdk_sqs::types::MessageSystemAttributeName;
use outbox_core::{CancellationToken, DecodeEvent};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Shared;
use super::config::BadInputPolicy;
use super::envelope::{Envelope, group_id};
use super::handler::{Delivery, Handler, Outcome};
use super::process::{Turn, handle_message};
use super::visibility::{self, Pending};

/// Messages with the same `MessageGroupId` form one unit, in the order received; every other
/// message is a unit of its own. Units keep the order of their first message.
pub(crate) fn split_into_units(messages: Vec<Message>) -> Vec<Vec<Message>> {
    let mut units: Vec<Vec<Message>> = Vec::new();
    let mut by_group: Vec<(String, usize)> = Vec::new();
    for m in messages {
        match group_id(&m).map(str::to_owned) {
            Some(group) => match by_group.iter().find(|(g, _)| *g == group) {
                Some((_, at)) => units[*at].push(m),
                None => {
                    by_group.push((group, units.len()));
                    units.push(vec![m]);
                }
            },
            None => units.push(vec![m]),
        }
    }
    units
}

/// Handles a unit's messages one after the other (each taking a handler permit for its handler),
/// while a heartbeat keeps the unhandled ones hidden. After a failure (or once shutting down) the
/// unit's later messages are not handled: they are made visible again at once, so SQS hands them
/// out again, still after the failed one. A message still waiting (for a handler, the database or
/// S3) at shutdown is released with the rest of its unit.
pub(crate) async fn run_unit<T, H>(
    shared: Arc<Shared>,
    handler: Arc<H>,
    unit: Vec<Message>,
    received_at: Instant,
    token: CancellationToken,
    (handlers, _slots): (Arc<Semaphore>, Vec<OwnedSemaphorePermit>),
) where
    T: DecodeEvent + Send + 'static,
    H: Handler<T>,
{
    let receipt = |m: &Message| m.receipt_handle().unwrap_or_default().to_owned();
    let pending = Pending::new(unit.iter().map(receipt).collect(), received_at);
    let work = async {
        let stops = |outcome: Outcome| match outcome {
            Outcome::Failed => true,
            Outcome::BadInput(_) => shared.config.bad_input == BadInputPolicy::Release,
            _ => false,
        };
        let rest = in_sequence(
            &unit,
            |message| {
                let (shared, handler, pending) = (&shared, &handler, &pending);
                let turn = Turn {
                    pending,
                    token: &token,
                    handlers: &handlers,
                };
                async move {
                    // Kept hidden by the heartbeat while the database fails; released unhandled
                    // if shutdown comes first. (A handler permit is taken later, for the
                    // handler alone: see `handle_message`.)
                    if !shared.database_up(turn.token).await {
                        return Outcome::Released;
                    }
                    handle_message::<T, H>(shared, &**handler, message, received_at, turn).await
                }
            },
            stops,
            &token,
        )
        .await;
        release(&shared, rest, received_at, &pending, &token).await;
    };
    tokio::select! {
        _ = work => {}
        _ = visibility::heartbeat(shared.sqs(), shared.config.visibility_timeout,
            &pending,
        ) => {}
    }
}

/// Hands back `messages` a receiver got from a poll that finished at shutdown, unhandled: counted
/// as received, released as a unit's messages are.
pub(crate) async fn hand_back(shared: &Shared, messages: Vec<Message>, token: &CancellationToken) {
    if messages.is_empty() {
        return;
    }
    shared.metrics.on_received(messages.len());
    let received_at = Instant::now();
    let pending = Pending::new(Vec::new(), received_at);
    release(shared, &messages, received_at, &pending, token).await;
}

/// Makes `messages` visible again, unhandled (taken out of the heartbeat's `pending` first), and
/// tells the observer: at once, or at shutdown once this consumer's own long polls are over (a
/// poll cut short would take them back: see `polls.rs`).
async fn release(
    shared: &Shared,
    messages: &[Message],
    received_at: Instant,
    pending: &Pending,
    token: &CancellationToken,
) {
    if messages.is_empty() {
        return;
    }
    let receipts: Vec<String> = messages
        .iter()
        .map(|m| m.receipt_handle().unwrap_or_default().to_owned())
        .collect();
    pending.take_all(&receipts).await;
    shared.metrics.on_released(messages.len());
    let hidden = pending.within_limit(shared.hidden_from_own_polls(token, Duration::ZERO).await);
    visibility::change(shared.sqs(), &receipts, hidden).await;
    if let Some(observer) = &shared.observer {
        for m in messages {
            observer(&Delivery {
                message_id: m.message_id().unwrap_or_default().to_owned(),
                envelope: Envelope::read(m).ok(),
                outcome: Outcome::Released,
                received_at,
                left_in_queue: false,
            });
        }
    }
}

/// Calls `handle` on the messages of `unit` one after the other, until an outcome `stops` the unit
/// or `token` is cancelled; returns the messages not handled (from the current one on when its
/// outcome is [`Outcome::Released`]: `handle` did not start it).
pub(crate) async fn in_sequence<'m, F: Future<Output = Outcome>>(
    unit: &'m [Message],
    mut handle: impl FnMut(&'m Message) -> F,
    stops: impl Fn(Outcome) -> bool,
    token: &CancellationToken,
) -> &'m [Message] {
    for (i, message) in unit.iter().enumerate() {
        let outcome = handle(message).await;
        if outcome == Outcome::Released {
            return &unit[i..];
        }
        if stops(outcome) || token.is_cancelled() {
            return &unit[i + 1..];
        }
    }
    &[]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, group: Option<&str>) -> Message {
        let mut m = Message::builder().message_id(id);
        if let Some(g) = group {
            m = m.attributes(MessageSystemAttributeName::MessageGroupId, g);
        }
        m.build()
    }

    fn ids(unit: &[Message]) -> Vec<&str> {
        unit.iter().filter_map(|m| m.message_id()).collect()
    }

    #[test]
    fn a_groups_messages_form_one_unit_in_order() {
        let units = split_into_units(vec![
            message("a1", Some("a")),
            message("b1", Some("b")),
            message("a2", Some("a")),
            message("s1", None),
            message("a3", Some("a")),
            message("s2", None),
        ]);
        let units: Vec<Vec<&str>> = units.iter().map(|u| ids(u)).collect();
        assert_eq!(
            units,
            [vec!["a1", "a2", "a3"], vec!["b1"], vec!["s1"], vec!["s2"]]
        );
    }

    #[tokio::test]
    async fn a_failure_stops_the_unit_and_returns_the_later_messages() {
        let unit = vec![
            message("a1", Some("a")),
            message("a2", Some("a")),
            message("a3", Some("a")),
        ];
        let token = CancellationToken::new();
        let handled = std::sync::Mutex::new(Vec::new());
        let stops = |o: Outcome| o == Outcome::Failed;
        let rest = in_sequence(
            &unit,
            |m| {
                let handled = &handled;
                async move {
                    let id = m.message_id().unwrap_or_default().to_owned();
                    // A later message must not start before an earlier one ends.
                    handled.lock().unwrap().push(format!("start {id}"));
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    handled.lock().unwrap().push(format!("end {id}"));
                    if id == "a2" {
                        Outcome::Failed
                    } else {
                        Outcome::Handled
                    }
                }
            },
            stops,
            &token,
        )
        .await;
        assert_eq!(
            *handled.lock().unwrap(),
            ["start a1", "end a1", "start a2", "end a2"]
        );
        assert_eq!(ids(rest), ["a3"]);

        // All handled: nothing left.
        let rest = in_sequence(&unit, |_| async { Outcome::Duplicate }, stops, &token).await;
        assert!(rest.is_empty());

        // Shutting down: the message in hand finishes, the rest is returned.
        token.cancel();
        let calls = std::sync::atomic::AtomicU32::new(0);
        let rest = in_sequence(
            &unit,
            |_| {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async { Outcome::Handled }
            },
            stops,
            &token,
        )
        .await;
        assert_eq!(calls.into_inner(), 1);
        assert_eq!(ids(rest), ["a2", "a3"]);
    }
}
