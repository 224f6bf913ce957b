//! **TEST FIXTURE — not for production.** An in-process server that speaks enough of the Amazon SQS
//! protocol (AWS JSON 1.0, as `aws-sdk-sqs` sends it) for the outbox's tests and benchmarks, with
//! fault injection.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use outbox_sqs_fixture::{CallFault, EntryFault, SqsFixture};
//!
//! let fx = SqsFixture::start().await;
//! let queue_url = fx.create_queue("orders");
//! // Point an SQS client at `fx.endpoint_url()`, e.g. through `AWS_ENDPOINT_URL_SQS`.
//!
//! fx.set_latency(Duration::from_millis(50));              // every call waits 50 ms
//! fx.fail_next_calls(2, CallFault::ServiceUnavailable);   // the next 2 calls get HTTP 503
//! fx.fail_entries_where(                                  // entries whose body holds "poison"
//!     |m| m.body.contains("poison"),                      // fail inside a 200 response
//!     EntryFault::sender_fault("InvalidParameterValue", "poisoned"),
//! );
//! fx.refuse_connections_for(Duration::from_secs(1)).await; // listener closed, then reopened
//!
//! let sent = fx.messages(); // what the server accepted, in order
//! # let _ = (queue_url, sent);
//! # }
//! ```
//!
//! # What it answers
//!
//! `POST /` with `x-amz-target: AmazonSQS.<Action>` and a JSON body, for the actions
//! `SendMessageBatch`, `SendMessage`, `GetQueueUrl`, `GetQueueAttributes`, `CreateQueue` and
//! `ListQueues`. Errors are JSON `{"__type": "com.amazonaws.sqs#<Code>", "message": "…"}` with the
//! HTTP status SQS uses and the `x-amzn-query-error: <QueryCode>;Sender|Receiver` header from which
//! `aws-sdk-sqs` takes the error code (so a missing queue arrives as the SDK's typed
//! `QueueDoesNotExist` error).
//!
//! Like SQS it validates batches (1–10 entries, distinct ids, at most 1 MiB in total) and each entry
//! (characters of the body and the attribute values, at most 10 attributes, non-empty attribute
//! values, at most 1 MiB, `MessageGroupId` required on a FIFO queue) and reports invalid entries as
//! `SenderFault` failures inside a 200 response. It does **not** store messages for receiving, does
//! not deduplicate on FIFO queues and ignores delays: it records what it accepted
//! ([`SqsFixture::messages`]) and nothing else.
//!
//! A queue is FIFO when its name ends in `.fifo`. Queue URLs look like
//! `http://127.0.0.1:<port>/000000000000/<name>`; the server finds a queue by the last path segment
//! of the URL it is sent.
//!
//! # Speed
//!
//! No latency is added unless asked for; responses are built in memory, connections are kept alive
//! and `TCP_NODELAY` is set. Recording can be switched off for large benchmarks
//! ([`SqsFixture::set_recording`]); [`SqsFixture::accepted`] still counts.

mod protocol;
mod request;
mod server;
mod sigv4;
mod sqs_error;
mod state;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub(crate) use state::{InFlight, State, lock};

/// The AWS account id in the fixture's queue URLs and ARNs.
pub const ACCOUNT_ID: &str = "000000000000";

/// A running fixture server. Stops when dropped (the listener and every open connection close).
pub struct SqsFixture {
    state: Arc<State>,
    addr: SocketAddr,
    ctrl: mpsc::UnboundedSender<server::Ctrl>,
    task: JoinHandle<()>,
}

/// A message the fixture accepted, as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    /// The queue URL given in the request.
    pub queue_url: String,
    /// The queue's name (the URL's last path segment).
    pub queue_name: String,
    /// The id the fixture answered with.
    pub message_id: String,
    /// The message body.
    pub body: String,
    /// The message attributes: name → string value (a `Binary` attribute's base64 text).
    pub attributes: BTreeMap<String, String>,
    /// The message attributes' data types: name → `String`, `Number`, `Binary`, ….
    pub attribute_types: BTreeMap<String, String>,
    /// `MessageGroupId`, if sent.
    pub group_id: Option<String>,
    /// `MessageDeduplicationId`, if sent.
    pub dedup_id: Option<String>,
    /// The API call that carried it: `SendMessageBatch` or `SendMessage`.
    pub action: &'static str,
    /// For a batch entry, its `Id` in the request.
    pub entry_id: Option<String>,
}

