//! How a pool built on a [`PgConnector`] opens its connections, and what becomes of the errors
//! deadpool needs in its own type.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::Client;

use super::connector::{PgConnector, RawError};
use tokio::time::Instant;

/// The pool's way of opening connections: through the connector.
pub(super) struct PoolConnect(pub(super) PgConnector);

impl deadpool_postgres::Connect for PoolConnect {
    fn connect(
        &self,
        _pg_config: &tokio_postgres::Config,
    ) -> futures::future::BoxFuture<
        '_,
        Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>,
    > {
        Box::pin(async move {
            let gate = self.0.creation_gate();
            if let Some(gate) = gate {
                // Its start-up, then the pool's hook (`harden::NEW_CONNECTION_ANSWER`).
                let bound = self.0.attempt_timeout() + super::harden::NEW_CONNECTION_ANSWER;
                if let Err(wait) = gate.admit(Instant::now(), bound) {
                    let message = format!(
                        "new database connections stall (held after they were opened); the \
                         next is opened in {:.1} s",
                        wait.as_secs_f64()
                    );
                    return Err(error_saying(message).await);
                }
            }
            let (client, connection) = match self.0.raw_connect().await {
                Ok(c) => c,
                Err(RawError::Pg(e)) => return Err(e),
                Err(RawError::Password(e)) => {
                    let message = format!("no password for the new connection: {e}");
                    tracing::warn!(error = %message, "cannot open a database connection");
                    return Err(error_saying(message).await);
                }
                Err(RawError::Timeout(limit)) => {
                    if let Some(gate) = gate {
                        gate.stalled(Instant::now());
                    }
                    tracing::warn!(server = %self.0.target(), timeout_ms = limit.as_millis() as u64,
                        "cannot open a database connection: no answer in time");
                    return Err(tokio_postgres::Error::__private_api_timeout());
                }
            };
            let task = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    connection_ended(&e);
                }
            });
            Ok((client, task))
        })
    }
}

/// A connection's end with an error (the server shut down or restarted, the network cut it): at
/// `debug`. Whoever uses the connection next learns it from its call and reports it (the relay's
/// outage lines); a warning per pooled connection only multiplied one restart into many lines.
pub(super) fn connection_ended(e: &tokio_postgres::Error) {
    match e.as_db_error() {
        Some(db) => tracing::debug!(
            sqlstate = db.code().code(), error = %db.message(), "database connection closed"
        ),
        None => tracing::debug!(error = %crate::error_chain(e), "database connection closed"),
    }
}

/// deadpool wants a `tokio_postgres::Error`, which has no public constructor: get one carrying
/// `message` by "connecting" over a stream that fails with it.
async fn error_saying(message: String) -> tokio_postgres::Error {
    let mut config = tokio_postgres::Config::new();
    config
        .user("outbox")
        .ssl_mode(tokio_postgres::config::SslMode::Disable);
    match config
        .connect_raw(FailingStream(message), tokio_postgres::NoTls)
        .await
    {
        Err(e) => e,
        // Cannot happen (the start-up message cannot be written); still no panic.
        Ok(_) => tokio_postgres::Error::__private_api_timeout(),
    }
}

/// A stream whose every read and write fails with one message.
struct FailingStream(String);

impl FailingStream {
    fn error(&self) -> io::Error {
        io::Error::other(self.0.clone())
    }
}

impl AsyncRead for FailingStream {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Err(self.error()))
    }
}

impl AsyncWrite for FailingStream {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, _: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(self.error()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Err(self.error()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
