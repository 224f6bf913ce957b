//! A minimal HTTP endpoint serving the relay's metrics at `/metrics`.
//!
//! Hardened against clients that could otherwise exhaust the relay's file descriptors or spin a
//! core: at most [`MAX_CONNECTIONS`] connections at once (further ones wait in the listen backlog),
//! the whole request head must arrive within [`HEAD_TIMEOUT`] (a slow-loris client is cut off),
//! the answer must be taken within [`WRITE_TIMEOUT`], and failed accepts (e.g. out of file
//! descriptors) back off instead of looping hot.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::CancellationToken;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Connections served at once; more wait in the listen backlog until one finishes.
pub const MAX_CONNECTIONS: usize = 32;
/// The time a client has to send its whole request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// The time a client has to take the answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head read; the rest is ignored.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The first and the longest pause after a failed accept.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// The server's limits (the constants above; shorter in tests).
#[derive(Debug, Clone, Copy)]
struct Limits {
    connections: usize,
    head_timeout: Duration,
    write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: MAX_CONNECTIONS,
            head_timeout: HEAD_TIMEOUT,
            write_timeout: WRITE_TIMEOUT,
        }
    }
}

/// Binds `addr` (so a bad address fails at start-up) and serves until `shutdown`.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, crate::Failure> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot serve metrics on {addr}: {e}").into())
}

/// What `/metrics` answers: the text exposition, made fresh for each request.
pub type Encode = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves `GET /metrics` (the text `encode` makes) on `listener` until `shutdown` is cancelled.
pub async fn serve(listener: TcpListener, encode: Encode, shutdown: CancellationToken) {
    serve_with(listener, encode, shutdown, Limits::default()).await
}

/// Joins OpenMetrics expositions of distinct metric families into one: each one's `# EOF` line
/// dropped, one at the end.
pub fn join(parts: &[String]) -> String {
    let mut out = String::new();
    for part in parts {
        out.push_str(part.strip_suffix("# EOF\n").unwrap_or(part));
    }
    out.push_str("# EOF\n");
    out
}

async fn serve_with(
    listener: TcpListener,
    metrics: Encode,
    shutdown: CancellationToken,
    limits: Limits,
) {
    let permits = Arc::new(Semaphore::new(limits.connections));
    let mut backoff = ACCEPT_BACKOFF.0;
    loop {
        // A free slot first: beyond the limit, connections wait in the kernel's backlog.
        let permit = tokio::select! {
            _ = shutdown.cancelled() => return,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                backoff = ACCEPT_BACKOFF.0;
                let metrics = metrics.clone();
                tokio::spawn(async move {
                    answer(stream, metrics, limits).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // E.g. EMFILE: the error repeats at once; do not spin on it.
                tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64,
                    "metrics endpoint: accept failed");
                drop(permit);
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF.1);
            }
        }
    }
}

