//! The status page's HTML, the same for a live driver and for `flint history`: plain
//! server-rendered tables (a terminal browser reads them as they are), kept live by a
//! small script that fetches the page's `<main>` again every second. Nothing is loaded
//! from anywhere else.

use crate::journal::JobEntry;
use flint_proto::{ClusterStatus, ExecutorStatus, FailureRecord, JobId, TaskFailure, TaskRecord};
use std::fmt::Write as _;

/// Rows a job page's task table shows at once; `?from=N` pages through the rest.
pub const TASKS_PER_PAGE: usize = 500;

/// What every page says around its tables.
pub struct Frame<'a> {
    /// Prefix of the page's links: empty for a live driver, `/history/<app>` in history.
    pub base: &'a str,
    pub app_id: &'a str,
    /// Polled for changes: the application still runs.
    pub live: bool,
    /// Where the page comes from: "live", "history, finished", ….
    pub source: &'a str,
    /// Served by a running driver, which has metrics too.
    pub driver: bool,
}

/// HTML-escapes text.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
th{background:#f3f3f3}tr.removed,tr.failed,tr.lost{background:#fdecea}tr.running{background:#eef6ff}\
pre{background:#f7f7f7;padding:.6em;overflow:auto;max-height:30em}nav a{margin-right:1em}\
.muted{color:#777}";

/// Polls the page's own address for a fresh `<main>` while the application runs.
const SCRIPT: &str = "(function(){if(document.body.dataset.live!=='1')return;\
var u=location.pathname+location.search+(location.search?'&':'?')+'fragment=1';\
setInterval(function(){fetch(u,{cache:'no-store',credentials:'same-origin'}).then(function(r){\
if(r.ok)return r.text().then(function(t){document.querySelector('main').innerHTML=t;});}).catch(function(){});},1000);})();";

/// A whole page around `main`.
pub fn document(frame: &Frame, title: &str, main: &str) -> String {
    let base = frame.base;
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>{title} · {app} · Flint</title>\
<meta name=viewport content='width=device-width'><style>{STYLE}</style></head>\
<body data-live='{live}'><header><strong>Flint</strong> · {app} <span class=muted>({source})</span>\
<nav><a href='{base}/'>Executors and jobs</a>{metrics}<a href='{base}/api/v1/status'>JSON</a>{apps}</nav>\
<noscript><p class=muted>Reload to refresh.</p></noscript></header><main>{main}</main><script>{SCRIPT}</script></body></html>",
        title = esc(title),
        app = esc(frame.app_id),
        live = u8::from(frame.live),
        source = esc(frame.source),
        metrics = if frame.driver { format!("<a href='{base}/metrics'>Metrics</a>") } else { String::new() },
        apps = if frame.driver { "" } else { "<a href='/'>Applications</a>" },
    )
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let (mut value, mut unit) = (n as f64, 0);
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// A moment, as UTC to the second.
pub fn moment(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

fn millis(ms: u64) -> String {
    if ms < 1000 { format!("{ms} ms") } else { format!("{:.1} s", ms as f64 / 1000.0) }
}

/// The executors and jobs tables.
pub fn overview(
    frame: &Frame,
    status: &ClusterStatus,
    jobs: &dyn Fn(JobId) -> Option<(u64, Option<u64>)>,
) -> String {
    let mut out = String::new();
    let live = status.executors.iter().filter(|e| e.removed.is_none()).count();
    let _ = write!(out, "<h2>Executors</h2><p>{live} live");
    if status.executors_starting > 0 {
        let _ = write!(out, ", {} starting", status.executors_starting);
    }
    if let Some(reason) = &status.allocation_stopped {
        let _ = write!(out, "; no more are started: {}", esc(reason));
    }
    if let Some(reason) = &status.executors_waiting {
        let _ = write!(out, "; <span id=executors-waiting>{}</span>", esc(reason));
    }
    out.push_str(
        "</p><table id=executors><tr><th>Executor</th><th>Address</th><th>Backend</th><th>Cores</th>\
<th>Memory</th><th>Slots busy</th><th>Tasks done</th><th>Tasks failed</th><th>Last heartbeat</th>\
<th>State</th><th>Removed because</th></tr>",
    );
    for e in &status.executors {
        executor_row(&mut out, e);
    }
    out.push_str(
        "</table><h2>Jobs</h2><table id=jobs><tr><th>Job</th><th>Name</th><th>State</th>\
<th>Tasks done</th><th>Running</th><th>Failed attempts</th><th>Duration</th></tr>",
    );
    for j in status.jobs.iter().rev() {
        let p = j.progress;
        let duration = jobs(j.job)
            .map(|(start, end)| millis(end.unwrap_or_else(crate::journal::now_ms).saturating_sub(start)))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr class='{state}' id='job-{id}'><td><a href='{base}/jobs/{id}'>{id}</a></td><td>{name}</td>\
<td>{state}</td><td>{done} / {total}</td><td>{running}</td><td>{failed}</td><td>{duration}</td></tr>",
            base = frame.base,
            id = j.job,
            name = esc(&j.name),
            state = j.state,
            done = p.done,
            total = p.total,
            running = p.running,
            failed = p.failed_attempts,
        );
    }
    out.push_str("</table>");
    out
}

fn executor_row(out: &mut String, e: &ExecutorStatus) {
    let heartbeat = e.last_heartbeat_ms.map(|ms| format!("{} ago", millis(ms))).unwrap_or_default();
    let address = match &e.pod {
        Some(pod) => format!("{} (pod {})", e.host, pod),
        None => e.host.clone(),
    };
    let _ = write!(
        out,
        "<tr class='{state}' id='executor-{id}' data-state='{state}'><td>{id}</td><td>{address}</td>\
<td>{backend}</td><td>{cores}</td><td>{memory}</td><td>{running} / {slots}</td><td>{done}</td>\
<td>{failed}</td><td>{heartbeat}</td><td>{state}</td><td>{reason}</td></tr>",
        id = esc(&e.id),
        address = esc(&address),
        backend = esc(&e.backend),
        cores = e.cores,
        memory = bytes(e.memory),
        running = e.running,
        slots = e.slots,
        done = e.tasks_done,
        failed = e.tasks_failed,
        state = e.state,
        reason = esc(e.removed.as_deref().unwrap_or_default()),
    );
}

/// A job's summary, its tasks from `from` on (`entry` holds those, of `launched` in
/// all: see `JobEntry::window`), and its failures.
pub fn job(frame: &Frame, entry: &JobEntry, from: usize, launched: usize) -> String {
    let s = &entry.status;
    let mut out = String::new();
    let ended = entry.ended_ms.unwrap_or_else(crate::journal::now_ms);
    let _ = write!(
        out,
        "<h2>Job {id}: {name}</h2><p id=job-state>{state} · {done} of {total} tasks done · {failed} failed attempts{lost} · {duration}</p>",
        id = s.job,
        name = esc(&s.name),
        state = s.state,
        done = s.progress.done,
        total = s.progress.total,
        failed = s.progress.failed_attempts,
        lost = match s.progress.outputs_lost {
            0 => String::new(),
            n => format!(
                " · <span id=outputs-lost>{n} outputs lost and run again</span> (their executor went, or a reader could not read them: see the failures below)"
            ),
        },
        duration = millis(ended.saturating_sub(entry.started_ms)),
    );
    if let Some(sh) = &s.progress.shuffle {
        let _ = write!(
            out,
            "<p id=shuffle>Shuffle: {} over {} reduce partitions · median {} · largest: partition {} with {}{}</p>",
            bytes(sh.bytes),
            sh.partitions,
            bytes(sh.median),
            sh.largest_partition,
            bytes(sh.largest),
            match sh.skewed {
                0 => String::new(),
                n => format!(
                    " · <span id=skewed>{n} skewed partitions</span> (over {}× the median and {})",
                    flint_proto::SKEW_FACTOR,
                    bytes(flint_proto::SKEW_MIN_BYTES)
                ),
            }
        );
    }
    if let Some(error) = &entry.error {
        let _ = write!(out, "<p>Failed: <span id=job-error>{}</span></p>", esc(error));
    }
    if !entry.failures.is_empty() {
        out.push_str("<h3>Failures</h3>");
        for f in &entry.failures {
            failure(&mut out, frame, s.job, f);
        }
        if entry.failures_not_kept > 0 {
            let _ = write!(out, "<p>… and {} more failed attempts, not kept.</p>", entry.failures_not_kept);
        }
    }
    if entry.tasks_forgotten {
        out.push_str("<p class=muted>This job's task records were let go to make room for newer jobs'.</p>");
    }
    let tasks: Vec<&TaskRecord> = entry.tasks.values().take(TASKS_PER_PAGE).collect();
    let _ = write!(out, "<h3>Tasks</h3><p>{launched} launched of {}", s.progress.total);
    if launched > TASKS_PER_PAGE {
        let base = format!("{}/jobs/{}", frame.base, s.job);
        let _ = write!(out, " · showing {}–{}", from + 1, from + tasks.len());
        if from > 0 {
            let _ =
                write!(out, " · <a href='{base}?from={}'>earlier</a>", from.saturating_sub(TASKS_PER_PAGE));
        }
        if from + TASKS_PER_PAGE < launched {
            let _ = write!(out, " · <a href='{base}?from={}'>later</a>", from + TASKS_PER_PAGE);
        }
    }
    out.push_str(
        "</p><table id=tasks><tr><th>Task</th><th>Attempt</th><th>Executor</th><th>State</th><th>Duration</th>\
<th>Failure</th></tr>",
    );
    for t in tasks {
        task_row(&mut out, frame, s.job, t);
    }
    out.push_str("</table>");
    out
}

fn task_row(out: &mut String, frame: &Frame, job: JobId, t: &TaskRecord) {
    let _ = write!(
        out,
        "<tr class='{state}'><td><a href='{base}/jobs/{job}/tasks/{index}'>{index}</a></td><td>{attempt}</td>\
<td>{executor}</td><td>{state}</td><td>{duration}</td><td>{failure}</td></tr>",
        base = frame.base,
        index = t.index,
        attempt = t.attempt,
        executor = esc(&t.executor),
        state = t.state,
        duration = t.duration_ms.map(millis).unwrap_or_default(),
        failure = t.failure.as_ref().map(|f| esc(&f.to_string())).unwrap_or_default(),
    );
}

fn failure(out: &mut String, frame: &Frame, job: JobId, f: &FailureRecord) {
    let _ = write!(
        out,
        "<div class=failure><p><a href='{base}/jobs/{job}/tasks/{task}'>Task {task}</a>, attempt {attempt} on \
executor {executor}: <strong class=kind>{kind}</strong> — {message}</p>",
        base = frame.base,
        task = f.task,
        attempt = f.attempt,
        executor = esc(&f.executor),
        kind = f.failure.kind(),
        message = esc(&f.failure.to_string()),
    );
    if let TaskFailure::Trap { backtrace: Some(backtrace), .. } = &f.failure {
        let _ = write!(out, "<p>Guest backtrace:</p><pre class=backtrace>{}</pre>", esc(backtrace));
    }
    if !f.log_tail.is_empty() {
        let _ = write!(out, "<p>End of its log:</p><pre class=log>{}</pre>", esc(&f.log_tail));
    }
    out.push_str("</div>");
}

/// One task: its latest attempt and every failed one.
pub fn task(frame: &Frame, entry: &JobEntry, index: u32) -> String {
    let job = entry.status.job;
    let mut out = format!(
        "<h2>Job {job} (<a href='{base}/jobs/{job}'>{name}</a>), task {index}</h2>",
        base = frame.base,
        name = esc(&entry.status.name)
    );
    match entry.tasks.get(&index) {
        Some(t) => {
            out.push_str(
                "<table id=task><tr><th>Task</th><th>Attempt</th><th>Executor</th><th>State</th>\
<th>Duration</th><th>Failure</th></tr>",
            );
            task_row(&mut out, frame, job, t);
            out.push_str("</table>");
            if let Some(log) = &t.log_tail {
                let _ = write!(out, "<p>End of its log:</p><pre class=log>{}</pre>", esc(log));
            }
        }
        None => out.push_str("<p>Not launched.</p>"),
    }
    let failures: Vec<_> = entry.failures.iter().filter(|f| f.task == index).collect();
    if !failures.is_empty() {
        out.push_str("<h3>Failed attempts</h3>");
        for f in failures {
            failure(&mut out, frame, job, f);
        }
    }
    out
}

/// A folder name as one segment of a URL path: anything but letters, digits and
/// `-._~` percent-encoded, so `?`, `#`, `/` or a quote in a name cannot change the link.
fn url_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// The applications an event log directory holds, newest first.
pub fn applications(apps: &[crate::eventlog::LoggedApp]) -> String {
    let mut out = String::from(
        "<h2>Applications</h2><table id=applications><tr><th>Application</th><th>Started</th><th>Ended</th></tr>",
    );
    for app in apps {
        let ended = match app.ended_ms {
            Some(ms) => format!("{} later", millis(ms.saturating_sub(app.started_ms))),
            None => "still running (its log is not closed)".into(),
        };
        let _ = write!(
            out,
            "<tr class='{class}'><td><a href='/history/{id}/'>{app_id}</a></td><td data-ms='{ms}'>{started}</td><td>{ended}</td></tr>",
            class = if app.running { "running" } else { "finished" },
            id = url_segment(&app.id),
            app_id = esc(&app.app_id),
            ms = app.started_ms,
            started = moment(app.started_ms),
        );
    }
    out.push_str("</table>");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_folder_name_stays_one_path_segment() {
        assert_eq!(super::url_segment("app-1.x_y"), "app-1.x_y");
        assert_eq!(super::url_segment("a?b#c/d'e f"), "a%3Fb%23c%2Fd%27e%20f");
        assert_eq!(super::url_segment("é"), "%C3%A9");
    }
}
