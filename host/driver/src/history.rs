//! `flint history`: the status page and its JSON API for every application whose event
//! log is in a directory, after their drivers are gone (or while they still run).
//!
//! An application's log is read into a [`Store`] when first asked for, and read again
//! when its files have grown; the pages are the live driver's own (`ui::app_routes`)
//! under `/history/<app>/`.

use crate::eventlog::{self, LoggedApp};
use crate::journal::Store;
use crate::page::{self, Frame};
use crate::ui::{View, app_routes, limited, serve_on};
use axum::Json;
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// Applications whose stores are kept in memory at once.
const CACHED: usize = 32;

/// Applications listed on the front page (the newest).
const LISTED: usize = 1000;

/// What was read of each application's folder, beside its log files' sizes then.
type ByFolder<T> = HashMap<String, (Vec<(PathBuf, u64)>, T)>;

/// Why an application's history cannot be shown.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("no application {0:?}")]
    NoApplication(String),
    #[error("{app}: {error}")]
    Unreadable { app: String, error: std::io::Error },
    #[error("{0}: reading its event log stopped")]
    Gone(String),
}

/// What `flint history` serves from.
pub struct History {
    dir: PathBuf,
    retained_jobs: usize,
    /// By folder: the log files' sizes when read, and what they said.
    cache: Mutex<ByFolder<Arc<Store>>>,
    /// By folder: the files' sizes when read, and what the front page says of it (kept
    /// for every application, so that listing them reads only logs that changed).
    summaries: Mutex<ByFolder<LoggedApp>>,
    permits: Semaphore,
}

impl History {
    pub fn new(dir: PathBuf, retained_jobs: usize) -> History {
        History {
            dir,
            retained_jobs,
            cache: Mutex::new(HashMap::new()),
            summaries: Mutex::new(HashMap::new()),
            permits: Semaphore::new(4),
        }
    }

    /// The application in folder `app`, read again if its log has grown since.
    pub async fn load(self: &Arc<Self>, app: &str) -> Result<Arc<Store>, HistoryError> {
        let none = || HistoryError::NoApplication(app.to_owned());
        if app.is_empty() || app.starts_with('.') || app.contains(['/', '\\']) {
            return Err(none());
        }
        let folder = self.dir.join(app);
        let files = eventlog::log_files(&folder).map_err(|_| none())?;
        if let Some((seen, store)) = self.cache.lock().expect("history lock").get(app)
            && *seen == files
        {
            return Ok(store.clone());
        }
        let retained = self.retained_jobs;
        let read = tokio::task::spawn_blocking(move || eventlog::read_app(&folder, retained)).await;
        let (store, skipped) = read
            .map_err(|_| HistoryError::Gone(app.to_owned()))?
            .map_err(|error| HistoryError::Unreadable { app: app.to_owned(), error })?;
        if skipped > 0 {
            tracing::warn!(app, skipped, "event log lines this flint cannot read were skipped");
        }
        let store = Arc::new(store);
        let mut cache = self.cache.lock().expect("history lock");
        if cache.len() >= CACHED {
            cache.clear();
        }
        cache.insert(app.to_owned(), (files, store.clone()));
        Ok(store)
    }

    /// Every application in the directory, newest first.
    pub async fn applications(self: &Arc<Self>) -> Vec<LoggedApp> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut apps = Vec::new();
        for name in names {
            let Ok(files) = eventlog::log_files(&self.dir.join(&name)) else { continue };
            let known = self.summaries.lock().expect("history lock").get(&name).cloned();
            let app = match known {
                Some((seen, app)) if seen == files => app,
                _ => {
                    let Ok(store) = self.load(&name).await else { continue };
                    let app = eventlog::describe(&self.dir.join(&name), &store);
                    self.summaries.lock().expect("history lock").insert(name, (files, app.clone()));
                    app
                }
            };
            if !app.app_id.is_empty() {
                apps.push(app);
            }
        }
        apps.sort_by(|a, b| b.started_ms.cmp(&a.started_ms).then_with(|| a.id.cmp(&b.id)));
        apps.truncate(LISTED);
        apps
    }
}

impl FromRequestParts<Arc<History>> for View {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, history: &Arc<History>) -> Result<View, Response> {
        let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, history)
            .await
            .map_err(IntoResponse::into_response)?;
        let app = params.get("app").cloned().unwrap_or_default();
        match history.load(&app).await {
            // The folder's name is anything a disk holds: one encoded path segment.
            Ok(store) => Ok(View::Logged { store, base: format!("/history/{}", page::url_segment(&app)) }),
            Err(e) => Err((StatusCode::NOT_FOUND, format!("{e}\n")).into_response()),
        }
    }
}

/// Serves the directory's applications on `bind` (or one of the ports after it) until
/// the process ends.
pub async fn serve_history(
    dir: &FsPath,
    bind: SocketAddr,
    retained_jobs: usize,
) -> std::io::Result<SocketAddr> {
    let meta = std::fs::metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other(format!("{} is not a directory", dir.display())));
    }
    let history = Arc::new(History::new(dir.to_owned(), retained_jobs));
    let loopback = bind.ip().is_loopback();
    let app = app_routes("/history/{app}")
        .route("/", get(front))
        .route("/api/v1/applications", get(applications))
        .route(
            "/history/{app}",
            get(|Path(app): Path<String>| async move {
                Redirect::to(&format!("/history/{}/", page::url_segment(&app)))
            }),
        )
        .layer(axum::middleware::from_fn_with_state(history.clone(), queue))
        .layer(axum::middleware::from_fn(move |request: Request, next: Next| async move {
            // As the live page: on loopback, only to requests addressed to loopback.
            if loopback && !crate::ui::addressed_to_loopback(&request) {
                return crate::ui::not_for_this_host();
            }
            next.run(request).await
        }))
        .with_state(history);
    serve_on(bind, app).await
}

async fn queue(State(history): State<Arc<History>>, request: Request, next: Next) -> Response {
    limited(&history.permits, request, next).await
}

async fn applications(State(history): State<Arc<History>>) -> Json<Vec<LoggedApp>> {
    Json(history.applications().await)
}

async fn front(State(history): State<Arc<History>>) -> Html<String> {
    let apps = history.applications().await;
    let frame = Frame {
        base: "",
        app_id: "history",
        live: false,
        source: "event logs",
        driver: false,
        may_act: None,
    };
    let main = page::applications(&apps);
    Html(page::document(&frame, "Applications", &main))
}
