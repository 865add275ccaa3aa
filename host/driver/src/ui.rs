//! The driver's HTTP side: the status page (`page`), a JSON API behind every table
//! (`/api/v1/…`, the same records `flint status --json` prints) and Prometheus metrics
//! (`/metrics`). Read-only. Bound to loopback unless told otherwise, and then it
//! answers only requests addressed to a loopback name (a page elsewhere cannot reach
//! it through DNS rebinding). Bound beyond it, every request must carry a credential:
//! API clients the application secret as a bearer token; a browser the UI's own token
//! (derived from the secret, never the secret), which it is given once as `?token=`
//! (the secret works there too) and keeps in an `HttpOnly` cookie, the address then
//! redirected without it. `flint history` serves the same pages from event logs through
//! [`app_routes`].

use crate::driver::Driver;
use crate::journal::Store;
use crate::page::{self, Frame};
use axum::extract::{FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use flint_proto::{ClusterStatus, JobId};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Ports tried after the one asked for when it is taken, as Spark's UI does.
pub const PORT_RETRIES: u16 = 16;

/// Requests served at once; the others wait their turn, up to [`QUEUE_WAIT`]. A live
/// page asks the event loop for a snapshot: a crowd of clients cannot crowd out the
/// loop's own work.
const CONCURRENT_REQUESTS: usize = 8;
const QUEUE_WAIT: Duration = Duration::from_secs(5);

/// The cookie a browser keeps the UI token in, once given it by `?token=`.
const TOKEN_COOKIE: &str = "flint_ui";

pub struct Ui {
    driver: Driver,
}

/// Who may ask a page server, and how many at once: every Flint page (the driver's,
/// a standalone master's) sits behind one, as a layer ([`guard`]).
pub struct Guard {
    /// What a request must show, when the page is reachable beyond loopback.
    auth: Option<Credentials>,
    permits: Semaphore,
}

impl Guard {
    /// The guard of a server bound to `bind`: beyond loopback, `secret` (or the UI
    /// token made from it) is demanded of every request.
    pub fn new(bind: SocketAddr, secret: &flint_net::Secret) -> Guard {
        let auth = (!bind.ip().is_loopback()).then(|| Credentials::new(secret));
        Guard { auth, permits: Semaphore::new(CONCURRENT_REQUESTS) }
    }
}

/// The application secret (for API clients) and the UI token made from it (for
/// browsers).
pub struct Credentials {
    secret: flint_net::Secret,
    token: flint_net::Secret,
}

impl Credentials {
    pub fn new(secret: &flint_net::Secret) -> Credentials {
        Credentials { secret: secret.clone(), token: ui_token(secret) }
    }

    fn accepts(&self, shown: &[u8]) -> bool {
        self.secret.matches(shown) || self.token.matches(shown)
    }
}

/// The status page's own credential: a browser holds this, never the secret.
pub fn ui_token(secret: &flint_net::Secret) -> flint_net::Secret {
    secret.derive("status-page")
}

/// Binds `bind`, or the next free port of the following [`PORT_RETRIES`], and serves
/// `app` there until the process ends. Returns where it listens.
pub async fn serve_on(bind: SocketAddr, app: Router) -> std::io::Result<SocketAddr> {
    let mut last = None;
    for n in 0..=PORT_RETRIES {
        let port = if bind.port() == 0 { 0 } else { bind.port().saturating_add(n) };
        match tokio::net::TcpListener::bind(SocketAddr::new(bind.ip(), port)).await {
            Ok(listener) => {
                let bound = listener.local_addr()?;
                tokio::spawn(crate::http::serve(listener, app));
                return Ok(bound);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && bind.port() != 0 => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no port")))
}

/// Binds `bind` (or one of the ports after it) and serves the status page, its JSON API
/// and metrics there until the process ends. `secret` is demanded of every request when
/// the address is not loopback.
pub async fn serve_ui(
    driver: Driver,
    bind: SocketAddr,
    secret: &flint_net::Secret,
) -> std::io::Result<SocketAddr> {
    let guard = Arc::new(Guard::new(bind, secret));
    let ui = Arc::new(Ui { driver });
    let app = app_routes("")
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn_with_state(guard, self::guard))
        .with_state(ui);
    serve_on(bind, app).await
}

/// The pages and JSON API of one application under `prefix`, whoever serves them
/// (a live driver, or `flint history`).
pub fn app_routes<S>(prefix: &str) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    View: FromRequestParts<S>,
{
    let at = |path: &str| format!("{prefix}{path}");
    Router::new()
        .route(&at("/"), get(overview))
        .route(&at("/jobs/{job}"), get(job_page))
        .route(&at("/jobs/{job}/tasks/{index}"), get(task_page))
        .route(&at("/api/v1/status"), get(status))
        .route(&at("/api/v1/executors"), get(executors))
        .route(&at("/api/v1/jobs"), get(jobs))
        .route(&at("/api/v1/jobs/{job}/tasks"), get(tasks))
        .route(&at("/api/v1/jobs/{job}/failures"), get(failures))
}

type Shared = State<Arc<Ui>>;

/// Waits for one of the server's few permits; a request that waits too long is told
/// to come back.
pub async fn limited(permits: &Semaphore, request: Request, next: Next) -> Response {
    match tokio::time::timeout(QUEUE_WAIT, permits.acquire()).await {
        Ok(Ok(_permit)) => next.run(request).await,
        _ => (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, "1")], "busy; try again\n")
            .into_response(),
    }
}

/// Lets a request through to the page when it may see it: on loopback, addressed to a
/// loopback name; beyond it, carrying the secret or the UI token.
pub async fn guard(State(ui): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let Some(auth) = &ui.auth else {
        if !addressed_to_loopback(&request) {
            return not_for_this_host();
        }
        return limited(&ui.permits, request, next).await;
    };
    let headers = request.headers();
    let bearer = headers.get(header::AUTHORIZATION).and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(TOKEN_COOKIE)?.strip_prefix('='))
        .map(str::as_bytes);
    if bearer.is_some_and(|b| auth.accepts(b)) || cookie.is_some_and(|c| auth.token.matches(c)) {
        return limited(&ui.permits, request, next).await;
    }
    // A browser is given a credential once, in the address: it gets the UI token as a
    // cookie and the same address without it, so no page, polled URL or history entry
    // carries it from then on.
    let uri = request.uri();
    let query = uri.query().unwrap_or("");
    let (given, rest): (Vec<&str>, Vec<&str>) = query.split('&').partition(|kv| kv.starts_with("token="));
    if given.iter().any(|kv| auth.accepts(&kv.as_bytes()["token=".len()..])) {
        let rest: Vec<&str> = rest.into_iter().filter(|kv| !kv.is_empty()).collect();
        let location = if rest.is_empty() {
            uri.path().to_owned()
        } else {
            format!("{}?{}", uri.path(), rest.join("&"))
        };
        let cookie = format!(
            "{TOKEN_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            String::from_utf8_lossy(auth.token.expose())
        );
        return (StatusCode::SEE_OTHER, [(header::LOCATION, location), (header::SET_COOKIE, cookie)])
            .into_response();
    }
    (
        StatusCode::UNAUTHORIZED,
        "a credential is required: the application secret as a bearer token, or ?token=\n",
    )
        .into_response()
}

