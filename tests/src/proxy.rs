//! A TCP proxy between a client and a server that can black-hole its connections: bytes stop
//! flowing both ways while the sockets stay open, as when a network partition drops every packet.
//! It can also hold what the client sends for a while, as a slow link or a busy server would.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::startup_packet;

/// Bytes whose first sender's answers are held, and for how long.
type Held = (Vec<u8>, Duration);

/// Bytes whose sender is caught, and whether every one is (or the first only).
/// Bytes to catch, whether every sender of them is caught, and how many sendings pass first.
type Catch = (Vec<u8>, bool, usize);

/// A proxy on `127.0.0.1:<port>` forwarding to one upstream address. Stops when dropped.
pub struct BlackHoleProxy {
    addr: SocketAddr,
    black_hole: Arc<AtomicBool>,
    /// Milliseconds each chunk the client sends is held before it is passed on.
    delay_ms: Arc<AtomicU64>,
    /// Bytes whose first sender is caught (see [`BlackHoleProxy::catch_first_sending`]).
    catch: Arc<Mutex<Option<Catch>>>,
    /// Bytes whose first sender's answer is held, and for how long (see
    /// [`BlackHoleProxy::hold_answer_to`]).
    hold: Arc<Mutex<Option<Held>>>,
    /// Forwarded connections whose client has not closed its side.
    open: Arc<AtomicUsize>,
    /// Whether start-ups name another process than the server's (see
    /// [`BlackHoleProxy::name_other_processes`]).
    rename: Arc<AtomicBool>,
    /// Whether start-ups carrying `options` are refused (see
    /// [`BlackHoleProxy::refuse_startup_options`]).
    refuse_options: Arc<AtomicU8>,
    /// Whether start-ups lose their `options` on the way (see
    /// [`BlackHoleProxy::drop_startup_options`]).
    drop_options: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

/// One forwarded connection counted open until its client closes its side (dropped then).
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a pump watches: the proxy's black hole, and its own connection's.
#[derive(Clone)]
struct Holes {
    proxy: Arc<AtomicBool>,
    connection: Arc<AtomicBool>,
    catch: Arc<Mutex<Option<Catch>>>,
    rename: Arc<AtomicBool>,
    hold: Arc<Mutex<Option<Held>>>,
    /// Until when this connection's answers are held.
    held_until: Arc<Mutex<Option<tokio::time::Instant>>>,
}

impl Holes {
    fn open(&self) -> bool {
        self.proxy.load(Ordering::SeqCst) || self.connection.load(Ordering::SeqCst)
    }

    /// Whether `chunk` is the first to carry the bytes to catch (then this connection is caught).
    fn catches(&self, chunk: &[u8]) -> bool {
        let mut slot = self.catch.lock().unwrap_or_else(|p| p.into_inner());
        let hit = slot.as_ref().is_some_and(|(p, _, _)| {
            !p.is_empty() && chunk.windows(p.len()).any(|w| w == p.as_slice())
        });
        if !hit {
            return false;
        }
        if let Some((_, _, passing @ 1..)) = slot.as_mut() {
            *passing -= 1;
            return false;
        }
        if slot.as_ref().is_some_and(|(_, every, _)| !every) {
            *slot = None;
        }
        self.connection.store(true, Ordering::SeqCst);
        true
    }

    /// Whether `chunk` is the first to carry the bytes whose answer is held (then this
    /// connection's answers are held from now).
    fn holds(&self, chunk: &[u8]) {
        let mut slot = self.hold.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((bytes, hold)) = slot.as_ref()
            && !bytes.is_empty()
            && chunk.windows(bytes.len()).any(|w| w == bytes.as_slice())
        {
            *self.held_until.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(tokio::time::Instant::now() + *hold);
            *slot = None;
        }
    }

