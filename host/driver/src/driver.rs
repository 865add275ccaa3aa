//! The driver: one event loop owns the scheduler, the executors' command channels and
//! every running job. Submitters, executors and fold workers talk to it by events.

use crate::fold::OrderedFold;
use crate::job::{JobRequest, SubmitError};
use crate::scheduler::{Input, Output, Policy, Scheduler};
use flint_executor::ComponentSource;
use flint_proto::wire::Rejection;
use flint_proto::{
    ClusterStatus, Conf, Digest, ExecutorCommand, ExecutorId, ExecutorStatus, FailureRecord, JobDescriptor,
    JobError, JobId, JobPlan, JobProgress, JobReport, JobStatus, PartitionSpec, Settings, StatusUpdate,
    TaskFailure, TaskLaunch, TaskState, World,
};
use flint_runtime::{Call, JobComponent, KillSwitch, Runtime, TaskContext};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};

/// Attempts an executor holds per slot when a job's tasks are short: the next one waits
/// on the executor, not a round trip away (see `Policy::pipeline`).
const PIPELINE: u32 = 8;

/// A file split is at most this large unless the user asks for fewer partitions.
const MAX_SPLIT: u64 = 64 << 20;

pub struct DriverConfig {
    pub app_id: String,
    /// The driver's configuration; a job's own `flint.task.*` keys override it.
    pub conf: Conf,
    /// The runtime merges and finishes run on.
    pub runtime: Arc<Runtime>,
}

/// An executor joining the cluster.
#[derive(Debug, Clone)]
pub struct ExecutorInfo {
    pub id: ExecutorId,
    pub host: String,
    pub cores: u32,
    pub memory: u64,
    pub slots: u32,
}

/// A submitted job: its progress as it runs, and its report when it ends.
pub struct JobHandle {
    pub id: JobId,
    pub progress: watch::Receiver<JobProgress>,
    pub report: oneshot::Receiver<JobReport>,
}

/// A handle on the driver's event loop. Cheap to clone.
#[derive(Clone)]
pub struct Driver {
    events: mpsc::UnboundedSender<Event>,
    shared: Arc<Shared>,
}

struct Shared {
    app_id: String,
    conf: Conf,
    runtime: Arc<Runtime>,
    components: Mutex<HashMap<Digest, Arc<Vec<u8>>>>,
    slots: AtomicU32,
}

impl ComponentSource for Driver {
    fn fetch(&self, digest: &Digest) -> Result<Vec<u8>, String> {
        self.component(digest)
            .map(|b| b.as_ref().clone())
            .ok_or_else(|| "the driver has no such component".into())
    }
}

enum Event {
    Submit {
        job: PreparedJob,
        reply: oneshot::Sender<JobHandle>,
    },
    Reserve {
        requested: Option<String>,
        pod_name: Option<String>,
        reply: oneshot::Sender<Result<ExecutorId, Rejection>>,
    },
    ExecutorUp {
        info: ExecutorInfo,
        commands: mpsc::UnboundedSender<ExecutorCommand>,
    },
    Heartbeat {
        id: ExecutorId,
    },
    Decommissioning {
        id: ExecutorId,
    },
    ExecutorLost {
        id: ExecutorId,
        reason: String,
    },
    Status(StatusUpdate),
    Folded {
        job: JobId,
        result: Result<Vec<u8>, JobError>,
    },
    Snapshot(oneshot::Sender<ClusterStatus>),
}

struct PreparedJob {
    name: String,
    component: Arc<JobComponent>,
    plan: JobPlan,
    config: Conf,
    settings: Settings,
    memory_limit: Option<u64>,
    deadline: Duration,
    token_services: Vec<String>,
}