/// The answer to a request that names another host than loopback.
pub(crate) fn not_for_this_host() -> Response {
    (StatusCode::FORBIDDEN, "this page answers only to localhost, 127.0.0.1 or [::1]\n").into_response()
}

/// Whether a request names this host by a loopback name (its `Host` header): a page
/// served by another site that rebinds its name to 127.0.0.1 sends its own name.
pub(crate) fn addressed_to_loopback(request: &Request) -> bool {
    let Some(host) = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()) else {
        // HTTP/1.0 without a Host: not from a browser.
        return true;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.to_ascii_lowercase().ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Where a page's records come from: a live driver, or an application's event log.
#[derive(Clone)]
pub enum View {
    Live(Driver),
    Logged { store: Arc<Store>, base: String },
}

impl FromRequestParts<Arc<Ui>> for View {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(_: &mut Parts, ui: &Arc<Ui>) -> Result<View, Self::Rejection> {
        Ok(View::Live(ui.driver.clone()))
    }
}

impl View {
    async fn status(&self) -> ClusterStatus {
        match self {
            View::Live(driver) => driver.snapshot().await,
            View::Logged { store, .. } => store.status(),
        }
    }

    fn with_store<R>(&self, f: impl FnOnce(&Store) -> R) -> R {
        match self {
            View::Live(driver) => f(&driver.store()),
            View::Logged { store, .. } => f(store),
        }
    }

    fn render(&self, title: &str, fragment: bool, main: String) -> Response {
        if fragment {
            return Html(main).into_response();
        }
        let (base, app_id, live, source, driver) = match self {
            View::Live(driver) => ("", driver.app_id().to_owned(), true, "live", true),
            View::Logged { store, base } => {
                let running = store.ended_ms.is_none();
                let source = if running { "history; still running" } else { "history; finished" };
                (base.as_str(), store.app_id.clone(), running, source, false)
            }
        };
        let frame = Frame { base, app_id: &app_id, live, source, driver };
        Html(page::document(&frame, title, &main)).into_response()
    }

    fn frame<R>(&self, f: impl FnOnce(&Frame) -> R) -> R {
        let (base, app_id) = match self {
            View::Live(driver) => (String::new(), driver.app_id().to_owned()),
            View::Logged { store, base } => (base.clone(), store.app_id.clone()),
        };
        f(&Frame { base: &base, app_id: &app_id, live: true, source: "", driver: false })
    }
}

#[derive(serde::Deserialize, Default)]
pub struct PageQuery {
    #[serde(default)]
    fragment: Option<String>,
    #[serde(default)]
    from: Option<usize>,
}

#[derive(serde::Deserialize)]
pub struct JobPath {
    job: JobId,
}

#[derive(serde::Deserialize)]
pub struct TaskPath {
    job: JobId,
    index: u32,
}

fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, format!("{what}\n")).into_response()
}

