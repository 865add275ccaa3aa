//! What happened to the application, as events, and the status store built from them.
//!
//! The event loop says what it did as [`AppEvent`]s; a [`Store`] applies them into the
//! records the status page shows (jobs, their tasks and failures, executors), and the
//! event log writes the same events to disk, so `flint history` rebuilds the same store
//! from the files the live driver left. One piece of code turns events into pages, live
//! or after the driver is gone.

use flint_proto::{
    AttemptState, ClusterStatus, ExecutorId, ExecutorState, ExecutorStatus, FailureRecord, JobId,
    JobProgress, JobState, JobStatus, TaskFailure, TaskMetrics, TaskRecord,
};
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
pub use summary::{METRICS, SUCCEEDED_KEPT, Sketch, SketchData, Succeeded};

/// The event log's format version. A reader accepts this one and every earlier one.
pub const EVENT_LOG_VERSION: u32 = 1;

/// Bytes of task log tails a job's records keep beyond its failures' own.
const JOB_LOG_BUDGET: usize = 4 << 20;

/// Removed executors a store keeps, as the control core does.
const REMOVED_KEPT: usize = 1000;

/// Task records of finished jobs a store keeps (as `spark.ui.retainedTasks`): past
/// it, the oldest finished jobs lose theirs (they keep their summary and failures).
pub const RETAINED_TASKS: usize = 100_000;

/// Failed attempts a job's record keeps; later ones are counted, not kept.
pub const FAILURES_KEPT: usize = 1000;

/// Attempts a job's timeline keeps; later ones are counted, not drawn.
pub const TIMELINE_KEPT: usize = 10_000;

/// Why an executor still registered when its application's log closed shows as gone.
pub const APPLICATION_ENDED: &str = "the application ended";

/// Something that happened to the application. Tokens are named by service, never
/// carried; a job's configuration is never carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AppEvent {
    ApplicationStart {
        app_id: String,
        flint_version: String,
        /// The driver's configuration, redacted ([`flint_proto::config::redacted`]);
        /// logs before this field was added have none.
        #[serde(default)]
        config: flint_proto::Conf,
    },
    /// The driver stopped; `executors` are the last word on every executor it had.
    ApplicationEnd {
        executors: Vec<ExecutorStatus>,
    },
    ExecutorAdded {
        executor: ExecutorStatus,
    },
    /// Draining or excluded.
    ExecutorUpdated {
        executor: ExecutorStatus,
    },
    /// Its `removed` says why.
    ExecutorRemoved {
        executor: ExecutorStatus,
    },
    JobStart {
        job: JobId,
        name: String,
        tasks: u32,
    },
    JobEnd {
        job: JobId,
        succeeded: bool,
        /// Stopped on request, or by the driver stopping (logs before this field was
        /// added say only failed).
        #[serde(default)]
        cancelled: bool,
        error: Option<String>,
        attempts: u32,
        /// The job's last counts as the driver kept them (logs before this field was
        /// added keep the counts their task events added up to).
        #[serde(default)]
        progress: Option<JobProgress>,
        /// Its stages at its end (logs before this field was added have none).
        #[serde(default)]
        stages: Vec<flint_proto::StageReport>,
    },
    TaskStart {
        job: JobId,
        index: u32,
        attempt: u32,
        executor: ExecutorId,
        /// Whether the live store drew it on the job's timeline (it keeps the first
        /// [`TIMELINE_KEPT`] attempts to start): written by the event log, whose lines
        /// come in another order than the live store saw them; the live store's own
        /// events have none and follow the rule.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeline: Option<bool>,
    },
    TaskEnd {
        job: JobId,
        index: u32,
        attempt: u32,
        executor: ExecutorId,
        duration_ms: u64,
        failure: Option<TaskFailure>,
        log_tail: Option<String>,
        /// What the executor's host measured of its input (logs before this field was
        /// added have none).
        #[serde(default)]
        metrics: TaskMetrics,
    },
    /// Tasks that each succeeded at their first attempt with nothing more to say: the
    /// event log writes this in place of a start and an end line for each (the live
    /// store gets those; a log read back gets this).
    TasksSucceeded {
        job: JobId,
        /// Their indices, as ranges `[start, end)`.
        tasks: Vec<(u32, u32)>,
        /// How many ran on each executor.
        executors: Vec<(ExecutorId, u32)>,
        /// What they measured, a sketch for each row of the task summary.
        summary: Vec<SketchData>,
        /// The slowest of them, whole.
        slowest: Vec<TaskRecord>,
        /// Those the live store drew on the timeline: (index, attempt, its executor's
        /// place in `executors`, launched, ended); and how many it did not.
        #[serde(default)]
        spans: Vec<(u32, u32, u32, u64, u64)>,
        #[serde(default)]
        spans_not_kept: u64,
        /// The bytes they read and wrote on each executor, in the order of `executors`.
        #[serde(default)]
        bytes: Vec<(u64, u64)>,
    },
    /// A copy of a straggling attempt was started (its `task_start` follows), and why.
    Speculated {
        job: JobId,
        index: u32,
        attempt: u32,
        original: u32,
        straggler: ExecutorId,
        reason: String,
        /// As a `task_start`'s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeline: Option<bool>,
    },
    /// Of a task's two attempts `winner` succeeded first, and `loser` was killed.
    SpeculationEnded {
        job: JobId,
        index: u32,
        winner: u32,
        loser: u32,
    },
    /// A done task's output was lost before the driver had it (its executor went, or
    /// the combining instance holding it failed): the task is not done and runs again.
    TaskLost {
        job: JobId,
        index: u32,
    },
    TokenRenewed {
        service: String,
        expires_at_ms: u64,
    },
    TokenRenewalFailed {
        service: String,
    },
}

