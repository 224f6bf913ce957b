//! A minimal HTTP endpoint serving the relay's metrics at `/metrics`.

use std::net::SocketAddr;

use outbox_core::CancellationToken;
use outbox_core::RelayMetrics;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Binds `addr` (so a bad address fails at start-up) and serves until `shutdown`.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, crate::Failure> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot serve metrics on {addr}: {e}").into())
}

/// Serves `GET /metrics` on `listener` until `shutdown` is cancelled.
pub async fn serve(listener: TcpListener, metrics: RelayMetrics, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(answer(stream, metrics.clone()));
                }
            }
        }
    }
}

async fn answer(mut stream: TcpStream, metrics: RelayMetrics) {
    let mut request = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    // Read the request head (bounded).
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 * 1024 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let line = request.split(|&b| b == b'\r').next().unwrap_or_default();
    let (status, content_type, body) = if line.starts_with(b"GET /metrics ") {
        (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        )
    } else {
        ("404 Not Found", "text/plain", "try /metrics\n".to_string())
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}