async fn overview(view: View, Query(q): Query<PageQuery>) -> Response {
    let status = view.status().await;
    let times: HashMap<JobId, (u64, Option<u64>)> = view.with_store(|store| {
        status
            .jobs
            .iter()
            .filter_map(|j| store.job(j.job).map(|e| (j.job, (e.started_ms, e.ended_ms))))
            .collect()
    });
    let main = view.frame(|frame| page::overview(frame, &status, &|job| times.get(&job).copied()));
    view.render("Executors and jobs", q.fragment.is_some(), main)
}

async fn job_page(view: View, Path(JobPath { job }): Path<JobPath>, Query(q): Query<PageQuery>) -> Response {
    // Copied under the store's lock (the event loop takes it each turn), rendered after.
    let from = q.from.unwrap_or(0);
    let window = view.with_store(|store| {
        store.job(job).map(|e| {
            e.window(|tasks| {
                tasks.iter().skip(from).take(page::TASKS_PER_PAGE).map(|(i, t)| (*i, t.clone())).collect()
            })
        })
    });
    let main = window.map(|(entry, launched)| view.frame(|f| page::job(f, &entry, from, launched)));
    match main {
        Some(main) => view.render(&format!("Job {job}"), q.fragment.is_some(), main),
        None => {
            not_found(format!("no job {job} (finished jobs beyond flint.driver.retainedJobs are forgotten)"))
        }
    }
}

async fn task_page(
    view: View,
    Path(TaskPath { job, index }): Path<TaskPath>,
    Query(q): Query<PageQuery>,
) -> Response {
    let window = view.with_store(|store| {
        store
            .job(job)
            .map(|e| e.window(|tasks| tasks.get(&index).map(|t| (index, t.clone())).into_iter().collect()))
    });
    let main = window.map(|(entry, _)| view.frame(|f| page::task(f, &entry, index)));
    match main {
        Some(main) => view.render(&format!("Job {job}, task {index}"), q.fragment.is_some(), main),
        None => not_found(format!("no job {job}")),
    }
}

async fn status(view: View) -> Json<ClusterStatus> {
    Json(view.status().await)
}

async fn executors(view: View) -> Response {
    Json(view.status().await.executors).into_response()
}

async fn jobs(view: View) -> Response {
    Json(view.status().await.jobs).into_response()
}

/// Most task records one request returns.
const MAX_TASKS_PER_REQUEST: usize = 100_000;

#[derive(serde::Deserialize)]
pub struct Range {
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    length: Option<usize>,
}

/// A job's launched tasks, by index: `?offset=&length=` (at most 100,000 at once).
async fn tasks(view: View, Path(JobPath { job }): Path<JobPath>, Query(range): Query<Range>) -> Response {
    let length = range.length.unwrap_or(MAX_TASKS_PER_REQUEST).min(MAX_TASKS_PER_REQUEST);
    let records = view.with_store(|store| {
        store.job(job).map(|e| e.tasks.values().skip(range.offset).take(length).cloned().collect::<Vec<_>>())
    });
    match records {
        Some(records) => Json(records).into_response(),
        None => not_found(format!("no job {job}")),
    }
}

/// A job's failed attempts, in the order they were reported.
async fn failures(view: View, Path(JobPath { job }): Path<JobPath>) -> Response {
    match view.with_store(|store| store.job(job).map(|e| e.failures.clone())) {
        Some(failures) => Json(failures).into_response(),
        None => not_found(format!("no job {job}")),
    }
}

async fn metrics(State(ui): Shared) -> Response {
    let status = ui.driver.snapshot().await;
    let mut text = crate::metrics::render_metrics(&status);
    ui.driver.durations().render(&mut text);
    ui.driver.peer_metrics().render(&status, &mut text);
    let name = "flint_input_reads_refused_total";
    let _ = writeln!(text, "# HELP {name} flint:// reads the driver refused (no valid token for the file).");
    let _ = writeln!(text, "# TYPE {name} counter\n{name} {}", ui.driver.data().refused());
    if let Some(dropped) = ui.driver.events_dropped() {
        let name = "flint_event_log_dropped_events_total";
        let _ =
            writeln!(text, "# HELP {name} Events the event log had no room for (its writer fell behind).");
        let _ = writeln!(text, "# TYPE {name} counter\n{name} {dropped}");
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