impl Driver {
    /// Starts the event loop on the current tokio runtime.
    pub fn start(config: DriverConfig) -> Driver {
        let (events, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            app_id: config.app_id,
            conf: config.conf,
            runtime: config.runtime,
            components: Mutex::new(HashMap::new()),
            slots: AtomicU32::new(0),
        });
        let driver = Driver { events, shared };
        let event_loop = EventLoop::new(driver.clone());
        tokio::spawn(event_loop.run(rx));
        driver
    }

    pub fn app_id(&self) -> &str {
        &self.shared.app_id
    }

    /// Checks a job (its configuration, component and inputs), plans its partitions and
    /// queues it. Problems with the job come back here, before any task runs.
    pub async fn submit(&self, request: JobRequest) -> Result<JobHandle, SubmitError> {
        let mut conf = self.shared.conf.clone();
        conf.extend(request.config.clone());
        let settings = Settings::from_conf(&conf)?;
        let runtime = self.shared.runtime.clone();
        let bytes = Arc::new(request.component);
        let component = {
            let bytes = bytes.clone();
            tokio::task::spawn_blocking(move || runtime.load(&bytes))
                .await
                .map_err(|_| SubmitError::DriverStopped)??
        };
        if let Some(declared) = request.world.filter(|w| *w != component.world) {
            return Err(SubmitError::WorldMismatch { declared, found: component.world });
        }
        let slots = self.shared.slots.load(Ordering::Relaxed).max(1);
        let plan = plan(&request.inputs, &request.values, request.partitions, slots).await?;
        self.shared.components.lock().expect("components lock").insert(component.digest, bytes);
        let job = PreparedJob {
            name: request.name,
            component,
            plan,
            config: request.config,
            deadline: request.deadline.unwrap_or(settings.task_deadline),
            settings,
            memory_limit: request.memory_limit,
            token_services: request.token_services,
        };
        let (reply, handle) = oneshot::channel();
        self.send(Event::Submit { job, reply })?;
        handle.await.map_err(|_| SubmitError::DriverStopped)
    }

    /// Reserves an executor id before the executor receives any configuration: the
    /// requested one if it is free, else one made from the pod name or a counter.
    pub async fn reserve_executor_id(
        &self,
        requested: Option<String>,
        pod_name: Option<String>,
    ) -> Result<ExecutorId, Rejection> {
        let (reply, rx) = oneshot::channel();
        self.send(Event::Reserve { requested, pod_name, reply }).map_err(|_| Rejection::AppStopped)?;
        rx.await.map_err(|_| Rejection::AppStopped)?
    }

    /// Adds a registered executor, reached through `commands`.
    pub fn executor_up(&self, info: ExecutorInfo, commands: mpsc::UnboundedSender<ExecutorCommand>) {
        let _ = self.send(Event::ExecutorUp { info, commands });
    }

    /// An executor is alive.
    pub fn heartbeat(&self, id: ExecutorId) {
        let _ = self.send(Event::Heartbeat { id });
    }

    /// An executor finishes its tasks and takes no new ones.
    pub fn decommissioning(&self, id: ExecutorId) {
        let _ = self.send(Event::Decommissioning { id });
    }

    /// Removes an executor; its running tasks are requeued.
    pub fn executor_lost(&self, id: ExecutorId, reason: String) {
        let _ = self.send(Event::ExecutorLost { id, reason });
    }

    /// An executor's report of an attempt.
    pub fn status(&self, update: StatusUpdate) {
        let _ = self.send(Event::Status(update));
    }

    /// Executors (removed ones included) and jobs.
    pub async fn snapshot(&self) -> ClusterStatus {
        let (reply, rx) = oneshot::channel();
        let empty =
            || ClusterStatus { app_id: self.app_id().to_owned(), executors: Vec::new(), jobs: Vec::new() };
        if self.send(Event::Snapshot(reply)).is_err() {
            return empty();
        }
        rx.await.unwrap_or_else(|_| empty())
    }

    /// A submitted component's bytes, by digest, for executors to fetch.
    pub fn component(&self, digest: &Digest) -> Option<Arc<Vec<u8>>> {
        self.shared.components.lock().expect("components lock").get(digest).cloned()
    }

    /// The driver's configuration.
    pub fn conf(&self) -> &Conf {
        &self.shared.conf
    }

    fn send(&self, event: Event) -> Result<(), SubmitError> {
        self.events.send(event).map_err(|_| SubmitError::DriverStopped)
    }
}

/// Splits a job into partitions: byte ranges of its files, its values, or generated
/// indices. Defaults to one partition per slot, and no split over 64 MiB.
async fn plan(
    inputs: &[String],
    values: &[serde_json::Value],
    partitions: Option<u32>,
    slots: u32,
) -> Result<JobPlan, SubmitError> {
    if !inputs.is_empty() {
        let mut files = Vec::new();
        for path in inputs {
            let meta = tokio::fs::metadata(path)
                .await
                .map_err(|e| SubmitError::Input { path: path.clone(), reason: e.to_string() })?;
            if !meta.is_file() {
                return Err(SubmitError::Input { path: path.clone(), reason: "not a regular file".into() });
            }
            files.push((path.clone(), meta.len()));
        }
        let total: u64 = files.iter().map(|(_, n)| n).sum();
        let target = partitions.unwrap_or_else(|| slots.max(total.div_ceil(MAX_SPLIT) as u32));
        return Ok(JobPlan::file_splits(&files, target));
    }
    if !values.is_empty() {
        return Ok(JobPlan::values(values));
    }
    Ok(JobPlan::indices(partitions.unwrap_or(slots)))
}