/// Reads the request head (bounded in size and time) and answers it.
async fn answer(mut stream: TcpStream, metrics: Encode, limits: Limits) {
    let mut request = Vec::with_capacity(1024);
    let read_head = async {
        let mut buf = [0u8; 1024];
        while request.len() < MAX_HEAD_BYTES {
            // Only what arrived since the last look (and the 3 bytes before it) is searched: a
            // client sending one byte at a time must not cost a scan of the whole head each time.
            let from = request.len().saturating_sub(3);
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
            if request[from..].windows(4).any(|w| w == b"\r\n\r\n") {
                return true;
            }
        }
        true
    };
    // One deadline for the whole head, not per read: trickling bytes does not extend it.
    if !matches!(
        tokio::time::timeout(limits.head_timeout, read_head).await,
        Ok(true)
    ) {
        return; // closed, failed, or too slow: drop the connection
    }
    let line = request.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    // The path without its query (Prometheus' `params:` adds one).
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, content_type, body) = match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics(),
        ),
        (_, b"/metrics") => (
            "405 Method Not Allowed\r\nallow: GET, HEAD",
            "text/plain",
            "GET /metrics\n".to_string(),
        ),
        _ => ("404 Not Found", "text/plain", "try /metrics\n".to_string()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let head_only = method == b"HEAD";
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        if !head_only {
            stream.write_all(body.as_bytes()).await?;
        }
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(limits.write_timeout, write).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const SHORT: Limits = Limits {
        connections: 8,
        head_timeout: Duration::from_millis(500),
        write_timeout: Duration::from_millis(500),
    };

    async fn start(limits: Limits) -> (SocketAddr, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let metrics = outbox_core::RelayMetrics::new();
        tokio::spawn(serve_with(
            listener,
            Arc::new(move || metrics.encode()),
            shutdown.clone(),
            limits,
        ));
        (addr, shutdown)
    }

    async fn get(addr: SocketAddr, path: &str) -> String {
        request(addr, "GET", path).await
    }

    async fn request(addr: SocketAddr, method: &str, path: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("{method} {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).await.unwrap();
        text
    }

    /// Whether the server closed `s` (EOF or reset) within `within`.
    async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
        let mut buf = [0u8; 64];
        matches!(
            tokio::time::timeout(within, s.read(&mut buf)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    #[test]
    fn join_keeps_one_eof_at_the_end() {
        let joined = join(&["a 1\n# EOF\n".into(), "b 2\n# EOF\n".into()]);
        assert_eq!(joined, "a 1\nb 2\n# EOF\n");
    }

    #[tokio::test]
    async fn serves_metrics_and_404s_the_rest() {
        let (addr, shutdown) = start(SHORT).await;
        let ok = get(addr, "/metrics").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(ok.contains("outbox_relay_errors_total"), "{ok}");
        assert!(get(addr, "/").await.starts_with("HTTP/1.1 404"));
        assert!(get(addr, "/metricsx").await.starts_with("HTTP/1.1 404"));
        shutdown.cancel();
    }

    /// Prometheus' `params:` adds a query string; a `HEAD` probe gets the head only; other methods
    /// are told which are allowed (all were 404s; found by a black-box run).
    #[tokio::test]
    async fn a_query_string_and_head_are_served_other_methods_refused() {
        let (addr, shutdown) = start(SHORT).await;
        let ok = get(addr, "/metrics?module=outbox&x=1").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(ok.contains("outbox_relay_errors_total"), "{ok}");
        let head = request(addr, "HEAD", "/metrics").await;
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(head.ends_with("\r\n\r\n"), "no body: {head}");
        assert!(head.contains("content-length: "), "{head}");
        let post = request(addr, "POST", "/metrics").await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        assert!(post.contains("allow: GET, HEAD"), "{post}");
        shutdown.cancel();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_idle_connections_do_not_stop_it_answering_and_are_closed() {
        let (addr, shutdown) = start(SHORT).await;
        // Far more idle connections than the limit (8).
        let mut idle = Vec::new();
        for _ in 0..100 {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let started = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(10), get(addr, "/metrics"))
            .await
            .expect("answered despite 100 idle connections");
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        // 100 idle connections, 8 at a time, 0.5 s each: bounded, not forever.
        assert!(
            started.elapsed() < Duration::from_secs(9),
            "{:?}",
            started.elapsed()
        );
        // Every idle connection was closed by the server.
        for s in &mut idle {
            assert!(closed_within(s, Duration::from_secs(10)).await);
        }
        shutdown.cancel();
    }

    #[tokio::test]
    async fn a_slow_loris_is_cut_off_at_the_head_deadline() {
        let (addr, shutdown) = start(SHORT).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        let started = Instant::now();
        // One header byte every 100 ms: each read succeeds, the whole head never completes.
        let mut cut_off = false;
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if s.write_all(b"x").await.is_err() || closed_within(&mut s, Duration::ZERO).await {
                cut_off = true;
                break;
            }
        }
        if !cut_off {
            cut_off = closed_within(&mut s, Duration::from_secs(1)).await;
        }
        assert!(cut_off, "the slow client was not disconnected");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "cut off at the deadline (0.5 s), not later: {:?}",
            started.elapsed()
        );
        // And the server still answers.
        assert!(get(addr, "/metrics").await.starts_with("HTTP/1.1 200 OK"));
        shutdown.cancel();
    }
}