/// A failure of a whole call, injected with [`SqsFixture::fail_next_calls`] or
/// [`SqsFixture::fail_calls_for`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFault {
    /// HTTP 500 `InternalError` (a server fault).
    InternalError,
    /// HTTP 503 `ServiceUnavailable` (a server fault).
    ServiceUnavailable,
    /// HTTP 400 `ThrottlingException` with the query error code `RequestThrottled`, as SQS throttles.
    Throttling,
    /// Any other error: HTTP `status` with error `code` (used both as `__type` and as the query
    /// error code; `Sender` fault below 500, `Receiver` from 500).
    Error {
        /// The HTTP status.
        status: u16,
        /// The error code, e.g. `AccessDenied`.
        code: String,
        /// The error message.
        message: String,
    },
    /// An answer that is not SQS's: HTTP `status` with a plain-text `body` and no error code,
    /// as a proxy or load balancer in front of SQS may answer (e.g. a 403 page).
    Foreign {
        /// The HTTP status.
        status: u16,
        /// The body, sent as `text/plain`.
        body: String,
    },
}

/// The failure of one entry inside a 200 `SendMessageBatch` response, injected with
/// [`SqsFixture::fail_entries_where`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFault {
    /// `SenderFault` in the response: `true` when the entry itself is at fault.
    pub sender_fault: bool,
    /// `Code` in the response.
    pub code: String,
    /// `Message` in the response.
    pub message: String,
}

impl EntryFault {
    /// A failure blamed on the entry (`SenderFault: true`), e.g. `InvalidParameterValue`.
    pub fn sender_fault(code: impl Into<String>, message: impl Into<String>) -> Self {
        EntryFault {
            sender_fault: true,
            code: code.into(),
            message: message.into(),
        }
    }

    /// A failure on the server's side (`SenderFault: false`, code `InternalError`).
    pub fn server_error() -> Self {
        EntryFault {
            sender_fault: false,
            code: "InternalError".into(),
            message: "injected server-side failure".into(),
        }
    }
}

type EntryPredicate = Arc<dyn Fn(&SentMessage) -> bool + Send + Sync>;

struct EntryRule {
    matches: EntryPredicate,
    fault: EntryFault,
}

#[derive(Default)]
struct Faults {
    next_calls: Option<(u64, CallFault)>,
    until: Option<(Instant, CallFault)>,
    /// Every call of one action fails so until then.
    action_until: Option<(String, Instant, CallFault)>,
    entries: Vec<EntryRule>,
}