/// An event as one line of the log: its version and time beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub v: u32,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    #[serde(flatten)]
    pub event: AppEvent,
}

/// Why a line of an event log is not read (it is skipped, and counted).
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("event log version {0}; this flint reads up to {EVENT_LOG_VERSION}")]
    Version(u64),
    #[error("no version")]
    NoVersion,
}

impl Envelope {
    pub fn now(event: AppEvent) -> Envelope {
        Envelope { v: EVENT_LOG_VERSION, at_ms: now_ms(), event }
    }

    /// Reads one line of an event log, of this version or an earlier one.
    pub fn parse(line: &str) -> Result<Envelope, LineError> {
        let value: serde_json::Value = serde_json::from_str(line)?;
        match value.get("v").and_then(serde_json::Value::as_u64) {
            Some(1) => Ok(serde_json::from_value(value)?),
            Some(v) => Err(LineError::Version(v)),
            None => Err(LineError::NoVersion),
        }
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A job as the store keeps it.
#[derive(Debug, Clone)]
pub struct JobEntry {
    pub status: JobStatus,
    pub started_ms: u64,
    pub ended_ms: Option<u64>,
    pub error: Option<String>,
    /// By task index, from the task's first launch: every task running, failed, lost
    /// or copied, and of those that succeeded the slowest [`SUCCEEDED_KEPT`].
    pub tasks: BTreeMap<u32, TaskRecord>,
    /// What its succeeded tasks measured, and which keep their records.
    pub succeeded: Succeeded,
    /// Succeeded tasks whose records are not kept (they were not among the slowest).
    pub tasks_not_kept: RoaringBitmap,
    /// The job finished long enough ago that its task records were let go
    /// ([`RETAINED_TASKS`]).
    pub tasks_forgotten: bool,
    /// Failed attempts in the order they were reported, the first [`FAILURES_KEPT`].
    pub failures: Vec<FailureRecord>,
    /// Failed attempts beyond those.
    pub failures_not_kept: u64,
    /// Every attempt, by task index and attempt number, for the timeline: the first
    /// [`TIMELINE_KEPT`].
    pub attempts: BTreeMap<(u32, u32), AttemptSpan>,
    /// Attempts beyond those.
    pub attempts_not_kept: u64,
    log_budget: usize,
}

/// One attempt as the timeline draws it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptSpan {
    pub index: u32,
    pub attempt: u32,
    pub executor: ExecutorId,
    pub state: AttemptState,
    /// Milliseconds since the Unix epoch.
    pub launched_ms: u64,
    pub ended_ms: Option<u64>,
    /// A speculative copy: why it was started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<String>,
    /// Milliseconds it waited at its start for its job's component to compile.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compile_ms: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The application's records, built from its events.
#[derive(Debug, Clone, Default)]
pub struct Store {
    pub app_id: String,
    pub started_ms: u64,
    /// When the driver stopped; `None` while it runs (or if it died without saying).
    pub ended_ms: Option<u64>,
    pub flint_version: String,
    /// The driver's configuration, redacted.
    pub config: flint_proto::Conf,
    executors: BTreeMap<ExecutorId, ExecutorStatus>,
    removed: VecDeque<ExecutorId>,
    jobs: BTreeMap<JobId, JobEntry>,
    finished: VecDeque<JobId>,
    retained_jobs: usize,
    /// Task records held by finished jobs.
    finished_tasks: usize,
}

impl Store {
    /// A store keeping up to `retained_jobs` finished jobs (the oldest go first).
    pub fn new(retained_jobs: usize) -> Store {
        Store { retained_jobs: retained_jobs.max(1), ..Store::default() }
    }

    pub fn apply(&mut self, envelope: &Envelope) {
        let at = envelope.at_ms;
        match &envelope.event {
            AppEvent::ApplicationStart { app_id, flint_version, config } => {
                self.app_id = app_id.clone();
                self.started_ms = at;
                self.flint_version = flint_version.clone();
                // Redacted again: a log written by hand, or by a flint that did not.
                self.config = flint_proto::config::redacted(config);
            }
            AppEvent::ApplicationEnd { executors } => {
                self.ended_ms = Some(at);
                for executor in executors {
                    self.set_executor(at, executor.clone());
                }
                // A closed log shows no live executor: those still registered ended
                // with their application.
                for executor in self.executors.values_mut().filter(|e| e.removed.is_none()) {
                    executor.removed = Some(APPLICATION_ENDED.into());
                    executor.state = ExecutorState::Removed;
                    executor.removed_ms = Some(at);
                    executor.running = 0;
                }
                for job in self.jobs.values_mut().filter(|j| j.ended_ms.is_none()) {
                    job.end(at, JobState::Failed, Some("the driver stopped".into()), None);
                }
            }
            AppEvent::ExecutorAdded { executor } => {
                self.executors.remove(&executor.id);
                self.set_executor(at, executor.clone())
            }
            AppEvent::ExecutorUpdated { executor } => self.set_executor(at, executor.clone()),
            AppEvent::ExecutorRemoved { executor } => {
                let reason = executor.removed.clone().unwrap_or_default();
                // Its running attempts are lost with it (the core requeues them).
                for job in self.jobs.values_mut().filter(|j| j.ended_ms.is_none()) {
                    for task in job.tasks.values_mut() {
                        if task.state == AttemptState::Running && task.executor == executor.id {
                            task.state = AttemptState::Failed;
                            task.failure = Some(TaskFailure::ExecutorLost {
                                executor: executor.id.clone(),
                                reason: reason.clone(),
                            });
                            job.status.progress.running = job.status.progress.running.saturating_sub(1);
                        }
                    }
                    for span in job.attempts.values_mut() {
                        if span.state == AttemptState::Running && span.executor == executor.id {
                            span.state = AttemptState::Failed;
                            span.ended_ms = Some(at);
                        }
                    }
                }
                self.set_executor(at, executor.clone());
            }
            AppEvent::JobStart { job, name, tasks } => {
                let tasks = (*tasks).min(crate::MAX_TASKS);
                self.jobs.insert(
                    *job,
                    JobEntry {
                        status: JobStatus {
                            job: *job,
                            name: name.clone(),
                            state: JobState::Running,
                            progress: JobProgress { total: tasks, ..JobProgress::default() },
                            started_ms: Some(at),
                            ended_ms: None,
                            stages: Vec::new(),
                        },
                        started_ms: at,
                        ended_ms: None,
                        error: None,
                        tasks: BTreeMap::new(),
                        succeeded: Succeeded::default(),
                        tasks_not_kept: RoaringBitmap::new(),
                        tasks_forgotten: false,
                        failures: Vec::new(),
                        failures_not_kept: 0,
                        attempts: BTreeMap::new(),
                        attempts_not_kept: 0,
                        log_budget: JOB_LOG_BUDGET,
                    },
                );
            }
            AppEvent::JobEnd { job, succeeded, cancelled, error, progress, stages, .. } => {
                if let Some(entry) = self.jobs.get_mut(job).filter(|j| j.ended_ms.is_none()) {
                    let state = match (succeeded, cancelled) {
                        (true, _) => JobState::Succeeded,
                        (false, true) => JobState::Cancelled,
                        (false, false) => JobState::Failed,
                    };
                    entry.end(at, state, error.clone(), *progress);
                    entry.status.stages =
                        stages.iter().take(flint_core::control::MAX_STAGES).cloned().collect();
                    self.finished_tasks += entry.records();
                    self.finished.push_back(*job);
                    while self.finished.len() > self.retained_jobs {
                        if let Some(old) = self.finished.pop_front().and_then(|old| self.jobs.remove(&old)) {
                            self.finished_tasks -= old.records();
                        }
                    }
                    // The oldest finished jobs let their task records go first.
                    let mut oldest = self.finished.iter();
                    while self.finished_tasks > RETAINED_TASKS
                        && let Some(old) = oldest.next()
                    {
                        if let Some(old) = self.jobs.get_mut(old).filter(|j| j.records() > 0) {
                            self.finished_tasks -= old.records();
                            old.tasks = BTreeMap::new();
                            old.attempts = BTreeMap::new();
                            old.succeeded = Succeeded::default();
                            old.tasks_not_kept = RoaringBitmap::new();
                            old.tasks_forgotten = true;
                        }
                    }
                }
            }
            AppEvent::TaskStart { job, index, attempt, executor, timeline } => {
                let Some(entry) = self.jobs.get_mut(job).filter(|e| e.ended_ms.is_none()) else { return };
                if *index >= entry.status.progress.total {
                    return;
                }
                // A task counted done without a record starts again: it is not done (a
                // record and that count are never both kept for a task).
                if entry.tasks_not_kept.remove(*index) {
                    entry.status.progress.done = entry.status.progress.done.saturating_sub(1);
                }
                let slot = entry.tasks.entry(*index);
                let running = matches!(&slot, std::collections::btree_map::Entry::Occupied(t) if t.get().state == AttemptState::Running);
                if !running {
                    entry.status.progress.running += 1;
                }
                let record = TaskRecord {
                    index: *index,
                    attempt: *attempt,
                    executor: executor.clone(),
                    state: AttemptState::Running,
                    launched_ms: at,
                    duration_ms: None,
                    ended_ms: None,
                    metrics: TaskMetrics::default(),
                    failure: None,
                    log_tail: None,
                };
                let span = AttemptSpan {
                    index: *index,
                    attempt: *attempt,
                    executor: executor.clone(),
                    state: AttemptState::Running,
                    launched_ms: at,
                    ended_ms: None,
                    speculative: None,
                    compile_ms: 0,
                };
                let timeline = *timeline;
                match slot {
                    // A copy beside a running attempt: the task's record stays the
                    // original's until one of them ends.
                    std::collections::btree_map::Entry::Occupied(_) if running => {}
                    std::collections::btree_map::Entry::Occupied(mut t) => *t.get_mut() = record,
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(record);
                    }
                }
                entry.keep_attempt(span, timeline);
            }
            AppEvent::TaskEnd { job, index, attempt, executor, duration_ms, failure, log_tail, metrics } => {
                let Some(entry) = self.jobs.get_mut(job).filter(|e| e.ended_ms.is_none()) else { return };
                if *index >= entry.status.progress.total || entry.tasks_not_kept.contains(*index) {
                    return; // out of range, or the task's output was already taken
                }
                // The executor's own counts, for a log that ends before its driver
                // gives the last word on them (a killed driver's, or one still running).
                if let Some(e) = self.executors.get_mut(executor) {
                    e.input_bytes = e.input_bytes.saturating_add(metrics.input_bytes);
                    e.shuffle_write_bytes = e.shuffle_write_bytes.saturating_add(metrics.shuffle_write_bytes);
                    match failure {
                        None => e.tasks_done += 1,
                        Some(f) if f.counts_against_task() => e.tasks_failed += 1,
                        Some(_) => {}
                    }
                }
                let state = match failure {
                    None => AttemptState::Succeeded,
                    Some(_) => AttemptState::Failed,
                };
                // Its start decided whether the timeline draws it.
                if let Some(span) = entry.attempts.get_mut(&(*index, *attempt)) {
                    span.state = state;
                    span.ended_ms = Some(at);
                    span.compile_ms = metrics.compile_us / 1000;
                }
                // Another attempt of the task runs on (its original or its copy): a
                // failure here is counted and kept, and leaves the task's record to it.
                let other_runs = entry
                    .attempts
                    .range((*index, 0)..=(*index, u32::MAX))
                    .any(|(key, span)| key.1 != *attempt && span.state == AttemptState::Running);
                let progress = &mut entry.status.progress;
                let record = entry.tasks.entry(*index).or_insert_with(|| TaskRecord {
                    index: *index,
                    attempt: *attempt,
                    executor: executor.clone(),
                    state: AttemptState::Running,
                    launched_ms: at.saturating_sub(*duration_ms),
                    duration_ms: None,
                    ended_ms: None,
                    metrics: TaskMetrics::default(),
                    failure: None,
                    log_tail: None,
                });
                if record.attempt > *attempt {
                    return; // a later attempt (a retry) already holds the record
                }
                if record.state == AttemptState::Succeeded {
                    return; // the task's output was already taken: the first success wins
                }
                let tail = log_tail.as_deref().unwrap_or_default();
                if other_runs && failure.is_some() {
                    // The task runs on in its other attempt: the failure is counted and
                    // kept, the record stays that attempt's.
                    let failure = failure.as_ref().expect("checked");
                    if failure.counts_against_task() {
                        progress.failed_attempts += 1;
                    }
                    if entry.failures.len() < FAILURES_KEPT {
                        let at = flint_proto::Attempt { job: *job, index: *index, number: *attempt };
                        entry.failures.push(FailureRecord::new(at, executor.clone(), failure.clone(), tail));
                    } else {
                        entry.failures_not_kept += 1;
                    }
                    return;
                }
                if record.state == AttemptState::Running {
                    progress.running = progress.running.saturating_sub(1);
                }
                match failure {
                    None => {
                        progress.done += 1;
                        record.state = AttemptState::Succeeded;
                        record.failure = None;
                    }
                    Some(failure) => {
                        // As the control core counts them: not kills, not lost executors.
                        if failure.counts_against_task() {
                            progress.failed_attempts += 1;
                        }
                        record.state = AttemptState::Failed;
                        record.failure = Some(failure.clone());
                        if entry.failures.len() < FAILURES_KEPT {
                            let at = flint_proto::Attempt { job: *job, index: *index, number: *attempt };
                            entry.failures.push(FailureRecord::new(
                                at,
                                executor.clone(),
                                failure.clone(),
                                tail,
                            ));
                        } else {
                            entry.failures_not_kept += 1;
                        }
                    }
                }
                record.attempt = *attempt;
                record.executor = executor.clone();
                record.duration_ms = Some(*duration_ms);
                record.ended_ms = Some(at);
                record.metrics = *metrics;
                record.log_tail = None;
                if !tail.is_empty() && entry.log_budget >= tail.len() {
                    entry.log_budget -= tail.len();
                    record.log_tail = Some(tail.to_owned());
                }
                if failure.is_none() {
                    // Of the succeeded, only the slowest keep their records.
                    let record = &entry.tasks[index];
                    if let Some(faster) = entry.succeeded.add(record) {
                        if let Some(gone) = entry.tasks.remove(&faster) {
                            entry.log_budget += gone.log_tail.map_or(0, |t| t.len());
                        }
                        entry.tasks_not_kept.insert(faster);
                    }
                }
            }
            AppEvent::TasksSucceeded {
                job,
                tasks,
                executors,
                summary,
                slowest,
                spans,
                spans_not_kept,
                bytes,
            } => {
                for (i, (id, n)) in executors.iter().enumerate() {
                    if let Some(e) = self.executors.get_mut(id) {
                        e.tasks_done += u64::from(*n);
                        let (read, written) = bytes.get(i).copied().unwrap_or_default();
                        e.input_bytes = e.input_bytes.saturating_add(read);
                        e.shuffle_write_bytes = e.shuffle_write_bytes.saturating_add(written);
                    }
                }
                let Some(entry) = self.jobs.get_mut(job).filter(|e| e.ended_ms.is_none()) else { return };
                entry.tasks_succeeded(tasks, summary, slowest);
                for &(index, attempt, on, launched_ms, ended_ms) in spans {
                    let Some((executor, _)) = executors.get(on as usize) else { continue };
                    if index >= entry.status.progress.total {
                        continue;
                    }
                    let span = AttemptSpan {
                        index,
                        attempt,
                        executor: executor.clone(),
                        state: AttemptState::Succeeded,
                        launched_ms,
                        ended_ms: Some(ended_ms),
                        speculative: None,
                        compile_ms: 0,
                    };
                    entry.keep_attempt(span, Some(true));
                }
                entry.attempts_not_kept = entry.attempts_not_kept.saturating_add(*spans_not_kept);
            }
            AppEvent::Speculated { job, index, attempt, reason, straggler, timeline, .. } => {
                let Some(entry) = self.jobs.get_mut(job).filter(|e| e.ended_ms.is_none()) else { return };
                // Its span, marked; its `task_start` (next) places it.
                entry.keep_attempt(
                    AttemptSpan {
                        index: *index,
                        attempt: *attempt,
                        executor: straggler.clone(),
                        state: AttemptState::Running,
                        launched_ms: at,
                        ended_ms: None,
                        speculative: Some(reason.clone()),
                        compile_ms: 0,
                    },
                    *timeline,
                );
            }
            AppEvent::SpeculationEnded { job, index, loser, .. } => {
                let Some(entry) = self.jobs.get_mut(job).filter(|e| e.ended_ms.is_none()) else { return };
                if let Some(span) = entry.attempts.get_mut(&(*index, *loser)) {
                    span.state = AttemptState::Killed;
                    span.ended_ms = Some(at);
                }
            }
            AppEvent::TaskLost { job, index } => {
                let Some(entry) = self.jobs.get_mut(job).filter(|e| e.ended_ms.is_none()) else { return };
                let kept = entry.tasks.get_mut(index).filter(|r| r.state == AttemptState::Succeeded);
                let was_done = match kept {
                    Some(record) => {
                        record.state = AttemptState::Lost;
                        entry.succeeded.forget(*index);
                        true
                    }
                    None => entry.tasks_not_kept.remove(*index),
                };
                if was_done {
                    entry.status.progress.done = entry.status.progress.done.saturating_sub(1);
                    entry.status.progress.outputs_lost += 1;
                }
            }
            AppEvent::TokenRenewed { .. } | AppEvent::TokenRenewalFailed { .. } => {}
        }
    }

    /// Takes the driver's word on an executor, keeping the times the store saw.
    fn set_executor(&mut self, at: u64, mut executor: ExecutorStatus) {
        let known = self.executors.get(&executor.id);
        executor.added_ms = known.and_then(|e| e.added_ms).or(Some(at));
        // The driver's word has no bytes: the store counts them from task ends.
        (executor.input_bytes, executor.shuffle_write_bytes) =
            known.map_or((0, 0), |e| (e.input_bytes, e.shuffle_write_bytes));
        executor.removed_ms = match executor.removed {
            Some(_) => known.and_then(|e| e.removed_ms).or(Some(at)),
            None => None,
        };
        if executor.removed.is_some() && !self.removed.contains(&executor.id) {
            self.removed.push_back(executor.id.clone());
            // An id that came back to life is no longer a removed record: it stays.
            if self.removed.len() > REMOVED_KEPT
                && let Some(old) = self.removed.pop_front()
                && self.executors.get(&old).is_some_and(|e| e.removed.is_some())
            {
                self.executors.remove(&old);
            }
        }
        self.executors.insert(executor.id.clone(), ExecutorStatus { last_heartbeat_ms: None, ..executor });
    }

    /// The application as `flint status` shows a live one.
    pub fn status(&self) -> ClusterStatus {
        ClusterStatus {
            app_id: self.app_id.clone(),
            executors: self.executors.values().cloned().collect(),
            jobs: self.jobs.values().map(|j| j.status.clone()).collect(),
            executors_starting: 0,
            allocation_stopped: None,
            executors_waiting: None,
            allocation_target: None,
            left_out: 0,
        }
    }

    /// Finished jobs and removed executors only: what the live snapshot takes from the
    /// store, without copying what it has live figures for.
    pub fn past(&self) -> (Vec<JobStatus>, Vec<ExecutorStatus>) {
        let jobs =
            self.finished.iter().filter_map(|id| self.jobs.get(id)).map(|j| j.status.clone()).collect();
        let executors = (self.removed.iter())
            .filter_map(|id| self.executors.get(id))
            .filter(|e| e.removed.is_some())
            .cloned()
            .collect();
        (jobs, executors)
    }

    pub fn job(&self, job: JobId) -> Option<&JobEntry> {
        self.jobs.get(&job)
    }

    /// The records of the executors a job's attempts ran on, removed ones included:
    /// when each was added and removed, for its timeline.
    pub fn executors_of(&self, entry: &JobEntry) -> Vec<ExecutorStatus> {
        let ids: std::collections::BTreeSet<&ExecutorId> =
            entry.attempts.values().map(|a| &a.executor).collect();
        ids.into_iter().filter_map(|id| self.executors.get(id)).cloned().collect()
    }

    /// What an executor's ended attempts read and wrote, for the live records the core
    /// gives.
    pub fn executor_bytes(&self, id: &ExecutorId) -> (u64, u64) {
        self.executors.get(id).map_or((0, 0), |e| (e.input_bytes, e.shuffle_write_bytes))
    }

    /// When the store saw an executor register, for the live records the core gives.
    pub fn executor_added(&self, id: &ExecutorId) -> Option<u64> {
        self.executors.get(id).and_then(|e| e.added_ms)
    }
}

impl JobEntry {
    fn end(&mut self, at: u64, state: JobState, error: Option<String>, progress: Option<JobProgress>) {
        self.ended_ms = Some(at);
        self.status.ended_ms = Some(at);
        self.error = error;
        self.status.state = state;
        if let Some(progress) = progress {
            self.status.progress = progress;
        }
        self.status.progress.running = 0;
        for task in self.tasks.values_mut().filter(|t| t.state == AttemptState::Running) {
            task.state = AttemptState::Killed;
        }
        for span in self.attempts.values_mut().filter(|s| s.state == AttemptState::Running) {
            span.state = AttemptState::Killed;
            span.ended_ms = Some(at);
        }
    }

