//! The driver's HTTP side: a JSON API behind every table (`/api/v1/…`, the same records
//! `flint status --json` prints) and Prometheus metrics (`/metrics`). Read-only. Bound
//! to loopback unless told otherwise; bound beyond it, every request must carry the
//! application secret as a bearer token.

use crate::driver::Driver;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use flint_proto::ClusterStatus;
use std::fmt::Write as _;
use std::net::SocketAddr;

/// Upper bounds (seconds) of the task duration histogram's buckets.
const DURATION_BUCKETS: [f64; 11] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0];

/// How long task attempts ran, as the driver accepted their reports: a Prometheus
/// histogram kept in atomics, written by the event loop, read by `/metrics`.
#[derive(Default)]
pub struct Durations {
    /// Attempts at or under each bound (not cumulative; summed when rendered).
    buckets: [std::sync::atomic::AtomicU64; DURATION_BUCKETS.len()],
    count: std::sync::atomic::AtomicU64,
    sum_micros: std::sync::atomic::AtomicU64,
}

impl Durations {
    pub fn record(&self, elapsed: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let seconds = elapsed.as_secs_f64();
        if let Some(i) = DURATION_BUCKETS.iter().position(|bound| seconds <= *bound) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(elapsed.as_micros() as u64, Relaxed);
    }

    fn render(&self, out: &mut String) {
        use std::sync::atomic::Ordering::Relaxed;
        let name = "flint_task_duration_seconds";
        let _ = writeln!(out, "# HELP {name} How long task attempts ran.\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, bucket) in DURATION_BUCKETS.iter().zip(&self.buckets) {
            cumulative += bucket.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {}", self.sum_micros.load(Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// Ports tried after the one asked for when it is taken, as Spark's UI does.
pub const PORT_RETRIES: u16 = 16;

struct Ui {
    driver: Driver,
    /// The secret a request must show, when the page is reachable beyond loopback.
    bearer: Option<flint_net::Secret>,
}

/// Binds `bind`, or the next free port of the following [`PORT_RETRIES`], and serves
/// there until the process ends. `secret` is demanded of every request when the
/// address is not loopback.
pub async fn serve_ui(
    driver: Driver,
    bind: SocketAddr,
    secret: &flint_net::Secret,
) -> std::io::Result<SocketAddr> {
    let mut last = None;
    for n in 0..=PORT_RETRIES {
        let port = if bind.port() == 0 { 0 } else { bind.port().saturating_add(n) };
        match tokio::net::TcpListener::bind(SocketAddr::new(bind.ip(), port)).await {
            Ok(listener) => {
                let bound = listener.local_addr()?;
                let bearer = (!bind.ip().is_loopback()).then(|| secret.clone());
                let ui = std::sync::Arc::new(Ui { driver, bearer });
                let app = Router::new()
                    .route("/api/v1/status", get(status))
                    .route("/api/v1/executors", get(executors))
                    .route("/api/v1/jobs", get(jobs))
                    .route("/metrics", get(metrics))
                    .layer(axum::middleware::from_fn_with_state(ui.clone(), authorize))
                    .with_state(ui);
                tokio::spawn(async move {
                    if let Err(e) = axum::serve(listener, app).await {
                        tracing::warn!(error = %e, "the status server stopped");
                    }
                });
                return Ok(bound);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && bind.port() != 0 => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no port")))
}

type Shared = State<std::sync::Arc<Ui>>;

async fn authorize(State(ui): Shared, request: Request, next: Next) -> Response {
    if let Some(secret) = &ui.bearer {
        let shown = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .unwrap_or_default();
        if !secret.matches(shown) {
            return (StatusCode::UNAUTHORIZED, "the application secret is required as a bearer token\n")
                .into_response();
        }
    }
    next.run(request).await
}

async fn status(State(ui): Shared) -> Json<ClusterStatus> {
    Json(ui.driver.snapshot().await)
}

async fn executors(State(ui): Shared) -> Response {
    Json(ui.driver.snapshot().await.executors).into_response()
}

async fn jobs(State(ui): Shared) -> Response {
    Json(ui.driver.snapshot().await.jobs).into_response()
}

async fn metrics(State(ui): Shared) -> Response {
    let mut text = render_metrics(&ui.driver.snapshot().await);
    ui.driver.durations().render(&mut text);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The status as Prometheus text. Names carry no ids; an executor's id is a label of
/// the series of live executors only, so their number is bounded by the fleet.
pub fn render_metrics(status: &ClusterStatus) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let live: Vec<_> = status.executors.iter().filter(|e| e.removed.is_none()).collect();
    let count_state = |state: &str| status.executors.iter().filter(|e| e.state == state).count() as f64;
    let states = ["registered", "draining", "excluded", "removed"];
    let by_state: Vec<_> = states.iter().map(|s| (format!("{{state=\"{s}\"}}"), count_state(s))).collect();
    family("flint_executors", "gauge", "Executors by state.", &by_state);
    family(
        "flint_executors_starting",
        "gauge",
        "Executors asked of the backend and not yet registered.",
        &[(String::new(), f64::from(status.executors_starting))],
    );
    let (done, failed) =
        status.executors.iter().fold((0u64, 0u64), |(d, f), e| (d + e.tasks_done, f + e.tasks_failed));
    family(
        "flint_tasks_total",
        "counter",
        "Task attempts ended, by outcome, on every executor the application had.",
        &[("{outcome=\"succeeded\"}".into(), done as f64), ("{outcome=\"failed\"}".into(), failed as f64)],
    );
    let per = |f: &dyn Fn(&flint_proto::ExecutorStatus) -> f64| -> Vec<(String, f64)> {
        live.iter().map(|e| (format!("{{executor=\"{}\"}}", escape(&e.id)), f(e))).collect()
    };
    family(
        "flint_executor_running_tasks",
        "gauge",
        "Attempts running on each live executor.",
        &per(&|e| f64::from(e.running)),
    );
    family(
        "flint_executor_slots",
        "gauge",
        "Task slots of each live executor.",
        &per(&|e| f64::from(e.slots)),
    );
    family(
        "flint_executor_heartbeat_age_seconds",
        "gauge",
        "Time since each live executor's last heartbeat.",
        &per(&|e| e.last_heartbeat_ms.map_or(f64::NAN, |ms| ms as f64 / 1000.0)),
    );
    let count_jobs = |state: &str| status.jobs.iter().filter(|j| j.state == state).count() as f64;
    let jobs: Vec<_> = ["running", "succeeded", "failed"]
        .iter()
        .map(|s| (format!("{{state=\"{s}\"}}"), count_jobs(s)))
        .collect();
    family("flint_jobs", "gauge", "Jobs the driver lists, by state.", &jobs);
    let running = status.jobs.iter().filter(|j| j.state == "running");
    let waiting: u32 =
        running.map(|j| j.progress.total.saturating_sub(j.progress.done + j.progress.running)).sum();
    family(
        "flint_scheduler_waiting_tasks",
        "gauge",
        "Tasks of running jobs neither done nor running.",
        &[(String::new(), f64::from(waiting))],
    );
    out
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
