//! A TCP proxy that delivers every chunk the server sends `delay` late (client-to-server traffic
//! passes at once), so that each round trip the client waits for costs `delay`, and that counts the
//! client's turns: the times it spoke again after hearing from the server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A delaying proxy on `127.0.0.1:<port>` forwarding to one upstream address. Stops when dropped.
pub struct DelayProxy {
    addr: SocketAddr,
    turns: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

/// What the proxy's connections share: the turn count, and whether the server has been heard since
/// the client last spoke.
#[derive(Default)]
struct Turns {
    count: Arc<AtomicU64>,
    heard: AtomicBool,
}

impl DelayProxy {
    /// Starts a proxy to `upstream` that holds every server chunk back for `delay`.
    pub async fn start(upstream: SocketAddr, delay: Duration) -> DelayProxy {
        DelayProxy::spawn(upstream, delay, Rates::default()).await
    }

    /// Starts a proxy to `upstream` that passes answers at once but carries what the client sends
    /// at `bytes_per_sec`: a slow uplink, on which small requests are quick and uploads slow.
    pub async fn slow_upload(upstream: SocketAddr, bytes_per_sec: u64) -> DelayProxy {
        let up = Some(bytes_per_sec.max(1));
        DelayProxy::spawn(upstream, Duration::ZERO, Rates { up, down: None }).await
    }

    /// Starts a proxy to `upstream` that passes requests at once but carries what the server sends
    /// at `bytes_per_sec`: a slow downlink, on which a large answer keeps arriving long after the
    /// server sent it (it reads the server's bytes at once).
    pub async fn slow_download(upstream: SocketAddr, bytes_per_sec: u64) -> DelayProxy {
        let down = Some(bytes_per_sec.max(1));
        DelayProxy::spawn(upstream, Duration::ZERO, Rates { up: None, down }).await
    }

    async fn spawn(upstream: SocketAddr, delay: Duration, rates: Rates) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let turns = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&turns);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let shared = Arc::new(Turns {
                    count: Arc::clone(&count),
                    // The client's first message is a turn of its own.
                    heard: AtomicBool::new(true),
                });
                tokio::spawn(relay(client, server, delay, rates, shared));
            }
        });
        DelayProxy { addr, turns, task }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The client's turns so far, over every connection: each time a client sent something after
    /// the server's last answer reached it. Messages a client pipelines, sent before any answer
    /// arrives, are one turn; a client that waits for each answer before its next message takes a
    /// turn per message.
    pub fn turns(&self) -> u64 {
        self.turns.load(Ordering::SeqCst)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The pace of each direction, in bytes per second (`None`: at once).
#[derive(Debug, Clone, Copy, Default)]
struct Rates {
    up: Option<u64>,
    down: Option<u64>,
}

/// Sleeps as long as `n` bytes take at `rate` bytes per second (`None`: not at all).
async fn pace(n: usize, rate: Option<u64>) {
    if let Some(rate) = rate {
        let n = u64::try_from(n).unwrap_or(u64::MAX);
        tokio::time::sleep(Duration::from_micros(n.saturating_mul(1_000_000) / rate)).await;
    }
}

async fn relay(
    client: TcpStream,
    server: TcpStream,
    delay: Duration,
    rates: Rates,
    turns: Arc<Turns>,
) {
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = {
        let turns = Arc::clone(&turns);
        tokio::spawn(async move {
            // Small reads on a slow uplink, so that its pace is even.
            let mut buf = vec![
                0;
                if rates.up.is_some() {
                    4 * 1024
                } else {
                    64 * 1024
                }
            ];
            while let Ok(n @ 1..) = client_read.read(&mut buf).await {
                if turns.heard.swap(false, Ordering::SeqCst) {
                    turns.count.fetch_add(1, Ordering::SeqCst);
                }
                pace(n, rates.up).await;
                if server_write.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        })
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read = tokio::spawn(async move {
        let mut buf = vec![0; 64 * 1024];
        while let Ok(n @ 1..) = server_read.read(&mut buf).await {
            if tx
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
            {
                break;
            }
        }
    });
    'down: while let Some((due, bytes)) = rx.recv().await {
        tokio::time::sleep_until(due.into()).await;
        // Small writes on a slow downlink, so that its pace is even.
        let piece = if rates.down.is_some() {
            1024
        } else {
            bytes.len().max(1)
        };
        for part in bytes.chunks(piece) {
            if client_write.write_all(part).await.is_err() {
                break 'down;
            }
            pace(part.len(), rates.down).await;
        }
        turns.heard.store(true, Ordering::SeqCst);
    }
    up.abort();
    read.abort();
}