    /// Task records and timeline attempts held: what [`RETAINED_TASKS`] bounds.
    /// Tasks that succeeded at their first attempt, read back from a log's batch: each
    /// counted done unless it is known already (a task's first success wins), the
    /// slowest kept whole, what they measured merged into the summary.
    fn tasks_succeeded(&mut self, tasks: &[(u32, u32)], summary: &[SketchData], slowest: &[TaskRecord]) {
        let total = self.status.progress.total;
        let mut added = 0u64;
        for &(start, end) in tasks {
            let range = start.min(total)..end.min(total);
            if range.is_empty() {
                continue; // a range the driver never writes: read from a crafted log
            }
            added += self.tasks_not_kept.insert_range(range.clone());
            for known in self.tasks.range(range).map(|(i, _)| *i) {
                if self.tasks_not_kept.remove(known) {
                    added = added.saturating_sub(1);
                }
            }
        }
        for record in slowest {
            if record.index >= total || self.tasks.contains_key(&record.index) {
                continue;
            }
            if self.tasks_not_kept.remove(record.index) {
                added = added.saturating_sub(1);
            }
            // Such a task said nothing and succeeded: whatever a crafted line claims.
            let record = TaskRecord {
                state: AttemptState::Succeeded,
                failure: None,
                log_tail: None,
                ..record.clone()
            };
            self.tasks.insert(record.index, record.clone());
            added += 1;
            if let Some(faster) = self.succeeded.keep(&record) {
                self.tasks.remove(&faster);
                self.tasks_not_kept.insert(faster);
            }
        }
        self.status.progress.done = self.status.progress.done.saturating_add(added as u32).min(total);
        for (sketch, data) in self.succeeded.sketches.iter_mut().zip(summary) {
            sketch.merge(data);
        }
    }

