//! The process id a server gave a connection at start-up (its `BackendKeyData`), which tells
//! whether the connection leads straight to a server session or through a pooler.
//!
//! A pooler (PgBouncer; any that shares server connections, a client being bound to none when it
//! starts) gives its clients keys of its own and runs their statements
//! on server connections it shares: there, the session that answered one statement is not the
//! connection's, and ending it would end another client's. So the relay acts on a connection's
//! server session (watching it, ending it after a stall) only when the session that answers is
//! the one the start-up named.
//!
//! tokio-postgres keeps the key to itself but writes it into the cancel request it sends; that
//! request is written here into memory (never to a server) and the process id read back from it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio_postgres::Client;
use tokio_postgres::tls::{ChannelBinding, TlsConnect, TlsStream};

/// A cancel request: length 16, the request code 80877102, the process id, the secret key.
const CANCEL_HEAD: [u8; 8] = [0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e];

/// The process id `client`'s server gave at start-up; `None` when it cannot be read.
pub(crate) async fn startup_pid(client: &Client) -> Option<i32> {
    let (ours, mut written) = tokio::io::duplex(256);
    // Ready for a TLS request (sslmode prefer or stronger): "S", go ahead; the TLS below is none.
    written.write_all(b"S").await.ok()?;
    client
        .cancel_token()
        .cancel_query_raw(ours, NoTlsHere)
        .await
        .ok()?;
    let mut bytes = Vec::new();
    written.read_to_end(&mut bytes).await.ok()?;
    pid_of(&bytes)
}

/// The process id in the cancel request that ends `bytes` (after a TLS request, if any).
fn pid_of(bytes: &[u8]) -> Option<i32> {
    let request = bytes.get(bytes.len().checked_sub(16)?..)?;
    if request[..8] != CANCEL_HEAD {
        return None;
    }
    Some(i32::from_be_bytes(request[8..12].try_into().ok()?))
}

/// A "TLS" that leaves the stream as it is: the request goes to memory.
struct NoTlsHere;

impl<S: AsyncRead + AsyncWrite + Unpin> TlsConnect<S> for NoTlsHere {
    type Stream = Plain<S>;
    type Error = io::Error;
    type Future = std::future::Ready<io::Result<Plain<S>>>;

    fn connect(self, stream: S) -> Self::Future {
        std::future::ready(Ok(Plain(stream)))
    }
}

/// The stream, unchanged.
struct Plain<S>(S);

impl<S: AsyncRead + Unpin> AsyncRead for Plain<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Plain<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for Plain<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pid_is_read_from_a_cancel_request_with_or_without_a_tls_request_before_it() {
        let cancel = [
            &CANCEL_HEAD[..],
            &4242i32.to_be_bytes(),
            &7i32.to_be_bytes(),
        ]
        .concat();
        assert_eq!(pid_of(&cancel), Some(4242));
        let tls_request = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
        assert_eq!(pid_of(&[&tls_request[..], &cancel].concat()), Some(4242));
        assert_eq!(pid_of(&cancel[1..]), None);
        assert_eq!(pid_of(&[0; 16]), None);
    }
}