    /// How long an answer read now waits before it is passed on.
    fn answer_held_until(&self) -> Option<tokio::time::Instant> {
        *self.held_until.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl BlackHoleProxy {
    /// Starts a proxy forwarding to `upstream` (e.g. `127.0.0.1:5432`).
    pub async fn start(upstream: SocketAddr) -> BlackHoleProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let black_hole = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&black_hole);
        let delay_ms = Arc::new(AtomicU64::new(0));
        let delay = Arc::clone(&delay_ms);
        let catch = Arc::new(Mutex::new(None));
        let catching = Arc::clone(&catch);
        let hold = Arc::new(Mutex::new(None));
        let holding = Arc::clone(&hold);
        let open = Arc::new(AtomicUsize::new(0));
        let counting = Arc::clone(&open);
        let rename = Arc::new(AtomicBool::new(false));
        let renaming = Arc::clone(&rename);
        let refuse_options = Arc::new(AtomicU8::new(startup_packet::REFUSE_NONE));
        let refusing = Arc::clone(&refuse_options);
        let drop_options = Arc::new(AtomicBool::new(false));
        let dropping = Arc::clone(&drop_options);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let flag = Arc::clone(&flag);
                let delay = Arc::clone(&delay);
                let catching = Arc::clone(&catching);
                let holding = Arc::clone(&holding);
                let counting = Arc::clone(&counting);
                let renaming = Arc::clone(&renaming);
                let refusing = Arc::clone(&refusing);
                let dropping = Arc::clone(&dropping);
                tokio::spawn(async move {
                    let mut client = client;
                    if flag.load(Ordering::SeqCst) {
                        // Accept and never answer: a new connection into the partition hangs.
                        let _keep = &client;
                        std::future::pending::<()>().await;
                    }
                    let mut first = Vec::new();
                    let dropping = dropping.load(Ordering::SeqCst);
                    let refusing = refusing.load(Ordering::SeqCst);
                    if refusing != startup_packet::REFUSE_NONE || dropping {
                        let mut buf = vec![0u8; 16 * 1024];
                        let Ok(n) = client.read(&mut buf).await else {
                            return;
                        };
                        first.extend_from_slice(&buf[..n]);
                        if dropping {
                            first = startup_packet::without_options(&first);
                        } else if let Some(refusal) = startup_packet::refusal(refusing, &first) {
                            let _ = client.write_all(&refusal).await;
                            return;
                        }
                    }
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    if !first.is_empty() && server.write_all(&first).await.is_err() {
                        return;
                    }
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let holes = Holes {
                        proxy: flag,
                        connection: Arc::new(AtomicBool::new(false)),
                        catch: catching,
                        rename: renaming,
                        hold: holding,
                        held_until: Arc::new(Mutex::new(None)),
                    };
                    counting.fetch_add(1, Ordering::SeqCst);
                    let client = Client {
                        delay,
                        open: Open(counting),
                    };
                    let up = tokio::spawn(pump(cr, sw, holes.clone(), Some(client)));
                    let down = tokio::spawn(pump(sr, cw, holes, None));
                    let _ = tokio::join!(up, down);
                });
            }
        });
        BlackHoleProxy {
            addr,
            black_hole,
            delay_ms,
            catch,
            hold,
            open,
            rename,
            refuse_options,
            drop_options,
            task,
        }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on no byte passes either way, on existing and new connections; the sockets stay
    /// open (no FIN, no RST), so neither end learns anything until its own timeouts fire.
    pub fn black_hole(&self) {
        self.black_hole.store(true, Ordering::SeqCst);
    }

    /// The partition ends for new connections: they pass again. Connections caught in the black
    /// hole stay silent, as a peer's dead connections do until its own timeouts drop them.
    pub fn heal(&self) {
        self.black_hole.store(false, Ordering::SeqCst);
    }

    /// How many forwarded connections are open on their client's side, black-holed ones included
    /// (a client that gives one up should close its socket).
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// The first connection whose client sends `bytes` (within one chunk, e.g. a statement's
    /// text) is black-holed from that chunk on (the chunk is not passed on); other connections,
    /// and later senders of the same bytes, pass. A stall at one precise step of a protocol.
    pub fn catch_first_sending(&self, bytes: &[u8]) {
        self.catch_nth_sending(bytes, 1);
    }

    /// Like [`catch_first_sending`](Self::catch_first_sending), the `n`th chunk carrying `bytes`
    /// caught (the same statement sent again, say), those before it passing.
    pub fn catch_nth_sending(&self, bytes: &[u8], n: usize) {
        *self.catch.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((bytes.to_vec(), false, n.saturating_sub(1)));
    }

    /// Like [`catch_first_sending`](Self::catch_first_sending), for every connection that sends
    /// `bytes` until [`stop_catching`](Self::stop_catching).
    pub fn catch_every_sending(&self, bytes: &[u8]) {
        *self.catch.lock().unwrap_or_else(|p| p.into_inner()) = Some((bytes.to_vec(), true, 0));
    }

    /// New senders of the bytes caught pass again (those caught stay silent).
    pub fn stop_catching(&self) {
        *self.catch.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The first connection whose client sends `bytes` (within one chunk) gets its answers from
    /// then on `hold` late, all at once: what the server sent is on its way (a slow link, a large
    /// answer), while the server already waits for the next statement.
    pub fn hold_answer_to(&self, bytes: &[u8], hold: Duration) {
        *self.hold.lock().unwrap_or_else(|p| p.into_inner()) = Some((bytes.to_vec(), hold));
    }

    /// From now on new connections' start-ups (their `BackendKeyData`, unencrypted: `NoTls`) name
    /// another process id than their server session's, as a pooler's do (PgBouncer hands its
    /// clients keys of its own): the session that answers is not one to end.
    pub fn name_other_processes(&self) {
        self.rename.store(true, Ordering::SeqCst);
    }

    /// From now on new connections whose start-up carries `options` are refused as PgBouncer
    /// refuses them (`FATAL 08P01 unsupported startup parameter: options`), before the server is
    /// contacted. For start-ups without TLS (`sslmode=disable`).
    pub fn refuse_startup_options(&self) {
        (self.refuse_options).store(startup_packet::REFUSE_OPTIONS, Ordering::SeqCst);
    }

    /// From now on new connections whose start-up asks for `idle_session_timeout` are refused as
    /// PostgreSQL 13 and older refuse them (`FATAL 42704 unrecognized configuration parameter
    /// "idle_session_timeout"`), before the server is contacted. For start-ups without TLS.
    pub fn refuse_idle_session_timeout(&self) {
        (self.refuse_options).store(startup_packet::REFUSE_IDLE_LIMIT, Ordering::SeqCst);
    }

    /// From now on new connections' start-ups reach the server without their `options`, as
    /// PgBouncer passes them on when its `ignore_startup_parameters` lists `options`: the
    /// settings in them are dropped without a word. For start-ups without TLS.
    pub fn drop_startup_options(&self) {
        self.drop_options.store(true, Ordering::SeqCst);
    }

    /// From now on each chunk a client sends reaches the server `delay` later (zero: at once), on
    /// existing and new connections: every request is answered that much later.
    pub fn delay_requests(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.delay_ms.store(ms, Ordering::SeqCst);
    }
}

