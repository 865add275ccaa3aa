//! The master's page and JSON API (`/`, `/api/v1/workers`, `/api/v1/applications`),
//! behind the same guard as the driver's: loopback only unless bound beyond it, and
//! then the cluster secret (or the UI token made from it) on every request.

use crate::master::{MasterHandle, MasterView};
use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use axum::{Json, Router};
use flint_driver::page::{STYLE, esc};
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

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// The page: workers, then applications with their executors and what waits.
pub fn render(view: &MasterView) -> String {
    let mut out = format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>Flint master</title>\
<meta name=viewport content='width=device-width'><meta http-equiv=refresh content=5>\
<style>{STYLE}.why{{color:#a40}}</style></head><body><header><strong>Flint</strong> · master\
<nav><a href='#workers'>Workers</a> <a href='#applications'>Applications</a> \
<a href='api/v1/status'>JSON</a></nav></header><main>"
    );
    let cores: u32 = view.workers.iter().map(|w| w.cores).sum();
    let free: u32 = view.workers.iter().map(|w| w.cores_free).sum();
    let _ = write!(
        out,
        "<p id=summary>{}, {} ({} in use), {}</p>",
        counted(view.workers.len(), "worker"),
        counted(cores as usize, "core"),
        cores - free,
        counted(view.applications.len(), "application"),
    );
    out.push_str(
        "<h2 id=workers-title>Workers</h2><table id=workers><tr><th>Worker</th><th>Life</th><th>Host</th><th>Cores</th>\
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
    out.push_str("</table><h2 id=applications>Applications</h2>");
    for a in &view.applications {
        let max = a.cores_max.map_or("no bound".to_owned(), |m| m.to_string());
        let state = if a.connected { "running" } else { "driver not connected" };
        // Its driver's page, when it said where (an http(s) address, checked at
        // registration).
        let name = match &a.ui_url {
            Some(page) => format!("<a class=app-page href='{}'>{}</a>", esc(page), esc(&a.id)),
            None => esc(&a.id),
        };
        let _ = write!(
            out,
            "<h3 class=app>{name}</h3><p>{state}; {} in use (flint.cores.max: {max})</p>\
<table class=executors><tr><th>Executor</th><th>Worker</th></tr>",
            counted(a.cores_used as usize, "core"),
        );
        for e in &a.executors {
            let _ = write!(out, "<tr class=executor><td>{}</td><td>{}</td></tr>", esc(&e.id), esc(&e.worker));
        }
        out.push_str("</table>");
        if !a.waiting.is_empty() {
            let _ = write!(out, "<p>{} to be placed:</p><ul>", counted(a.waiting.len(), "executor waits"));
            for w in &a.waiting {
                let reason = w.reason.as_deref().unwrap_or("not placed yet");
                let _ = write!(out, "<li>{}: <span class=why>{}</span></li>", esc(&w.executor), esc(reason));
            }
            out.push_str("</ul>");
        }
    }
    out.push_str("</main></body></html>");
    out
}

/// `n` things, said in the singular for one: "1 worker", "2 workers".
fn counted(n: usize, one: &str) -> String {
    match n {
        1 => format!("1 {one}"),
        n => match one.split_once(' ') {
            // "executor waits" → "executors wait"
            Some((noun, verb)) => format!("{n} {noun}s {}", verb.strip_suffix('s').unwrap_or(verb)),
            None => format!("{n} {one}s"),
        },
    }
}
