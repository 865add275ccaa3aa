//! The driver's HTTP side: the status page (`page`), a JSON API behind every table
//! (`/api/v1/…`, the same records `flint status --json` prints) and Prometheus metrics
//! (`/metrics`). Bound to loopback unless told otherwise, and then it answers only
//! requests addressed to a loopback name (a page elsewhere cannot reach it through DNS
//! rebinding). Bound beyond it, every request must carry a credential: API clients the
//! application secret as a bearer token; a browser the UI's own token (derived from the
//! secret, never the secret), which it is given once as `?token=` (the secret works
//! there too) and keeps in an `HttpOnly`, `SameSite=Strict` cookie, the address then
//! redirected without it. The UI token is only ever a cookie: as a bearer it is
//! refused (a browser sends it to every port of the host). Beyond loopback a secret
//! shorter than [`MIN_SECRET`] is refused at start, and a peer that shows
//! [`FAILURES_ALLOWED`] wrong credentials within [`FAILURE_WINDOW`] is answered 429,
//! unchecked, until the window ends.
//!
//! Reading needs no credential on loopback; changing anything (cancelling a job) needs
//! one everywhere, and a browser's form must also carry the page's form token and come
//! from the page's own origin, so no other site can post it. `flint history` serves the
//! same pages from event logs through [`app_routes`], read-only.

use crate::driver::Driver;
use crate::journal::Store;
use crate::page::{self, Frame};
use axum::extract::{Form, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use flint_proto::{ClusterStatus, JobId};
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

/// The shortest secret a page reachable from other hosts is guarded with.
pub const MIN_SECRET: usize = 16;
/// Wrong credentials one peer may show within [`FAILURE_WINDOW`] before the rest of the
/// window is refused, unchecked.
pub const FAILURES_ALLOWED: u32 = 10;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(10);
/// Peers whose failures are counted one by one; past them, the rest share one count.
const FAILURES_TRACKED: usize = 4096;

pub struct Ui {
    driver: Driver,
    /// The form token the guard checks on a browser's posts.
    form: String,
}

/// Who may ask a page server, and how many at once: every Flint page (the driver's,
/// a standalone master's) sits behind one, as a layer ([`guard`]).
pub struct Guard {
    /// What a request shows to read beyond loopback, and to act anywhere.
    auth: Credentials,
    /// Reachable beyond loopback: every request must show a credential.
    required: bool,
    permits: Semaphore,
    failures: std::sync::Mutex<Failures>,
}

impl Guard {
    /// The guard of a server bound to `bind`: beyond loopback, `secret` (or the UI
    /// token made from it) is demanded of every request, and must be at least
    /// [`MIN_SECRET`] long (a short one is guessed from anywhere).
    pub fn new(bind: SocketAddr, secret: &flint_net::Secret) -> std::io::Result<Guard> {
        let required = !bind.ip().is_loopback();
        if required && secret.expose().len() < MIN_SECRET {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the page at {bind} is reachable from other hosts and its secret has {} bytes: use one of at least {MIN_SECRET} (a driver started without one makes one of 64)",
                    secret.expose().len()
                ),
            ));
        }
        Ok(Guard {
            auth: Credentials::new(secret),
            required,
            permits: Semaphore::new(CONCURRENT_REQUESTS),
            failures: Default::default(),
        })
    }
}

/// Wrong credentials by peer address, in windows of [`FAILURE_WINDOW`].
#[derive(Default)]
struct Failures {
    by_peer: std::collections::HashMap<std::net::IpAddr, (u32, std::time::Instant)>,
}

impl Failures {
    /// Where `ip`'s failures are counted: its own entry, or once [`FAILURES_TRACKED`]
    /// peers are, one shared by the rest.
    fn key(&mut self, ip: std::net::IpAddr, now: std::time::Instant) -> std::net::IpAddr {
        if self.by_peer.len() >= FAILURES_TRACKED && !self.by_peer.contains_key(&ip) {
            self.by_peer.retain(|_, (_, since)| now.duration_since(*since) < FAILURE_WINDOW);
            if self.by_peer.len() >= FAILURES_TRACKED {
                return std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED);
            }
        }
        ip
    }

    /// Whether `ip` has used up its window: until it ends, nothing it shows is checked.
    fn blocked(&mut self, ip: std::net::IpAddr, now: std::time::Instant) -> Option<Duration> {
        let key = self.key(ip, now);
        let &(count, since) = self.by_peer.get(&key)?;
        let left = FAILURE_WINDOW.checked_sub(now.duration_since(since))?;
        (count >= FAILURES_ALLOWED).then_some(left)
    }

    fn note(&mut self, ip: std::net::IpAddr, now: std::time::Instant) {
        let key = self.key(ip, now);
        let entry = self.by_peer.entry(key).or_insert((0, now));
        if now.duration_since(entry.1) >= FAILURE_WINDOW {
            *entry = (0, now);
        }
        entry.0 += 1;
    }
}