struct ExecutorRecord {
    commands: Option<mpsc::UnboundedSender<ExecutorCommand>>,
    status: ExecutorStatus,
    last_heartbeat: Instant,
    decommissioning: bool,
}

struct JobRecord {
    descriptor: Arc<JobDescriptor>,
    partitions: Vec<PartitionSpec>,
    fold: Fold,
    progress: watch::Sender<JobProgress>,
    reply: Option<oneshot::Sender<JobReport>>,
    started: Instant,
    attempts: u32,
    failures: Vec<FailureRecord>,
    span: tracing::Span,
}

/// How a job's outputs become its result.
enum Fold {
    /// `aggregate` world: a worker thread merges in the job's sandbox as outputs arrive.
    Aggregate(std::sync::mpsc::Sender<FoldMessage>),
    /// `task` world: outputs are collected in partition order.
    Collect(Vec<Option<Vec<u8>>>),
}

enum FoldMessage {
    Output(u32, Vec<u8>),
    Finish,
}

struct EventLoop {
    driver: Driver,
    scheduler: Scheduler,
    executors: HashMap<ExecutorId, ExecutorRecord>,
    /// Ids handed out to executors still bootstrapping.
    reserved: HashSet<ExecutorId>,
    jobs: HashMap<JobId, JobRecord>,
    finished: Vec<JobStatus>,
    next_job: JobId,
    next_executor: u64,
    network_timeout: Duration,
}

impl EventLoop {
    fn new(driver: Driver) -> Self {
        let settings = Settings::from_conf(&driver.shared.conf).unwrap_or_default();
        let network_timeout = settings.network_timeout;
        let policy = Policy {
            exclude_after: settings.exclude_on_failure.then_some(settings.max_failed_tasks_per_executor),
            pipeline: PIPELINE,
        };
        EventLoop {
            driver,
            scheduler: Scheduler::new(policy),
            executors: HashMap::new(),
            reserved: HashSet::new(),
            jobs: HashMap::new(),
            finished: Vec::new(),
            next_job: 1,
            next_executor: 1,
            network_timeout,
        }
    }

