//! The master's page and JSON API (`/`, `/api/v1/workers`, `/api/v1/applications`),
//! behind the same guard as the driver's: loopback only unless bound beyond it, and
//! then the cluster secret (or the UI token made from it) on every request.

use crate::master::{MasterHandle, MasterView};
use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use axum::{Json, Router};
use flint_driver::ui::{Guard, guard, serve_on};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serves the page at `bind` (or one of the ports after it); returns where.
pub async fn serve_page(
    master: MasterHandle,
    bind: SocketAddr,
    secret: &flint_net::Secret,
) -> std::io::Result<SocketAddr> {
    let app = Router::new()
        .route("/", get(overview))
        .route("/api/v1/workers", get(workers))
        .route("/api/v1/applications", get(applications))
        .route("/api/v1/status", get(status))
        .layer(axum::middleware::from_fn_with_state(Arc::new(Guard::new(bind, secret)?), guard))
        .with_state(master);
    serve_on(bind, app).await
}

async fn status(State(master): State<MasterHandle>) -> Json<MasterView> {
    Json(master.view().await)
}

async fn workers(State(master): State<MasterHandle>) -> Json<serde_json::Value> {
    Json(serde_json::json!(master.view().await.workers))
}

async fn applications(State(master): State<MasterHandle>) -> Json<serde_json::Value> {
    Json(serde_json::json!(master.view().await.applications))
}

async fn overview(State(master): State<MasterHandle>) -> Html<String> {
    Html(render(&master.view().await))
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// The page: workers, then applications with their executors and what waits.
pub fn render(view: &MasterView) -> String {
    let mut out = String::from(
        "<!doctype html><html><head><meta charset=utf-8><title>Flint master</title>\
<meta http-equiv=refresh content=5><style>body{font:14px sans-serif;margin:2em}\
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\
.why{color:#a40}</style></head><body><h1>Flint master</h1>",
    );
    let cores: u32 = view.workers.iter().map(|w| w.cores).sum();
    let free: u32 = view.workers.iter().map(|w| w.cores_free).sum();
    let _ = write!(
        out,
        "<p>{} workers, {cores} cores ({} in use), {} applications</p>",
        view.workers.len(),
        cores - free,
        view.applications.len()
    );
    out.push_str(
        "<h2>Workers</h2><table id=workers><tr><th>Worker</th><th>Life</th><th>Host</th><th>Cores</th>\
<th>Cores free</th><th>Memory</th><th>Memory free</th><th>Executors</th></tr>",
    );
    for w in &view.workers {
        let executors: Vec<String> =
            w.executors.iter().map(|(a, e)| format!("{}/{}", esc(a), esc(e))).collect();
        let _ = write!(
            out,
            "<tr class=worker><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&w.id),
            w.incarnation,
            esc(&w.host),
            w.cores,
            w.cores_free,
            mib(w.memory),
            mib(w.memory_free),
            executors.join(", ")
        );
    }
    out.push_str("</table><h2>Applications</h2>");
    for a in &view.applications {
        let max = a.cores_max.map_or("no bound".to_owned(), |m| m.to_string());
        let state = if a.connected { "running" } else { "driver not connected" };
        let _ = write!(
            out,
            "<h3 class=app>{}</h3><p>{state}; {} cores in use (flint.cores.max: {max})</p>\
<table class=executors><tr><th>Executor</th><th>Worker</th></tr>",
            esc(&a.id),
            a.cores_used
        );
        for e in &a.executors {
            let _ = write!(out, "<tr class=executor><td>{}</td><td>{}</td></tr>", esc(&e.id), esc(&e.worker));
        }
        out.push_str("</table>");
        if !a.waiting.is_empty() {
            let _ = write!(out, "<p>{} executors wait to be placed:</p><ul>", a.waiting.len());
            for w in &a.waiting {
                let reason = w.reason.as_deref().unwrap_or("not placed yet");
                let _ = write!(out, "<li>{}: <span class=why>{}</span></li>", esc(&w.executor), esc(reason));
            }
            out.push_str("</ul>");
        }
    }
    out.push_str("</body></html>");
    out
}