/// How a request proved it may act on the application (the guard adds it to every
/// request that showed a credential).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// The secret as a bearer token: an API client, which no other site's page can
    /// make a browser send.
    Bearer,
    /// The UI token's cookie: a browser, whose forms must also carry the form token.
    Cookie,
}

/// The application secret (for API clients), the UI token made from it (for
/// browsers) and the form token the pages put in their forms.
pub struct Credentials {
    secret: flint_net::Secret,
    token: flint_net::Secret,
    form: String,
}

impl Credentials {
    pub fn new(secret: &flint_net::Secret) -> Credentials {
        let form = String::from_utf8_lossy(secret.derive("status-page-form").expose()).into_owned();
        Credentials { secret: secret.clone(), token: ui_token(secret), form }
    }

    /// What `?token=` takes: the secret, or the UI token a browser was given before.
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
    let guard = Arc::new(Guard::new(bind, secret)?);
    let ui = Arc::new(Ui { driver, form: guard.auth.form.clone() });
    let app = app_routes("")
        .route("/metrics", get(metrics))
        .route("/api/v1/jobs/{job}/cancel", post(cancel_api))
        .route("/jobs/{job}/cancel", post(cancel_form))
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
        .route(&at("/config"), get(config_page))
        .route(&at("/api/v1/config"), get(config))
        .route(&at("/api/v1/jobs/{job}/attempts"), get(attempts))
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
pub async fn guard(State(ui): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    let auth = &ui.auth;
    if !ui.required && !addressed_to_loopback(&request) {
        return not_for_this_host();
    }
    let headers = request.headers();
    let bearer = headers.get(header::AUTHORIZATION).and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(TOKEN_COOKIE)?.strip_prefix('='))
        .map(str::as_bytes);
    let uri = request.uri();
    let query = uri.query().unwrap_or("");
    let (given, rest): (Vec<&str>, Vec<&str>) = query.split('&').partition(|kv| kv.starts_with("token="));
    // A peer that keeps guessing is not checked again until its window ends.
    let peer = request.extensions().get::<axum::extract::ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let now = std::time::Instant::now();
    let showed_any = bearer.is_some() || cookie.is_some() || !given.is_empty();
    if showed_any
        && let Some(ip) = peer
        && let Some(left) = ui.failures.lock().expect("failures lock").blocked(ip, now)
    {
        let wait = (left.as_secs() + 1).to_string();
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, wait)],
            "too many wrong credentials; wait\n",
        )
            .into_response();
    }
    let shown = match (bearer, cookie) {
        (Some(b), _) if auth.secret.matches(b) => Some(Shown::Bearer),
        (_, Some(c)) if auth.token.matches(c) => Some(Shown::Cookie),
        _ => None,
    };
    if let Some(shown) = shown {
        request.extensions_mut().insert(shown);
        return limited(&ui.permits, request, next).await;
    }
    // A browser is given a credential once, in the address: it gets the UI token as a
    // cookie and the same address without it, so no page, polled URL or history entry
    // carries it from then on.
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
    if showed_any && let Some(ip) = peer {
        ui.failures.lock().expect("failures lock").note(ip, now);
    }
    if !ui.required {
        // Loopback: anyone here may read, as Spark's UI; acting needs a credential.
        return limited(&ui.permits, request, next).await;
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
    /// A running driver's; `form` is the form token when the request showed a
    /// credential (its pages may offer to act).
    Live {
        driver: Driver,
        form: Option<String>,
    },
    Logged {
        store: Arc<Store>,
        base: String,
    },
}

