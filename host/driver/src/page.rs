//! The status page's HTML, the same for a live driver and for `flint history`: plain
//! server-rendered tables (a terminal browser reads them as they are), kept live by a
//! small script that fetches the page's `<main>` again every second. Nothing is loaded
//! from anywhere else.

use crate::journal::{AttemptSpan, JobEntry, METRICS, SUCCEEDED_KEPT};
use flint_proto::{
    ClusterStatus, ExecutorStatus, FailureRecord, JobId, JobState, StageKind, StageReport, TaskFailure,
    TaskRecord,
};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Rows a job page's task table shows at once; `?from=N` pages through the rest.
pub const TASKS_PER_PAGE: usize = 500;

/// What every page says around its tables.
pub struct Frame<'a> {
    /// Prefix of the page's links: empty for a live driver, `/history/<app>` in history.
    /// Where the application's pages are, a URL path (its parts percent-encoded);
    /// escaped again wherever it is written into a page.
    pub base: &'a str,
    pub app_id: &'a str,
    /// Polled for changes: the application still runs.
    pub live: bool,
    /// Where the page comes from: "live", "history, finished", ….
    pub source: &'a str,
    /// Served by a running driver, which has metrics too.
    pub driver: bool,
    /// The request carried the application's credential: the page may offer what
    /// changes the application (a job's cancel button), with this form token.
    pub may_act: Option<&'a str>,
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

