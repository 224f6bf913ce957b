//! The accept loop and the HTTP/1.1 connections.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

use crate::State;

/// Commands to the accept loop.
pub(crate) enum Ctrl {
    /// Close the listener and every connection.
    Stop(oneshot::Sender<()>),
    /// Listen again on the same address.
    Resume(oneshot::Sender<std::io::Result<()>>),
}

/// Accepts connections until the task is aborted (the fixture is dropped). Every connection
/// watches `epoch`: a bump (stop) or the sender's drop (the task ends) closes it.
pub(crate) async fn run(
    listener: TcpListener,
    addr: SocketAddr,
    state: Arc<State>,
    mut ctrl: mpsc::UnboundedReceiver<Ctrl>,
) {
    let (epoch, _) = watch::channel(0u64);
    let mut listener = Some(listener);
    loop {
        let command = match &listener {
            Some(l) => tokio::select! {
                accepted = l.accept() => {
                    if let Ok((stream, _)) = accepted {
                        state.connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        serve_connection(stream, state.clone(), epoch.subscribe());
                    }
                    continue;
                }
                command = ctrl.recv() => command,
            },
            None => ctrl.recv().await,
        };
        match command {
            // The fixture is gone.
            None => return,
            Some(Ctrl::Stop(ack)) => {
                listener = None;
                epoch.send_modify(|e| *e += 1);
                let _ = ack.send(());
            }
            Some(Ctrl::Resume(ack)) => {
                if listener.is_some() {
                    let _ = ack.send(Ok(()));
                    continue;
                }
                let result = rebind(addr).await;
                let _ = ack.send(result.as_ref().map(|_| ()).map_err(clone_io_error));
                listener = result.ok();
            }
        }
    }
}

fn clone_io_error(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}

/// Binds `addr` again, retrying briefly (the old socket may take a moment to go).
async fn rebind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let mut last = None;
    for _ in 0..50 {
        match TcpListener::bind(addr).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(last.expect("at least one attempt"))
}

fn serve_connection(
    stream: tokio::net::TcpStream,
    state: Arc<State>,
    mut epoch: watch::Receiver<u64>,
) {
    let _ = stream.set_nodelay(true);
    tokio::spawn(async move {
        let service = service_fn(move |req| crate::protocol::handle(state.clone(), req));
        let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
        tokio::select! {
            _ = connection => {}
            // A stop (or the fixture's end) drops the connection, and with it any call in flight.
            _ = epoch.changed() => {}
        }
    });
}