impl Drop for BlackHoleProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Changes the process id of a `BackendKeyData` message in `chunk` (what a server sends), if any.
fn rename_process(chunk: &mut [u8]) {
    const KEY_DATA: &[u8] = &[b'K', 0, 0, 0, 12];
    if let Some(at) = chunk.windows(KEY_DATA.len()).position(|w| w == KEY_DATA)
        && let Some(pid) = chunk.get_mut(at + 5..at + 9)
    {
        pid.iter_mut().for_each(|b| *b ^= 0x5a);
    }
}

/// Copies `from` to `to` (each chunk held for `delay` first, when given) until either closes or
/// the black hole opens; then holds both open, silently, forever (the proxy's task ends with the
/// test).
/// The client's side of a connection, as its pump sees it.
struct Client {
    /// Milliseconds each chunk is held.
    delay: Arc<AtomicU64>,
    open: Open,
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    holes: Holes,
    client: Option<Client>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if holes.open() {
            break;
        }
        let n = tokio::select! {
            n = from.read(&mut buf) => n,
            // Notice the black hole even while the connection is quiet.
            _ = tokio::time::sleep(Duration::from_millis(20)) => continue,
        };
        let Ok(n) = n else { return };
        // Only what the client sends is searched for the bytes to catch.
        if n == 0 || holes.open() || (client.is_some() && holes.catches(&buf[..n])) {
            if n == 0 {
                return;
            }
            break;
        }
        if client.is_none() && holes.rename.load(Ordering::SeqCst) {
            rename_process(&mut buf[..n]);
        }
        if client.is_some() {
            holes.holds(&buf[..n]);
        } else if let Some(until) = holes.answer_held_until() {
            tokio::time::sleep_until(until).await;
        }
        let hold = client
            .as_ref()
            .map_or(0, |c| c.delay.load(Ordering::SeqCst));
        if hold > 0 {
            tokio::time::sleep(Duration::from_millis(hold)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
    // Black-holed: keep both halves open and pass nothing more; the client's bytes are read (and
    // dropped) only to see it close its side.
    if let Some(client) = client {
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
        drop(client.open);
    }
    let _keep = (from, to);
    std::future::pending::<()>().await;
}