/// The style sheet of every page (the standalone master's too).
pub const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
th{background:#f3f3f3}tr.removed,tr.failed,tr.lost{background:#fdecea}tr.running{background:#eef6ff}\
pre{background:#f7f7f7;padding:.6em;overflow:auto;max-height:30em}nav a{margin-right:1em}\
.muted{color:#777}details{margin:.3em 0}summary{cursor:pointer}\
svg.timeline{border:1px solid #ddd;background:#fcfcfc}svg.timeline rect.succeeded{fill:#5b9bd5}\
svg.timeline rect.running{fill:#a9d08e}svg.timeline rect.failed,svg.timeline rect.lost{fill:#e06666}\
svg.timeline rect.killed,svg.timeline rect.cancelled{fill:#bbb}\
svg.timeline rect.speculative{stroke:#333;stroke-dasharray:3 2}svg.timeline rect.compile{fill:#f4b183}\
svg.timeline line.executor-added{stroke:#38761d;stroke-width:2}svg.timeline line.executor-removed{stroke:#990000;stroke-width:2}svg.timeline text{font-size:11px;fill:#444}\
svg.dag{border:1px solid #ddd;background:#fcfcfc}svg.dag rect{fill:#eef6ff;stroke:#5b9bd5}\
svg.dag g.succeeded rect{fill:#dbe9f6}svg.dag g.skipped rect{fill:#eee;stroke:#bbb}svg.dag text{font-size:11px;fill:#333}\
td.num{text-align:right}form.inline{display:inline}";

/// Polls the page's own address for a fresh `<main>` while the application runs.
const SCRIPT: &str = "(function(){if(document.body.dataset.live!=='1')return;\
var u=location.pathname+location.search+(location.search?'&':'?')+'fragment=1';\
setInterval(function(){fetch(u,{cache:'no-store',credentials:'same-origin'}).then(function(r){\
if(r.ok)return r.text().then(function(t){var m=document.querySelector('main'),o=[].map.call(\
m.querySelectorAll('details[open]'),function(d){return d.id;});m.innerHTML=t;o.forEach(function(i){\
var d=i&&document.getElementById(i);if(d)d.open=true;});});}).catch(function(){});},1000);})();";

/// A whole page around `main`.
pub fn document(frame: &Frame, title: &str, main: &str) -> String {
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>{title} · {app} · Flint</title>\
<meta name=viewport content='width=device-width'><style>{STYLE}</style></head>\
<body data-live='{live}'><header><strong>Flint</strong> · {app} <span class=muted>({source})</span>\
<nav>{links}</nav>\
<noscript><p class=muted>Reload to refresh.</p></noscript></header><main>{main}</main><script>{SCRIPT}</script></body></html>",
        title = esc(title),
        app = esc(frame.app_id),
        live = u8::from(frame.live),
        source = esc(frame.source),
        links = nav(frame),
    )
}

/// The links every page of an application carries; the history's own front page,
/// which lists applications, has its own.
fn nav(frame: &Frame) -> String {
    let base = esc(frame.base);
    if !frame.driver && base.is_empty() {
        return "<a href='/'>Applications</a><a href='/api/v1/applications'>JSON</a>".into();
    }
    let mut out =
        format!("<a href='{base}/'>Executors and jobs</a><a href='{base}/config'>Configuration</a>");
    if frame.driver {
        let _ = write!(out, "<a href='{base}/metrics'>Metrics</a>");
    }
    let _ = write!(out, "<a href='{base}/api/v1/status'>JSON</a>");
    if !frame.driver {
        out.push_str("<a href='/'>Applications</a>");
    }
    out
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
pub fn overview(frame: &Frame, status: &ClusterStatus) -> String {
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
<th>Memory</th><th>Slots busy</th><th>Tasks done</th><th>Tasks failed</th><th>Input</th><th>Shuffle written</th><th>Last heartbeat</th>\
<th>Added</th><th>Removed</th><th>State</th><th>Removed because</th></tr>",
    );
    for e in &status.executors {
        executor_row(&mut out, e);
    }
    out.push_str(
        "</table><h2>Jobs</h2><table id=jobs><tr><th>Job</th><th>Name</th><th>State</th>\
<th>Tasks done</th><th>Running</th><th>Failed attempts</th><th>Started</th><th>Duration</th></tr>",
    );
    for j in status.jobs.iter().rev() {
        let p = j.progress;
        let duration = j
            .started_ms
            .map(|start| millis(j.ended_ms.unwrap_or_else(crate::journal::now_ms).saturating_sub(start)))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr class='{state}' id='job-{id}'><td><a href='{base}/jobs/{id}'>{id}</a></td><td>{name}</td>\
<td>{state}</td><td>{done} / {total}</td><td>{running}</td><td>{failed}</td><td>{started}</td>\
<td>{duration}</td></tr>",
            base = esc(frame.base),
            id = j.job,
            name = esc(&j.name),
            state = j.state,
            done = p.done,
            total = p.total,
            running = p.running,
            failed = p.failed_attempts,
            started = j.started_ms.map(moment).unwrap_or_default(),
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
<td>{failed}</td><td class=num>{input}</td><td class=num>{written}</td><td>{heartbeat}</td><td>{added}</td><td>{removed_at}</td><td>{state}</td><td>{reason}</td></tr>",
        id = esc(&e.id),
        address = esc(&address),
        backend = esc(&e.backend),
        cores = e.cores,
        memory = bytes(e.memory),
        running = e.running,
        slots = e.slots,
        done = e.tasks_done,
        failed = e.tasks_failed,
        input = bytes(e.input_bytes),
        written = bytes(e.shuffle_write_bytes),
        added = e.added_ms.map(moment).unwrap_or_default(),
        removed_at = e.removed_ms.map(moment).unwrap_or_default(),
        state = e.state,
        reason = esc(e.removed.as_deref().unwrap_or_default()),
    );
}

/// A job's summary, its timeline, its task summary, its failures folded by what they
/// said, and its tasks from `from` on (`entry` holds those, of `launched` in all: see
/// `JobEntry::window`).
/// A job's page; `stages` as they stand (a running job's from the event loop, a
/// finished one's as it ended).
pub fn job(
    frame: &Frame,
    entry: &JobEntry,
    executors: &[ExecutorStatus],
    stages: &[StageReport],
    from: usize,
    launched: usize,
) -> String {
    let s = &entry.status;
    let mut out = String::new();
    let ended = entry.ended_ms.unwrap_or_else(crate::journal::now_ms);
    let _ = write!(
        out,
        "<h2>Job {id}: {name}</h2><p id=job-state>{state} · {done} of {total} tasks done · {failed} failed attempts{lost}{speculative} · {duration}</p>\
<p id=job-times>Started {started}{ended}</p>",
        id = s.job,
        name = esc(&s.name),
        state = s.state,
        done = s.progress.done,
        total = s.progress.total,
        failed = s.progress.failed_attempts,
        speculative = match s.progress.speculative {
            0 => String::new(),
            n => format!(
                " · <span id=speculative>{n} speculative copies, {} finished first</span>",
                s.progress.speculative_won
            ),
        },
        lost = match s.progress.outputs_lost {
            0 => String::new(),
            n => format!(
                " · <span id=outputs-lost>{n} outputs lost and run again</span> (their executor went, or a reader could not read them: see the failures below)"
            ),
        },
        duration = millis(ended.saturating_sub(entry.started_ms)),
        started = moment(entry.started_ms),
        ended = entry.ended_ms.map(|ms| format!(" · ended {}", moment(ms))).unwrap_or_default(),
    );
    if let (Some(token), JobState::Running | JobState::Waiting) = (frame.may_act, s.state) {
        let _ = write!(
            out,
            "<form class=inline id=cancel method=post action='{base}/jobs/{id}/cancel'>\
<input type=hidden name=csrf value='{token}'><button type=submit>Cancel job</button></form>",
            base = esc(frame.base),
            id = s.job,
            token = esc(token),
        );
    }
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
    if entry.tasks_forgotten {
        out.push_str("<p class=muted>This job's task records were let go to make room for newer jobs'.</p>");
    }
    stage_graph(&mut out, stages);
    timeline(&mut out, entry, executors, ended);
    summary(&mut out, entry);
    if !entry.failures.is_empty() {
        out.push_str("<h3>Failures</h3>");
        folded_failures(&mut out, frame, s.job, &entry.failures);
        if entry.failures_not_kept > 0 {
            let _ = write!(out, "<p>… and {} more failed attempts, not kept.</p>", entry.failures_not_kept);
        }
    }
    let tasks: Vec<&TaskRecord> = entry.tasks.values().take(TASKS_PER_PAGE).collect();
    let _ = write!(out, "<h3>Tasks</h3><p>{launched} listed of {}", s.progress.total);
    if !entry.tasks_not_kept.is_empty() {
        let _ = write!(
            out,
            " · <span id=tasks-not-kept>{} succeeded tasks not listed</span> (a job keeps those running, \
failed, lost or copied, and the slowest {SUCCEEDED_KEPT} that succeeded)",
            entry.tasks_not_kept.len()
        );
    }
    if launched > TASKS_PER_PAGE {
        let base = format!("{}/jobs/{}", esc(frame.base), s.job);
        let _ = write!(out, " · showing {}–{}", from + 1, from + tasks.len());
        if from > 0 {
            let _ =
                write!(out, " · <a href='{base}?from={}'>earlier</a>", from.saturating_sub(TASKS_PER_PAGE));
        }
        if from + TASKS_PER_PAGE < launched {
            let _ = write!(out, " · <a href='{base}?from={}'>later</a>", from + TASKS_PER_PAGE);
        }
    }
    out.push_str("</p><table id=tasks>");
    out.push_str(TASK_HEADER);
    for t in tasks {
        task_row(&mut out, frame, s.job, t);
    }
    out.push_str("</table>");
    out
}

const TASK_HEADER: &str = "<tr><th>Task</th><th>Attempt</th><th>Executor</th><th>State</th><th>Launched</th>\
<th>Duration</th><th>Compile</th><th>Input</th><th>Records</th><th>Reading</th><th>Compute</th><th>Failure</th></tr>";

fn task_row(out: &mut String, frame: &Frame, job: JobId, t: &TaskRecord) {
    let m = t.metrics;
    let (read_ms, compile_ms) = (m.read_us / 1000, m.compile_us / 1000);
    let _ = write!(
        out,
        "<tr class='{state}'><td><a href='{base}/jobs/{job}/tasks/{index}'>{index}</a></td><td>{attempt}</td>\
<td>{executor}</td><td>{state}</td><td>{launched}</td><td class=num>{duration}</td><td class=num>{compile}</td><td class=num>{input}</td>\
<td class=num>{records}</td><td class=num>{read}</td><td class=num>{compute}</td><td>{failure}</td></tr>",
        base = esc(frame.base),
        index = t.index,
        attempt = t.attempt,
        executor = esc(&t.executor),
        state = t.state,
        launched = moment_ms(t.launched_ms),
        duration = t.duration_ms.map(millis).unwrap_or_default(),
        input = t.duration_ms.map(|_| bytes(m.input_bytes)).unwrap_or_default(),
        records = t.duration_ms.map(|_| m.input_records.to_string()).unwrap_or_default(),
        read = t.duration_ms.map(|_| millis(read_ms)).unwrap_or_default(),
        compile = t.duration_ms.map(|_| millis(compile_ms)).unwrap_or_default(),
        compute = t.duration_ms.map(|d| millis(d.saturating_sub(read_ms + compile_ms))).unwrap_or_default(),
        failure = t.failure.as_ref().map(|f| esc(&f.to_string())).unwrap_or_default(),
    );
}

/// Quantiles of what the job's succeeded tasks measured, as Spark's task summary (from
/// the store's sketches: exact for a thousand tasks, within 2% past them).
fn summary(out: &mut String, entry: &JobEntry) {
    let succeeded = &entry.succeeded;
    if succeeded.count() == 0 {
        return;
    }
    let _ = write!(
        out,
        "<h3>Summary of {} succeeded tasks</h3><table id=summary><tr><th>Metric</th><th>Min</th>\
<th>25th percentile</th><th>Median</th><th>75th percentile</th><th>Max</th></tr>",
        succeeded.count()
    );
    let shows: [fn(u64) -> String; METRICS.len()] =
        [millis, millis, millis, bytes, |n| n.to_string(), millis];
    for ((sketch, (id, name, _)), show) in succeeded.sketches.iter().zip(METRICS).zip(shows) {
        let _ = write!(out, "<tr id='summary-{id}'><th>{name}</th>");
        for q in [0.0, 0.25, 0.5, 0.75, 1.0] {
            let _ = write!(out, "<td class=num>{}</td>", show(sketch.quantile(q)));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

/// Pixels of the timeline's drawing: its width, a lane's height, the label column.
const TIMELINE_WIDTH: u64 = 960;
const LANE: u64 = 14;
const LABEL: u64 = 150;

/// The job's attempts as bars in time, one row per slot an executor used (attempts
/// that overlapped on an executor ran in different slots), drawn as SVG on the driver:
/// no script, no CDN.
/// Width and height of a stage's box in the DAG, and the room between columns and rows.
const STAGE_W: u64 = 150;
const STAGE_H: u64 = 46;
const STAGE_GAP_X: u64 = 50;
const STAGE_GAP_Y: u64 = 14;

/// The job's stages: a DAG drawn as an SVG (a column per depth, an edge per shuffle
/// read), then a table with what each ran, read and wrote.
fn stage_graph(out: &mut String, stages: &[StageReport]) {
    if stages.is_empty() {
        return;
    }
    // A stage's column is one past its deepest parent's (parents come first).
    let mut depth = vec![0u64; stages.len()];
    let mut row = vec![0u64; stages.len()];
    let mut rows: BTreeMap<u64, u64> = BTreeMap::new();
    for (i, s) in stages.iter().enumerate() {
        let d = s.parents.iter().filter_map(|&p| depth.get(p as usize)).map(|d| d + 1).max().unwrap_or(0);
        depth[i] = d;
        let r = rows.entry(d).or_default();
        row[i] = *r;
        *r += 1;
    }
    let columns = depth.iter().max().map_or(1, |d| d + 1);
    let most = rows.values().max().copied().unwrap_or(1);
    let width = columns * (STAGE_W + STAGE_GAP_X);
    let height = most * (STAGE_H + STAGE_GAP_Y) + STAGE_GAP_Y;
    let at =
        |i: usize| (depth[i] * (STAGE_W + STAGE_GAP_X) + 4, row[i] * (STAGE_H + STAGE_GAP_Y) + STAGE_GAP_Y);
    let _ = write!(
        out,
        "<h3>Stages</h3><svg class=dag id=stages-dag xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' \
viewBox='0 0 {width} {height}' role=img aria-label='The stages of the job and the shuffles between them'>"
    );
    for (i, s) in stages.iter().enumerate() {
        let (x1, y1) = at(i);
        for &p in s.parents.iter().filter(|&&p| (p as usize) < i) {
            let (x0, y0) = at(p as usize);
            let _ = write!(
                out,
                "<line class=edge data-from='{p}' data-to='{i}' x1='{x0}' y1='{y0}' x2='{x1}' y2='{y1}' stroke='#888'/>",
                x0 = x0 + STAGE_W,
                y0 = y0 + STAGE_H / 2,
                y1 = y1 + STAGE_H / 2,
            );
        }
    }
    for (i, s) in stages.iter().enumerate() {
        let (x, y) = at(i);
        let state = match (s.skipped, s.done == s.tasks) {
            (true, _) => "skipped",
            (false, true) => "succeeded",
            (false, false) => "running",
        };
        let _ = write!(
            out,
            "<g class='stage {state}' data-stage='{id}'><rect x='{x}' y='{y}' width='{STAGE_W}' height='{STAGE_H}' rx='4'/>\
<text x='{tx}' y='{ty}'>stage {id} · {kind}</text><text x='{tx}' y='{ty2}'>{done}/{tasks} tasks{rerun}</text>\
<title>stage {id} ({kind}): {done} of {tasks} tasks done, {attempts} attempts, {rerun_tasks} run again, \
read {read}, wrote {wrote}</title></g>",
            id = s.id,
            kind = kind_name(s.kind),
            tx = x + 6,
            ty = y + 18,
            ty2 = y + 36,
            done = s.done,
            tasks = s.tasks,
            rerun = match s.rerun_tasks {
                0 => String::new(),
                n => format!(" · {n} rerun"),
            },
            attempts = s.attempts,
            rerun_tasks = s.rerun_tasks,
            read = bytes(s.shuffle_read_bytes),
            wrote = bytes(s.shuffle_write_bytes),
        );
    }
    out.push_str(
        "</svg><table id=stages><tr><th>Stage</th><th>Kind</th><th>Reads</th><th>Tasks</th><th>Attempts</th>\
<th>Run again</th><th>Fetch failures</th><th>Shuffle read</th><th>Shuffle written</th></tr>",
    );
    for s in stages {
        let reads: Vec<String> = s.parents.iter().map(u32::to_string).collect();
        let _ = write!(
            out,
            "<tr data-stage='{id}'><td>{id}</td><td>{kind}{skipped}</td><td>{reads}</td><td>{done}/{tasks}</td><td>{attempts}</td>\
<td>{rerun}</td><td>{fetch}</td><td>{read}</td><td>{wrote}</td></tr>",
            id = s.id,
            kind = kind_name(s.kind),
            skipped = if s.skipped { " (skipped)" } else { "" },
            reads = if reads.is_empty() { "—".to_owned() } else { reads.join(", ") },
            done = s.done,
            tasks = s.tasks,
            attempts = s.attempts,
            rerun = s.rerun_tasks,
            fetch = s.fetch_failures,
            read = bytes(s.shuffle_read_bytes),
            wrote = bytes(s.shuffle_write_bytes),
        );
    }
    out.push_str("</table>");
}

fn kind_name(kind: StageKind) -> &'static str {
    match kind {
        StageKind::Shuffle => "shuffle",
        StageKind::Result => "result",
    }
}

/// The job's attempts as bars, a lane per slot an executor used, with the moments its
/// executors were added and removed while it ran (as Spark's event timeline).
fn timeline(out: &mut String, entry: &JobEntry, executors: &[ExecutorStatus], now: u64) {
    if entry.attempts.is_empty() {
        return;
    }
    let start = entry.started_ms;
    let span = now.saturating_sub(start).max(1);
    // Each executor's attempts, in launch order, packed into the fewest lanes.
    let mut by_executor: BTreeMap<&str, Vec<&AttemptSpan>> = BTreeMap::new();
    for a in entry.attempts.values() {
        by_executor.entry(&a.executor).or_default().push(a);
    }
    let mut rows: Vec<(&str, usize, &AttemptSpan)> = Vec::new();
    let mut lanes_of: Vec<(&str, usize)> = Vec::new();
    for (executor, mut attempts) in by_executor {
        attempts.sort_by_key(|a| (a.launched_ms, a.index, a.attempt));
        let mut lane_free: Vec<u64> = Vec::new();
        for a in attempts {
            let end = a.ended_ms.unwrap_or(now);
            let lane = match lane_free.iter().position(|&free| free <= a.launched_ms) {
                Some(lane) => lane,
                None => {
                    lane_free.push(0);
                    lane_free.len() - 1
                }
            };
            lane_free[lane] = end.max(a.launched_ms.saturating_add(1));
            rows.push((executor, lane, a));
        }
        lanes_of.push((executor, lane_free.len()));
    }
    let mut first_lane: BTreeMap<&str, u64> = BTreeMap::new();
    let mut lanes = 0u64;
    for (executor, n) in &lanes_of {
        first_lane.insert(executor, lanes);
        lanes += *n as u64;
    }
    let height = lanes * LANE + 20;
    let width = LABEL + TIMELINE_WIDTH + 10;
    let _ = write!(
        out,
        "<h3>Timeline</h3><p class=muted>{n} attempt{ns} on {e} executor{es} over {d}{more}</p>\
<svg class=timeline id=timeline xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' \
viewBox='0 0 {width} {height}' role=img aria-label='Task attempts by executor slot over time'>",
        n = entry.attempts.len(),
        ns = if entry.attempts.len() == 1 { "" } else { "s" },
        e = lanes_of.len(),
        es = if lanes_of.len() == 1 { "" } else { "s" },
        d = millis(span),
        more = match entry.attempts_not_kept {
            0 => String::new(),
            n => format!("; {n} later attempts are not drawn"),
        },
    );
    for (executor, _) in &lanes_of {
        let y = first_lane[executor] * LANE;
        let _ = write!(
            out,
            "<text x='4' y='{ty}'>{name}</text><line x1='0' x2='{width}' y1='{y}' y2='{y}' stroke='#e4e4e4'/>",
            ty = y + LANE - 3,
            name = esc(executor),
        );
    }
    // A log's times may be anything: no product here can overflow.
    let x = |ms: u64| {
        LABEL
            + (u128::from(ms.saturating_sub(start).min(span)) * u128::from(TIMELINE_WIDTH) / u128::from(span))
                as u64
    };
    for (executor, lane, a) in rows {
        let end = a.ended_ms.unwrap_or(now);
        let (x0, x1) = (x(a.launched_ms), x(end));
        let y = (first_lane[executor] + lane as u64) * LANE + 2;
        let _ = write!(
            out,
            "<rect class='{state}{copy}' data-task='{index}' data-attempt='{attempt}' x='{x0}' y='{y}' width='{w}' \
height='{h}'><title>task {index}, attempt {attempt} on {executor}: {state}, {duration}{why}</title></rect>",
            state = a.state,
            copy = if a.speculative.is_some() { " speculative" } else { "" },
            why = a
                .speculative
                .as_deref()
                .map(|w| format!("; a speculative copy: the original {}", esc(w)))
                .unwrap_or_default(),
            index = a.index,
            attempt = a.attempt,
            // Back-to-back attempts on one slot are bars of their own: a pixel apart.
            w = match x1.saturating_sub(x0) {
                w @ 0..=2 => w.max(1),
                w => w - 1,
            },
            h = LANE - 3,
            executor = esc(executor),
            duration = millis(end.saturating_sub(a.launched_ms)),
        );
        // Its wait for the job's component, a phase of its own at the bar's start.
        if a.compile_ms > 0 {
            let w = x(a.launched_ms.saturating_add(a.compile_ms)).min(x1).saturating_sub(x0).max(1);
            let _ = write!(
                out,
                "<rect class=compile data-of='{index}/{attempt}' x='{x0}' y='{y}' width='{w}' \
height='{h}'><title>task {index}, attempt {attempt}: {compile} waiting for the job's component to compile</title></rect>",
                index = a.index,
                attempt = a.attempt,
                h = LANE - 3,
                compile = millis(a.compile_ms),
            );
        }
    }
    // Executors added or removed while the job ran: a mark across their lanes.
    for (executor, n) in &lanes_of {
        let Some(e) = executors.iter().find(|e| e.id.as_str() == *executor) else { continue };
        let (y1, y2) = (first_lane[executor] * LANE, (first_lane[executor] + *n as u64) * LANE);
        let removed =
            e.removed_ms.map(|ms| (ms, format!("removed: {}", e.removed.as_deref().unwrap_or("gone"))));
        for (ms, what) in e.added_ms.map(|ms| (ms, "added".to_owned())).into_iter().chain(removed) {
            if ms <= start || ms > now {
                continue;
            }
            let class = if what == "added" { "executor-added" } else { "executor-removed" };
            let _ = write!(
                out,
                "<line class={class} data-executor='{id}' x1='{x}' x2='{x}' y1='{y1}' y2='{y2}'><title>executor {id} {what} at +{after}</title></line>",
                id = esc(executor),
                x = x(ms),
                what = esc(&what),
                after = millis(ms - start),
            );
        }
    }
    let _ = write!(
        out,
        "<text x='{LABEL}' y='{ty}'>{from}</text><text x='{tx}' y='{ty}' text-anchor='end'>+{d}</text></svg>",
        ty = height - 4,
        from = moment(start),
        tx = LABEL + TIMELINE_WIDTH,
        d = millis(span),
    );
}

/// Failed attempts, folded by what they said: one summary line per kind of failure with
/// how many attempts and which tasks, and its backtrace and log shown once, behind it.
fn folded_failures(out: &mut String, frame: &Frame, job: JobId, failures: &[FailureRecord]) {
    let mut groups: Vec<(String, Vec<&FailureRecord>)> = Vec::new();
    for f in failures {
        let said = format!("{}: {}", f.failure.kind(), f.failure);
        match groups.iter_mut().find(|(s, _)| *s == said) {
            Some((_, group)) => group.push(f),
            None => groups.push((said, vec![f])),
        }
    }
    out.push_str("<div id=failures>");
    for (key, (_, group)) in groups.into_iter().enumerate() {
        let first = group[0];
        let mut tasks: Vec<u32> = group.iter().map(|f| f.task).collect();
        tasks.dedup();
        let shown: Vec<String> = tasks
            .iter()
            .take(20)
            .map(|t| format!("<a href='{}/jobs/{job}/tasks/{t}'>{t}</a>", esc(frame.base)))
            .collect();
        let _ = write!(
            out,
            "<details class=failure id='failure-{key}'><summary><strong class=kind>{kind}</strong> — {message} · \
<span class=count>{n} attempt{plural}</span> of task{tplural} {tasks}{more}</summary>",
            kind = first.failure.kind(),
            message = esc(&first.failure.to_string()),
            n = group.len(),
            plural = if group.len() == 1 { "" } else { "s" },
            tplural = if tasks.len() == 1 { "" } else { "s" },
            tasks = shown.join(", "),
            more = if tasks.len() > 20 { format!(" and {} more", tasks.len() - 20) } else { String::new() },
        );
        failure_detail(out, first);
        out.push_str("<p>Attempts: ");
        let attempts: Vec<String> = group
            .iter()
            .map(|f| format!("task {} attempt {} on {}", f.task, f.attempt, esc(&f.executor)))
            .collect();
        out.push_str(&attempts.join("; "));
        out.push_str("</p></details>");
    }
    out.push_str("</div>");
}

fn failure_detail(out: &mut String, f: &FailureRecord) {
    if let TaskFailure::Trap { backtrace: Some(backtrace), .. } = &f.failure {
        let _ = write!(out, "<p>Guest backtrace:</p><pre class=backtrace>{}</pre>", esc(backtrace));
    }
    if !f.log_tail.is_empty() {
        let _ = write!(out, "<p>End of its log:</p><pre class=log>{}</pre>", esc(&f.log_tail));
    }
}

fn failure(out: &mut String, frame: &Frame, job: JobId, f: &FailureRecord) {
    let _ = write!(
        out,
        "<div class=failure><p><a href='{base}/jobs/{job}/tasks/{task}'>Task {task}</a>, attempt {attempt} on \
executor {executor}: <strong class=kind>{kind}</strong> — {message}</p>",
        base = esc(frame.base),
        task = f.task,
        attempt = f.attempt,
        executor = esc(&f.executor),
        kind = f.failure.kind(),
        message = esc(&f.failure.to_string()),
    );
    failure_detail(out, f);
    out.push_str("</div>");
}

/// One task: its latest attempt, every attempt's times, and every failed one.
pub fn task(frame: &Frame, entry: &JobEntry, index: u32) -> String {
    let job = entry.status.job;
    let mut out = format!(
        "<h2>Job {job} (<a href='{base}/jobs/{job}'>{name}</a>), task {index}</h2>",
        base = esc(frame.base),
        name = esc(&entry.status.name)
    );
    match entry.tasks.get(&index) {
        Some(t) => {
            out.push_str("<table id=task>");
            out.push_str(TASK_HEADER);
            task_row(&mut out, frame, job, t);
            out.push_str("</table>");
            if let Some(log) = &t.log_tail {
                let _ = write!(out, "<p>End of its log:</p><pre class=log>{}</pre>", esc(log));
            }
        }
        None => out.push_str("<p>Not launched.</p>"),
    }
    let attempts: Vec<&AttemptSpan> =
        entry.attempts.range((index, 0)..=(index, u32::MAX)).map(|(_, a)| a).collect();
    if !attempts.is_empty() {
        out.push_str(
            "<h3>Attempts</h3><table id=attempts><tr><th>Attempt</th><th>Executor</th><th>State</th>\
<th>Launched</th><th>Ended</th><th>Speculative copy</th></tr>",
        );
        for a in attempts {
            let _ = write!(
                out,
                "<tr class='{state}'><td>{attempt}</td><td>{executor}</td><td>{state}</td><td>{launched}</td><td>{ended}</td><td>{why}</td></tr>",
                state = a.state,
                attempt = a.attempt,
                executor = esc(&a.executor),
                launched = moment_ms(a.launched_ms),
                ended = a.ended_ms.map(moment_ms).unwrap_or_default(),
                why = a
                    .speculative
                    .as_deref()
                    .map(|w| format!("yes: the original {}", esc(w)))
                    .unwrap_or_default(),
            );
        }
        out.push_str("</table>");
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

/// A moment, as UTC to the millisecond (a task's times).
fn moment_ms(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}

/// The application's configuration as its driver was given it, secrets redacted; the
/// defaults in force for every `flint.*` key not set; the versions it runs.
pub fn config(version: &str, conf: &flint_proto::Conf) -> String {
    let mut out = format!(
        "<h2>Versions</h2><table id=versions><tr><th>Of</th><th>Version</th></tr>\
<tr><td>Flint</td><td>{version}</td></tr><tr><td>The WIT contract</td><td>flint:task@{contract}</td></tr></table>\
<h2>Configuration</h2><p>As the driver was given it. Values of keys naming a secret, password, token, \
credential or access key are redacted; so is a password in a URL.</p><table id=config><tr><th>Key</th><th>Value</th></tr>",
        version = esc(version),
        contract = flint_runtime::CONTRACT,
    );
    if conf.is_empty() {
        out.push_str("<tr><td colspan=2 class=muted>nothing set: every key has its default</td></tr>");
    }
    for (key, value) in conf {
        let _ = write!(out, "<tr><td>{}</td><td>{}</td></tr>", esc(key), esc(value));
    }
    out.push_str(
        "</table><h2>Defaults in force</h2><p>Every other <code>flint.*</code> key, with the value it has \
unset. An executor started with its own cores, memory, roots, local directories and disk bounds \
keeps them over the driver's; a job may set its own task keys.</p>\
<table id=defaults><tr><th>Key</th><th>Default</th></tr>",
    );
    for (key, default) in flint_proto::Settings::DEFAULTS {
        if !conf.contains_key(*key) {
            let _ = write!(out, "<tr><td>{}</td><td>{}</td></tr>", esc(key), esc(default));
        }
    }
    out.push_str("</table>");
    out
}

/// A folder name as one segment of a URL path: anything but letters, digits and
/// `-._~` percent-encoded, so `?`, `#`, `/` or a quote in a name cannot change the link.
pub fn url_segment(name: &str) -> String {
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
mod tests;