    async fn run(mut self, mut events: mpsc::UnboundedReceiver<Event>) {
        let mut tick = tokio::time::interval((self.network_timeout / 4).max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else { break };
                    self.handle(event);
                    // Drain what is already queued before launching, so that launches go
                    // out in batches under load.
                    while let Ok(event) = events.try_recv() {
                        self.handle(event);
                    }
                }
                _ = tick.tick() => self.expire(Instant::now()),
            }
        }
    }

    /// Removes executors whose heartbeats stopped for longer than the network timeout.
    fn expire(&mut self, now: Instant) {
        let timeout = self.network_timeout;
        let silent: Vec<ExecutorId> = self
            .executors
            .iter()
            .filter(|(_, e)| e.commands.is_some() && now.duration_since(e.last_heartbeat) > timeout)
            .map(|(id, _)| id.clone())
            .collect();
        for id in silent {
            let reason = format!("no heartbeat for {} ms (flint.network.timeout)", timeout.as_millis());
            self.handle(Event::ExecutorLost { id, reason });
        }
    }

    /// Hands out an executor id: the requested one if free, else one made from the pod
    /// name, else `exec-N`.
    fn reserve(
        &mut self,
        requested: Option<String>,
        pod_name: Option<String>,
    ) -> Result<ExecutorId, Rejection> {
        // A removed executor's id is free again: a restarted executor may take it back.
        let taken = |s: &Self, id: &str| {
            s.reserved.contains(id) || s.executors.get(id).is_some_and(|e| e.commands.is_some())
        };
        let id = match requested.filter(|r| !r.is_empty() && r != "EXECID") {
            Some(id) if taken(self, &id) => return Err(Rejection::DuplicateId(id)),
            Some(id) => id,
            None => loop {
                let n = self.next_executor;
                self.next_executor += 1;
                let candidate = match &pod_name {
                    Some(pod) if !taken(self, pod) => pod.clone(),
                    Some(pod) => format!("{pod}-{n}"),
                    None => format!("exec-{n}"),
                };
                if !taken(self, &candidate) {
                    break candidate;
                }
            },
        };
        self.reserved.insert(id.clone());
        Ok(id)
    }

    fn handle(&mut self, event: Event) {
        let now = Instant::now();
        match event {
            Event::Submit { job, reply } => self.submit(now, job, reply),
            Event::Reserve { requested, pod_name, reply } => {
                let _ = reply.send(self.reserve(requested, pod_name));
            }
            Event::ExecutorUp { info, commands } => {
                let ExecutorInfo { id, host, cores, memory, slots } = info;
                tracing::info!(executor_id = %id, %host, cores, slots, "executor registered");
                self.reserved.remove(&id);
                let status = ExecutorStatus {
                    id: id.clone(),
                    host,
                    cores,
                    memory,
                    slots,
                    running: 0,
                    tasks_done: 0,
                    tasks_failed: 0,
                    last_heartbeat_ms: Some(0),
                    excluded: false,
                    removed: None,
                };
                let record = ExecutorRecord {
                    commands: Some(commands),
                    status,
                    last_heartbeat: now,
                    decommissioning: false,
                };
                self.executors.insert(id.clone(), record);
                self.feed(now, Input::ExecutorAdded { id, slots }, None);
            }
            Event::Heartbeat { id } => {
                if let Some(record) = self.executors.get_mut(&id) {
                    record.last_heartbeat = now;
                }
            }
            Event::Decommissioning { id } => {
                tracing::info!(executor_id = %id, "executor decommissioning");
                if let Some(record) = self.executors.get_mut(&id) {
                    record.decommissioning = true;
                }
                self.feed(now, Input::ExecutorDecommissioning { id }, None);
            }
            Event::ExecutorLost { id, reason } => {
                self.reserved.remove(&id);
                let Some(record) = self.executors.get_mut(&id) else { return };
                if record.commands.is_none() {
                    return; // removed already
                }
                // An executor that was decommissioning and ran dry left as asked.
                let reason = if record.decommissioning && self.scheduler.is_idle(&id) {
                    "decommissioned".to_owned()
                } else {
                    reason
                };
                tracing::warn!(executor_id = %id, %reason, "executor removed");
                record.commands = None;
                record.status.removed = Some(reason.clone());
                record.status.running = 0;
                record.status.last_heartbeat_ms = None;
                self.feed(now, Input::ExecutorLost { id, reason }, None);
            }
            Event::Status(update) => self.status(now, update),
            Event::Folded { job, result } => self.complete(job, result),
            Event::Snapshot(reply) => {
                let _ = reply.send(self.snapshot(now));
            }
        }
        let slots = self.executors.values().filter(|e| e.commands.is_some()).map(|e| e.status.slots).sum();
        self.driver.shared.slots.store(slots, Ordering::Relaxed);
    }

    fn snapshot(&self, now: Instant) -> ClusterStatus {
        let mut executors: Vec<ExecutorStatus> = self
            .executors
            .values()
            .map(|e| {
                let mut status = e.status.clone();
                if status.removed.is_none() {
                    status.last_heartbeat_ms = Some(now.duration_since(e.last_heartbeat).as_millis() as u64);
                }
                status
            })
            .collect();
        executors.sort_by(|a, b| a.id.cmp(&b.id));
        let mut jobs = self.finished.clone();
        jobs.extend(self.jobs.iter().map(|(id, j)| JobStatus {
            job: *id,
            name: j.descriptor.name.clone(),
            state: "running".into(),
            progress: *j.progress.borrow(),
        }));
        jobs.sort_by_key(|j| j.job);
        ClusterStatus { app_id: self.driver.shared.app_id.clone(), executors, jobs }
    }

    fn submit(&mut self, now: Instant, job: PreparedJob, reply: oneshot::Sender<JobHandle>) {
        let id = self.next_job;
        self.next_job += 1;
        let tasks = job.plan.len() as u32;
        let descriptor = Arc::new(JobDescriptor {
            job: id,
            app_id: self.driver.shared.app_id.clone(),
            name: job.name.clone(),
            component: job.component.digest,
            task_count: tasks,
            config: job.config,
            token_services: job.token_services,
            memory_limit: job.memory_limit,
            deadline: job.deadline,
            max_result_size: job.settings.task_max_result_size,
        });
        let span = tracing::info_span!("job", job_id = id, name = %job.name);
        span.in_scope(|| tracing::info!(tasks, world = ?job.component.world, "job submitted"));
        let fold = match job.component.world {
            World::Aggregate => Fold::Aggregate(spawn_fold(
                self.driver.clone(),
                job.component.clone(),
                descriptor.clone(),
                span.clone(),
            )),
            World::Task => Fold::Collect(vec![None; tasks as usize]),
        };
        let (progress, progress_rx) = watch::channel(JobProgress { total: tasks, ..JobProgress::default() });
        let (report_tx, report_rx) = oneshot::channel();
        self.jobs.insert(
            id,
            JobRecord {
                descriptor,
                partitions: job.plan.partitions,
                fold,
                progress,
                reply: Some(report_tx),
                started: now,
                attempts: 0,
                failures: Vec::new(),
                span,
            },
        );
        let _ = reply.send(JobHandle { id, progress: progress_rx, report: report_rx });
        let max_failures = job.settings.task_max_failures;
        self.feed(now, Input::JobSubmitted { job: id, tasks, max_failures }, None);
    }

    fn status(&mut self, now: Instant, update: StatusUpdate) {
        let StatusUpdate { executor, attempt, state, log, elapsed } = update;
        if let Some(record) = self.executors.get_mut(&executor) {
            record.status.running = record.status.running.saturating_sub(1);
            match state {
                TaskState::Succeeded(_) => record.status.tasks_done += 1,
                TaskState::Failed(_) => record.status.tasks_failed += 1,
            }
        }
        match state {
            TaskState::Succeeded(output) => {
                tracing::debug!(%attempt, ?elapsed, "task succeeded");
                self.feed(now, Input::TaskSucceeded { attempt, executor, elapsed }, Some(output));
            }
            TaskState::Failed(failure) => {
                if let Some(job) = self.jobs.get_mut(&attempt.job) {
                    job.span.in_scope(
                        || tracing::warn!(%attempt, executor_id = %executor, %failure, "task failed"),
                    );
                    job.failures.push(FailureRecord::new(attempt, executor.clone(), failure.clone(), &log));
                }
                self.feed(now, Input::TaskFailed { attempt, executor, failure }, None);
            }
        }
    }

    /// Steps the scheduler and carries out what it says. `output` is the output of the
    /// success being fed, handed to the job's fold if the scheduler accepts it.
    fn feed(&mut self, now: Instant, input: Input, mut output: Option<Vec<u8>>) {
        let mut batches: HashMap<ExecutorId, Vec<TaskLaunch>> = HashMap::new();
        for out in self.scheduler.handle(now, input) {
            match out {
                Output::Launch { executor, attempt } => {
                    let Some(job) = self.jobs.get_mut(&attempt.job) else {
                        continue;
                    };
                    job.attempts += 1;
                    let launch = TaskLaunch {
                        attempt,
                        job: job.descriptor.clone(),
                        partition: job.partitions[attempt.index as usize].clone(),
                    };
                    batches.entry(executor).or_default().push(launch);
                }
                Output::TaskDone { attempt } => {
                    if let (Some(job), Some(bytes)) = (self.jobs.get_mut(&attempt.job), output.take()) {
                        job.progress.send_modify(|p| p.done += 1);
                        match &mut job.fold {
                            Fold::Aggregate(worker) => {
                                let _ = worker.send(FoldMessage::Output(attempt.index, bytes));
                            }
                            Fold::Collect(outputs) => outputs[attempt.index as usize] = Some(bytes),
                        }
                    }
                }
                Output::Kill { executor, attempt } => {
                    if let Some(commands) = self.executors.get(&executor).and_then(|e| e.commands.as_ref()) {
                        let _ = commands.send(ExecutorCommand::Kill(attempt));
                    }
                }
                Output::Retrying { attempt, failure } => {
                    if let Some(job) = self.jobs.get(&attempt.job) {
                        job.span
                            .in_scope(|| tracing::info!(%attempt, kind = failure.kind(), "retrying task"));
                    }
                }
                Output::ExecutorExcluded { executor, failed_tasks } => {
                    tracing::warn!(executor_id = %executor, failed_tasks, "executor excluded: too many task failures");
                    if let Some(record) = self.executors.get_mut(&executor) {
                        record.status.excluded = true;
                    }
                }
                Output::JobSucceeded { job } => self.job_succeeded(job),
                Output::JobFailed { job, reason } => self.complete(job, Err(reason)),
            }
        }
        for (executor, batch) in batches {
            if let Some(record) = self.executors.get_mut(&executor) {
                record.status.running += batch.len() as u32;
                if let Some(commands) = &record.commands {
                    let _ = commands.send(ExecutorCommand::Launch(batch));
                }
            }
        }
        self.refresh_progress();
    }

    fn refresh_progress(&mut self) {
        let executors = self.scheduler.live_executors() as u32;
        for job in self.jobs.values() {
            let failed = job.failures.len() as u32;
            job.progress.send_if_modified(|p| {
                let running = job.attempts.saturating_sub(p.done + failed);
                let changed = p.running != running || p.executors != executors || p.failed_attempts != failed;
                p.running = running;
                p.executors = executors;
                p.failed_attempts = failed;
                changed
            });
        }
    }

    fn job_succeeded(&mut self, id: JobId) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        match &mut job.fold {
            Fold::Aggregate(worker) => {
                let _ = worker.send(FoldMessage::Finish);
            }
            Fold::Collect(outputs) => {
                let result = collect_json(std::mem::take(outputs));
                self.complete(id, Ok(result));
            }
        }
    }

    fn complete(&mut self, id: JobId, outcome: Result<Vec<u8>, JobError>) {
        let Some(mut job) = self.jobs.remove(&id) else {
            return;
        };
        if outcome.is_err() {
            // A failed merge leaves tasks running: stop them.
            let reason = "job failed".to_string();
            self.feed(Instant::now(), Input::CancelJob { job: id, reason }, None);
        }
        let report = JobReport {
            job: id,
            name: job.descriptor.name.clone(),
            outcome,
            tasks: job.descriptor.task_count,
            attempts: job.attempts,
            failures: std::mem::take(&mut job.failures),
            elapsed: job.started.elapsed(),
        };
        job.span.in_scope(|| match &report.outcome {
            Ok(_) => tracing::info!(elapsed = ?report.elapsed, attempts = report.attempts, "job succeeded"),
            Err(e) => tracing::warn!(error = %e, "job failed"),
        });
        self.finished.push(JobStatus {
            job: id,
            name: report.name.clone(),
            state: if report.outcome.is_ok() { "succeeded" } else { "failed" }.into(),
            progress: *job.progress.borrow(),
        });
        if let Some(reply) = job.reply.take() {
            let _ = reply.send(report);
        }
    }
}

