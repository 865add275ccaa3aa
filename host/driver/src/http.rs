//! The door of the driver's HTTP servers (the status page, `flint history`): at most
//! [`MAX_CONNECTIONS`] connections, each closed when its request headers take longer
//! than [`HEADER_TIMEOUT`] to arrive, idle keep-alive waits included. At the bound, the
//! connection idle longest is closed to make room (as a browser reconnects), so a page
//! keeps working while idle sockets fill the server; one that only holds requests in
//! progress turns the new one away.

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tower_service::Service as _;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// The most a request's headers may take, from the connection's start or the end of
/// its last request.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The open connections, by the order they came in.
#[derive(Default)]
struct Open {
    next: u64,
    conns: BTreeMap<u64, Conn>,
}

struct Conn {
    /// Requests under way on it.
    busy: Arc<AtomicUsize>,
    /// When its last request ended (or it opened).
    idle_since: Arc<Mutex<Instant>>,
    close: Option<oneshot::Sender<()>>,
}

/// Serves `app` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) {
    let open = Arc::new(Mutex::new(Open::default()));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, say: wait a moment rather than spin.
                tracing::warn!(error = %e, "accepting an HTTP connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some((id, busy, idle_since, closed)) = admit(&open) else {
            // Every place holds a request in progress: this one is turned away.
            drop(stream);
            continue;
        };
        let app = app.clone();
        let open = open.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
                let (mut app, busy, idle_since) = (app.clone(), busy.clone(), idle_since.clone());
                // Who asks, for the guard's count of wrong credentials.
                request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
                busy.fetch_add(1, Ordering::SeqCst);
                async move {
                    let response = app.call(request).await;
                    *idle_since.lock().expect("idle lock") = Instant::now();
                    busy.fetch_sub(1, Ordering::SeqCst);
                    response
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = closed => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            open.lock().expect("open lock").conns.remove(&id);
        });
    }
}

type Admitted = (u64, Arc<AtomicUsize>, Arc<Mutex<Instant>>, oneshot::Receiver<()>);

/// A place for a new connection: a free one, or the one idle longest, closed for it.
fn admit(open: &Mutex<Open>) -> Option<Admitted> {
    let mut open = open.lock().expect("open lock");
    if open.conns.len() >= MAX_CONNECTIONS {
        let idlest = open
            .conns
            .iter()
            .filter(|(_, c)| c.busy.load(Ordering::SeqCst) == 0 && c.close.is_some())
            .min_by_key(|(_, c)| *c.idle_since.lock().expect("idle lock"))
            .map(|(id, _)| *id)?;
        let conn = open.conns.get_mut(&idlest).expect("just found");
        if let Some(close) = conn.close.take() {
            let _ = close.send(());
        }
        // It leaves the table once its task ends; the table may be one over meanwhile.
    }
    let id = open.next;
    open.next += 1;
    let (close, closed) = oneshot::channel();
    let busy = Arc::new(AtomicUsize::new(0));
    let idle_since = Arc::new(Mutex::new(Instant::now()));
    open.conns.insert(id, Conn { busy: busy.clone(), idle_since: idle_since.clone(), close: Some(close) });
    Some((id, busy, idle_since, closed))
}