impl FromRequestParts<Arc<Ui>> for View {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, ui: &Arc<Ui>) -> Result<View, Self::Rejection> {
        let form = parts.extensions.get::<Shown>().map(|_| ui.form.clone());
        Ok(View::Live { driver: ui.driver.clone(), form })
    }
}

impl View {
    async fn status(&self) -> ClusterStatus {
        match self {
            View::Live { driver, .. } => driver.snapshot().await,
            View::Logged { store, .. } => store.status(),
        }
    }

    fn with_store<R>(&self, f: impl FnOnce(&Store) -> R) -> R {
        match self {
            View::Live { driver, .. } => f(&driver.store()),
            View::Logged { store, .. } => f(store),
        }
    }

    fn render(&self, title: &str, fragment: bool, main: String) -> Response {
        if fragment {
            return Html(main).into_response();
        }
        let (base, app_id, live, source, driver) = match self {
            View::Live { driver, .. } => ("", driver.app_id().to_owned(), true, "live", true),
            View::Logged { store, base } => {
                let running = store.ended_ms.is_none();
                let source = if running { "history; still running" } else { "history; finished" };
                (base.as_str(), store.app_id.clone(), running, source, false)
            }
        };
        let frame = Frame { base, app_id: &app_id, live, source, driver, may_act: None };
        Html(page::document(&frame, title, &main)).into_response()
    }

    fn frame<R>(&self, f: impl FnOnce(&Frame) -> R) -> R {
        let (base, app_id, may_act) = match self {
            View::Live { driver, form } => (String::new(), driver.app_id().to_owned(), form.as_deref()),
            View::Logged { store, base } => (base.clone(), store.app_id.clone(), None),
        };
        f(&Frame { base: &base, app_id: &app_id, live: true, source: "", driver: false, may_act })
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
    let main = view.frame(|frame| page::overview(frame, &status));
    view.render("Executors and jobs", q.fragment.is_some(), main)
}

/// The application's configuration, redacted, as its event log's start holds it.
async fn config_page(view: View, Query(q): Query<PageQuery>) -> Response {
    let main = view.with_store(|store| page::config(&store.flint_version, &store.config));
    view.render("Configuration", q.fragment.is_some(), main)
}

async fn config(view: View) -> Response {
    Json(view.with_store(|store| store.config.clone())).into_response()
}

/// A job's attempts as its timeline draws them, by task and attempt.
async fn attempts(view: View, Path(JobPath { job }): Path<JobPath>) -> Response {
    let spans =
        view.with_store(|store| store.job(job).map(|e| e.attempts.values().cloned().collect::<Vec<_>>()));
    match spans {
        Some(spans) => Json(spans).into_response(),
        None => not_found(format!("no job {job}")),
    }
}

/// `POST /api/v1/jobs/<id>/cancel`: the application's credential as a bearer token
/// (a browser's cookie is not enough here: the page's form goes through
/// [`cancel_form`]).
async fn cancel_api(
    State(ui): Shared,
    shown: Option<axum::Extension<Shown>>,
    Path(JobPath { job }): Path<JobPath>,
) -> Response {
    if shown.map(|s| s.0) != Some(Shown::Bearer) {
        return (
            StatusCode::UNAUTHORIZED,
            "cancelling takes the application secret as a bearer token (Authorization: Bearer …)\n",
        )
            .into_response();
    }
    let reply = ui.driver.cancel(job).await;
    let code = match reply {
        flint_proto::wire::CancelReply::Unknown => StatusCode::NOT_FOUND,
        flint_proto::wire::CancelReply::Ended => StatusCode::CONFLICT,
        _ => StatusCode::OK,
    };
    (code, Json(CancelAnswer::from(reply))).into_response()
}

/// What the cancel API answers, as JSON.
#[derive(serde::Serialize)]
struct CancelAnswer {
    /// `cancelled`, `ended` (it had ended already) or `unknown`.
    outcome: &'static str,
}

impl From<flint_proto::wire::CancelReply> for CancelAnswer {
    fn from(reply: flint_proto::wire::CancelReply) -> CancelAnswer {
        use flint_proto::wire::CancelReply;
        match reply {
            CancelReply::Cancelled => CancelAnswer { outcome: "cancelled" },
            CancelReply::Ended => CancelAnswer { outcome: "ended" },
            CancelReply::Unknown => CancelAnswer { outcome: "unknown" },
        }
    }
}

#[derive(serde::Deserialize)]
struct CancelForm {
    #[serde(default)]
    csrf: String,
}

/// The job page's cancel button: a browser holding the UI cookie, posting the page's
/// form token from the page's own origin. Answers with the job's page.
async fn cancel_form(
    State(ui): Shared,
    shown: Option<axum::Extension<Shown>>,
    Path(JobPath { job }): Path<JobPath>,
    headers: axum::http::HeaderMap,
    Form(form): Form<CancelForm>,
) -> Response {
    let same_origin = same_origin(&headers);
    let token_ok = flint_net::Secret::new(ui.form.as_bytes()).matches(form.csrf.as_bytes());
    match shown.map(|s| s.0) {
        Some(_) if token_ok && same_origin => {
            ui.driver.cancel(job).await;
            (StatusCode::SEE_OTHER, [(header::LOCATION, format!("/jobs/{job}"))]).into_response()
        }
        Some(_) => (StatusCode::FORBIDDEN, "this form did not come from the job's own page\n").into_response(),
        None => (
            StatusCode::UNAUTHORIZED,
            "cancelling needs the application's credential: open the page once with ?token=<secret>, or run flint cancel\n",
        )
            .into_response(),
    }
}

/// Whether a browser's post comes from the page's own origin: its `Origin` (or, when
/// a browser sends none, its `Sec-Fetch-Site`) names this host. A request with
/// neither is not from a browser page.
fn same_origin(headers: &axum::http::HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
        let named = origin.split_once("://").map(|(_, rest)| rest);
        return host.is_some() && named == host;
    }
    match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        Some(site) => site == "same-origin",
        None => true,
    }
}