/// A `task`-world job's result: its outputs as a JSON array, in partition order. An
/// output that is not JSON becomes a JSON string.
fn collect_json(outputs: Vec<Option<Vec<u8>>>) -> Vec<u8> {
    let values: Vec<serde_json::Value> = outputs
        .into_iter()
        .map(|o| {
            let bytes = o.unwrap_or_default();
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        })
        .collect();
    serde_json::to_vec(&values).expect("JSON values encode")
}

/// Starts the thread that folds an `aggregate` job's outputs with its own `merge`, in a
/// fresh sandbox per call, and calls `finish` once every task is in.
fn spawn_fold(
    driver: Driver,
    component: Arc<JobComponent>,
    job: Arc<JobDescriptor>,
    span: tracing::Span,
) -> std::sync::mpsc::Sender<FoldMessage> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("flint-fold-{}", job.job))
        .spawn(move || {
            let _entered = span.enter();
            let runtime = driver.shared.runtime.clone();
            let ctx = TaskContext {
                app_id: job.app_id.clone(),
                job_id: job.job.to_string(),
                task_index: 0,
                task_count: job.task_count,
                attempt: 0,
                config: Arc::new(job.config.clone()),
                tokens: Arc::new(Vec::new()),
                memory_limit: job.memory_limit,
                deadline: job.deadline,
                max_result_size: job.max_result_size,
                kill: KillSwitch::default(),
            };
            let mut folder = runtime.folder(&component, ctx);
            let mut call = |call: Call| -> Result<Vec<u8>, TaskFailure> { folder.call(call).result };
            let mut fold = OrderedFold::new();
            let result = loop {
                match rx.recv() {
                    Ok(FoldMessage::Output(index, bytes)) => {
                        if let Err(failure) = fold.push(index, bytes, &mut |a, b| call(Call::Merge(a, b))) {
                            break Err(JobError::Merge(failure));
                        }
                    }
                    Ok(FoldMessage::Finish) => {
                        break match std::mem::take(&mut fold).into_total(job.task_count) {
                            Some(total) => call(Call::Finish(total)).map_err(JobError::Finish),
                            // A job of no partitions has nothing to finish.
                            None => Ok(b"null".to_vec()),
                        };
                    }
                    Err(_) => return, // the job ended without us
                }
            };
            let _ = driver.events.send(Event::Folded { job: job.job, result });
        })
        .expect("spawn a fold thread");
    tx
}