impl SqsFixture {
    /// Starts the server on `127.0.0.1` with an ephemeral port.
    ///
    /// # Panics
    ///
    /// When no port can be bound, or outside a Tokio runtime.
    pub async fn start() -> SqsFixture {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("SQS fixture: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("SQS fixture: local address");
        let state = Arc::new(State {
            endpoint: format!("http://{addr}"),
            calls: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            calls_by_action: Mutex::new(BTreeMap::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            latency_nanos: AtomicU64::new(0),
            silent: Mutex::new(Vec::new()),
            slow: Mutex::new(Vec::new()),
            slow_actions: Mutex::new(Vec::new()),
            late: Mutex::new(Vec::new()),
            failing: Mutex::new(Vec::new()),
            faults: Mutex::new(Faults::default()),
            queues: Mutex::new(HashMap::new()),
            recording: AtomicBool::new(true),
            accepted: AtomicU64::new(0),
            messages: Mutex::new(Vec::new()),
            next_message_id: AtomicU64::new(1),
            signing_key: Mutex::new(None),
            signatures_verified: AtomicU64::new(0),
            last_user_agent: Mutex::new(None),
            clock_skew_secs: std::sync::atomic::AtomicI64::new(0),
        });
        let (ctrl, ctrl_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(server::run(listener, addr, state.clone(), ctrl_rx));
        SqsFixture {
            state,
            addr,
            ctrl,
            task,
        }
    }

    /// The endpoint to configure an SQS client with, e.g. `http://127.0.0.1:40123`.
    pub fn endpoint_url(&self) -> String {
        self.state.endpoint.clone()
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Creates a queue (FIFO when `name` ends in `.fifo`) and returns its URL. Creating an existing
    /// queue returns the same URL.
    pub fn create_queue(&self, name: &str) -> String {
        self.state.create_queue(name)
    }

    /// Sets the `MaximumMessageSize` of the queue `name` (SQS's limit unless set): the attribute
    /// it answers with, and the largest message it takes, refusing a longer one as SQS does.
    pub fn set_max_message_size(&self, name: &str, bytes: usize) {
        if let Some(q) = lock(&self.state.queues).get_mut(name) {
            q.max_message_bytes = bytes;
        }
    }

    /// The URL a queue named `name` has (or would have) on this server.
    pub fn queue_url(&self, name: &str) -> String {
        self.state.queue_url(name)
    }

    // ---- faults -------------------------------------------------------------------------------

    /// Delays every call by `latency` before it is answered (zero, the default, adds nothing).
    pub fn set_latency(&self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.state.latency_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Leaves every call naming the queue `name` unanswered (connection open, no answer), until
    /// [`answer_queue`](Self::answer_queue): one queue silent while the others answer.
    pub fn silence_queue(&self, name: &str) {
        lock(&self.state.silent).push(name.to_owned());
    }

    /// Delays every call naming the queue `name` by `latency` more before it is answered (zero
    /// removes the delay): one queue slow while the others answer at once.
    pub fn slow_queue(&self, name: &str, latency: Duration) {
        let mut slow = lock(&self.state.slow);
        slow.retain(|(n, _)| n != name);
        if !latency.is_zero() {
            slow.push((name.to_owned(), latency));
        }
    }

    /// Carries out every call naming the queue `name` at once, as usual, and answers it `latency`
    /// later (zero removes the delay): a queue whose answers are slow to come back, so that a
    /// call its client gives up on before the answer has still been carried out (as SQS does
    /// with a request it has received).
    pub fn late_answers(&self, name: &str, latency: Duration) {
        let mut late = lock(&self.state.late);
        late.retain(|(n, _)| n != name);
        if !latency.is_zero() {
            late.push((name.to_owned(), latency));
        }
    }

    /// Fails every call naming the queue `name` (its probes too) with `fault`, until
    /// [`answer_queue`](Self::answer_queue): one queue failing while the others answer.
    pub fn fail_queue(&self, name: &str, fault: CallFault) {
        let mut failing = lock(&self.state.failing);
        failing.retain(|(n, _)| n != name);
        failing.push((name.to_owned(), fault));
    }

    /// Answers the queue `name` again, silenced or failing (the calls held meanwhile too).
    pub fn answer_queue(&self, name: &str) {
        lock(&self.state.silent).retain(|n| n != name);
        lock(&self.state.failing).retain(|(n, _)| n != name);
    }

    /// Fails the next `n` calls (of any action) with `fault`. Replaces an earlier count.
    pub fn fail_next_calls(&self, n: u64, fault: CallFault) {
        lock(&self.state.faults).next_calls = (n > 0).then_some((n, fault));
    }

    /// Fails every call (of any action) with `fault` for `duration` from now.
    pub fn fail_calls_for(&self, duration: Duration, fault: CallFault) {
        lock(&self.state.faults).until = Some((Instant::now() + duration, fault));
    }

    /// Fails every call of `action` (`SendMessageBatch`, `GetQueueAttributes`, …) with `fault`
    /// for `duration` from now, the other actions answered as usual.
    pub fn fail_action_for(&self, action: &str, duration: Duration, fault: CallFault) {
        lock(&self.state.faults).action_until =
            Some((action.to_owned(), Instant::now() + duration, fault));
    }

    /// Delays every call of `action` by `latency` more before it is answered (zero removes the
    /// delay).
    pub fn slow_action(&self, action: &str, latency: Duration) {
        let mut slow = lock(&self.state.slow_actions);
        slow.retain(|(a, _)| a != action);
        if !latency.is_zero() {
            slow.push((action.to_owned(), latency));
        }
    }

    /// Fails, inside a 200 `SendMessageBatch` response, every entry for which `matches` returns
    /// true (a `SendMessage` call matching it fails as a whole with the same code). Rules add up;
    /// the first matching rule wins. They stay until [`clear_faults`](Self::clear_faults).
    pub fn fail_entries_where(
        &self,
        matches: impl Fn(&SentMessage) -> bool + Send + Sync + 'static,
        fault: EntryFault,
    ) {
        lock(&self.state.faults).entries.push(EntryRule {
            matches: Arc::new(matches),
            fault,
        });
    }

    /// Removes every injected call and entry fault (latency stays; see
    /// [`set_latency`](Self::set_latency)).
    pub fn clear_faults(&self) {
        *lock(&self.state.faults) = Faults::default();
    }

    /// From now on, checks every request's SigV4 signature as SQS does, against these keys: a
    /// request signed otherwise (or not at all) fails with HTTP 403 `SignatureDoesNotMatch`.
    pub fn verify_signatures(&self, access_key: &str, secret_key: &str) {
        *lock(&self.state.signing_key) = Some((access_key.to_owned(), secret_key.to_owned()));
    }

    /// Moves the fixture's clock `seconds` ahead of the machine's (negative: behind). Requests whose
    /// `x-amz-date` is more than 5 minutes off the fixture's clock fail with HTTP 403
    /// `RequestTimeTooSkewed`, as SQS answers a client with a wrong clock; every response's `Date`
    /// header tells the fixture's time.
    pub fn set_clock_skew(&self, seconds: i64) {
        self.state.clock_skew_secs.store(seconds, Ordering::Relaxed);
    }

    /// Closes the listener and every open connection: connection attempts are refused until
    /// [`accept_connections`](Self::accept_connections). Returns once the listener is closed.
    pub async fn refuse_connections(&self) {
        let (tx, rx) = oneshot::channel();
        if self.ctrl.send(server::Ctrl::Stop(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// Listens again, on the same port. Returns once the listener is open.
    ///
    /// # Panics
    ///
    /// When the port cannot be bound again (another process took it).
    pub async fn accept_connections(&self) {
        let (tx, rx) = oneshot::channel();
        if self.ctrl.send(server::Ctrl::Resume(tx)).is_ok() {
            if let Ok(Err(e)) = rx.await {
                panic!("SQS fixture: cannot listen on {} again: {e}", self.addr);
            }
        }
    }

    /// [`refuse_connections`](Self::refuse_connections) now, and
    /// [`accept_connections`](Self::accept_connections) again after `duration` (in the background).
    pub async fn refuse_connections_for(&self, duration: Duration) {
        self.refuse_connections().await;
        let ctrl = self.ctrl.clone();
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            let (tx, _rx) = oneshot::channel();
            let _ = ctrl.send(server::Ctrl::Resume(tx));
        });
    }

    // ---- observations -------------------------------------------------------------------------

    /// Every message accepted so far, in the order the server accepted them.
    pub fn messages(&self) -> Vec<SentMessage> {
        lock(&self.state.messages).clone()
    }

    /// Every message accepted so far, removing them from the record.
    pub fn take_messages(&self) -> Vec<SentMessage> {
        std::mem::take(&mut *lock(&self.state.messages))
    }

    /// Whether accepted messages are recorded (default true). Switch off for large benchmarks;
    /// [`accepted`](Self::accepted) counts either way.
    pub fn set_recording(&self, on: bool) {
        self.state.recording.store(on, Ordering::Relaxed);
    }

    /// How many messages were accepted so far.
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::Relaxed)
    }

    /// How many calls (HTTP requests) arrived so far, failed ones included.
    pub fn calls(&self) -> u64 {
        self.state.calls.load(Ordering::Relaxed)
    }

    /// How many TCP connections were accepted so far (clients reuse a connection for many calls).
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::Relaxed)
    }

    /// How many calls of `action` (e.g. `"SendMessageBatch"`) arrived so far.
    pub fn calls_to(&self, action: &str) -> u64 {
        lock(&self.state.calls_by_action)
            .get(action)
            .copied()
            .unwrap_or(0)
    }

    /// The largest number of calls that were being handled at the same moment.
    pub fn max_concurrent_calls(&self) -> usize {
        self.state.max_in_flight.load(Ordering::Relaxed)
    }

    /// How many requests passed the signature check of
    /// [`verify_signatures`](Self::verify_signatures).
    pub fn signatures_verified(&self) -> u64 {
        self.state.signatures_verified.load(Ordering::Relaxed)
    }

    /// The `User-Agent` of the last request that had one.
    pub fn last_user_agent(&self) -> Option<String> {
        lock(&self.state.last_user_agent).clone()
    }

    /// Resets the call counters, the concurrency high-water mark and the accepted count.
    pub fn reset_counters(&self) {
        self.state.calls.store(0, Ordering::Relaxed);
        lock(&self.state.calls_by_action).clear();
        self.state.max_in_flight.store(0, Ordering::Relaxed);
        self.state.accepted.store(0, Ordering::Relaxed);
    }
}

impl Drop for SqsFixture {
    fn drop(&mut self) {
        self.task.abort();
    }
}
