//! A TCP proxy between a client and a server that can black-hole its connections: bytes stop
//! flowing both ways while the sockets stay open, as when a network partition drops every packet.
//! It can also hold what the client sends for a while, as a slow link or a busy server would.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A proxy on `127.0.0.1:<port>` forwarding to one upstream address. Stops when dropped.
pub struct BlackHoleProxy {
    addr: SocketAddr,
    black_hole: Arc<AtomicBool>,
    /// Milliseconds each chunk the client sends is held before it is passed on.
    delay_ms: Arc<AtomicU64>,
    task: JoinHandle<()>,
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
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let flag = Arc::clone(&flag);
                let delay = Arc::clone(&delay);
                tokio::spawn(async move {
                    if flag.load(Ordering::SeqCst) {
                        // Accept and never answer: a new connection into the partition hangs.
                        let _keep = &client;
                        std::future::pending::<()>().await;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let up = tokio::spawn(pump(cr, sw, Arc::clone(&flag), Some(delay)));
                    let down = tokio::spawn(pump(sr, cw, flag, None));
                    let _ = tokio::join!(up, down);
                });
            }
        });
        BlackHoleProxy {
            addr,
            black_hole,
            delay_ms,
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

/// Copies `from` to `to` (each chunk held for `delay` first, when given) until either closes or
/// the black hole opens; then holds both open, silently, forever (the proxy's task ends with the
/// test).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    black_hole: Arc<AtomicBool>,
    delay_ms: Option<Arc<AtomicU64>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if black_hole.load(Ordering::SeqCst) {
            break;
        }
        let n = tokio::select! {
            n = from.read(&mut buf) => n,
            // Notice the black hole even while the connection is quiet.
            _ = tokio::time::sleep(Duration::from_millis(20)) => continue,
        };
        let Ok(n) = n else { return };
        if n == 0 || black_hole.load(Ordering::SeqCst) {
            if n == 0 {
                return;
            }
            break;
        }
        let hold = delay_ms.as_ref().map_or(0, |d| d.load(Ordering::SeqCst));
        if hold > 0 {
            tokio::time::sleep(Duration::from_millis(hold)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
    // Black-holed: keep both halves open and read nothing more.
    let _keep = (from, to);
    std::future::pending::<()>().await;
}