    /// What the job holds, in records (a summary's values and buckets count as such).
    fn records(&self) -> usize {
        self.tasks.len() + self.attempts.len() + self.succeeded.weight()
    }

    /// Draws an attempt on the timeline: the first [`TIMELINE_KEPT`] to start, or, for
    /// a line of the event log, as it says the live store did (`timeline`). A crafted
    /// log saying yes to more is still held to twice the bound.
    fn keep_attempt(&mut self, mut span: AttemptSpan, timeline: Option<bool>) {
        let key = (span.index, span.attempt);
        if let Some(known) = self.attempts.get(&key) {
            span.speculative = span.speculative.or_else(|| known.speculative.clone());
        }
        let keep = match timeline {
            _ if self.attempts.contains_key(&key) => true,
            None => self.attempts.len() < TIMELINE_KEPT,
            Some(keep) => keep && self.attempts.len() < 2 * TIMELINE_KEPT,
        };
        if keep {
            self.attempts.insert(key, span);
        } else {
            self.attempts_not_kept += 1;
        }
    }

    /// The tasks launched so far, by index.
    pub fn launched(&self) -> Vec<TaskRecord> {
        self.tasks.values().cloned().collect()
    }

    /// A copy of the entry holding only the task records `keep` picks (by position):
    /// what a page needs, taken under the store's lock so that the page is rendered
    /// after it is let go. The second value is how many tasks were launched in all.
    pub fn window(
        &self,
        keep: impl FnOnce(&BTreeMap<u32, TaskRecord>) -> BTreeMap<u32, TaskRecord>,
    ) -> (JobEntry, usize) {
        let entry = JobEntry {
            status: self.status.clone(),
            started_ms: self.started_ms,
            ended_ms: self.ended_ms,
            error: self.error.clone(),
            tasks: keep(&self.tasks),
            succeeded: self.succeeded.clone(),
            tasks_not_kept: self.tasks_not_kept.clone(),
            tasks_forgotten: self.tasks_forgotten,
            failures: self.failures.clone(),
            failures_not_kept: self.failures_not_kept,
            attempts: self.attempts.clone(),
            attempts_not_kept: self.attempts_not_kept,
            log_budget: self.log_budget,
        };
        (entry, self.tasks.len())
    }
}

mod summary;
#[cfg(test)]
pub(crate) mod tests;