async fn job_page(view: View, Path(JobPath { job }): Path<JobPath>, Query(q): Query<PageQuery>) -> Response {
    // Copied under the store's lock (the event loop takes it each turn), rendered after.
    let from = q.from.unwrap_or(0);
    let window = view.with_store(|store| {
        store.job(job).map(|e| {
            let (entry, launched) = e.window(|tasks| {
                tasks.iter().skip(from).take(page::TASKS_PER_PAGE).map(|(i, t)| (*i, t.clone())).collect()
            });
            (entry, launched, store.executors_of(e))
        })
    });
    // A running job's stages are the event loop's; a finished one's are in its record.
    let stages = match &window {
        Some((entry, ..)) if entry.status.state == flint_proto::JobState::Running => {
            let status = view.status().await;
            status.jobs.into_iter().find(|j| j.job == job).map(|j| j.stages).unwrap_or_default()
        }
        Some((entry, ..)) => entry.status.stages.clone(),
        None => Vec::new(),
    };
    let main = window.map(|(entry, launched, executors)| {
        view.frame(|f| page::job(f, &entry, &executors, &stages, from, launched))
    });
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

/// A job's task records, by index: `?offset=&length=` (at most 100,000 at once). A
/// job keeps records of tasks running, failed, lost or copied and of the slowest
/// that succeeded; the headers say how many it keeps, and how many succeeded tasks
/// it keeps none of.
async fn tasks(view: View, Path(JobPath { job }): Path<JobPath>, Query(range): Query<Range>) -> Response {
    let length = range.length.unwrap_or(MAX_TASKS_PER_REQUEST).min(MAX_TASKS_PER_REQUEST);
    let records = view.with_store(|store| {
        store.job(job).map(|e| {
            let page = e.tasks.values().skip(range.offset).take(length).cloned().collect::<Vec<_>>();
            (page, e.tasks.len(), e.tasks_not_kept.len())
        })
    });
    match records {
        Some((records, kept, not_kept)) => (
            [(TASKS_KEPT, HeaderValue::from(kept)), (TASKS_NOT_KEPT, HeaderValue::from(not_kept))],
            Json(records),
        )
            .into_response(),
        None => not_found(format!("no job {job}")),
    }
}

/// The headers of a job's task records: how many it keeps, how many it does not.
const TASKS_KEPT: HeaderName = HeaderName::from_static("x-flint-tasks-kept");
const TASKS_NOT_KEPT: HeaderName = HeaderName::from_static("x-flint-tasks-not-kept");

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
    ui.driver.speculations().render(&mut text);
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
