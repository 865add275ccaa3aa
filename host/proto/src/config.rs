//! Configuration: raw `key=value` properties and the typed settings read from them.
//!
//! Keys under `flint.` configure the platform and must be known; every other key is the
//! job's own configuration, passed to its tasks as it is. Sizes read `512m`, `4g`;
//! durations read `250ms`, `30s`, `5m`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

mod defaults;
/// Extends `Settings` with which keys a job may set; its `JOB_KEYS` is re-exported at the
/// crate root.
pub(crate) mod held;
mod parse;
mod redact;
mod sections;
pub use parse::{ConfError, ValueError, dns_label, nearest, parse_duration, parse_pair, parse_size};
use parse::{non_empty, parse_u32};
pub use redact::{REDACTED, redacted};
pub use sections::{
    Backend, CredentialSettings, DynamicAllocation, FLINT_SERVICE, KubernetesSettings, ObjectSettings,
    SpeculationSettings,
};

/// Raw properties, in key order.
pub type Conf = BTreeMap<String, String>;

/// The most attempts `flint.task.maxFailures` may allow a task: past a few, a failing
/// task only burns executors.
pub const MAX_TASK_FAILURES: u32 = 100;
/// The most jobs `flint.driver.maxRunningJobs` may run at once: the driver's merge pool
/// holds an instance for each (and reserves their address space at start).
pub const MAX_RUNNING_JOBS: u32 = 1024;
/// The most guest output `flint.task.maxLogSize` may keep per task (it is held in the
/// executor's memory while the task runs).
pub const MAX_TASK_LOG: u64 = 64 << 20;

/// The platform's typed settings, each with its key and documented default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// `flint.executor.cores` (default 2): task slots come from cores ÷ `flint.task.cpus`.
    pub executor_cores: u32,
    /// `flint.executor.memory` (default 1g).
    pub executor_memory: u64,
    /// `flint.memory.fraction` (default 0.6): the share of executor memory for tasks.
    pub memory_fraction: f64,
    /// `flint.task.cpus` (default 1).
    pub task_cpus: u32,
    /// `flint.task.maxFailures` (default 4): attempts before a task fails its job.
    pub task_max_failures: u32,
    /// `flint.task.maxExecutorLosses` (default 4; 0: never): a task whose running
    /// attempts were on this many executors that were lost fails its job. A loss is not
    /// a task failure, so without it a task that takes its executor down would take one
    /// after another. Set on the driver; a job may only lower it.
    pub task_max_executor_losses: u32,
    /// `flint.stage.maxConsecutiveAttempts` (default 4, as Spark's): a stage whose
    /// tasks could not read their inputs in this many attempts of the stage in a row
    /// (each attempt's lost outputs made again in between) fails its job.
    pub stage_max_consecutive_attempts: u32,
    /// `flint.task.deadline` (default 10m): a task running longer is interrupted.
    pub task_deadline: Duration,
    /// `flint.task.maxResultSize` (default 64m): the largest output one task may return.
    pub task_max_result_size: u64,
    /// `flint.task.combine` (default true): for a job whose merge is commutative (its
    /// component exports `combiner`), the tasks one executor slot runs are folded into
    /// one value where they run, and the driver merges one partial result per slot.
    pub task_combine: bool,
    /// `flint.task.instanceReuse` (default 100): the most tasks of one job that one
    /// instance runs, one after another on a slot, before a fresh one replaces it (as
    /// PySpark reuses its Python workers, or a Python pool's `maxtasksperchild`). What a
    /// task leaves in memory or globals is seen by the next; 1 gives every task a fresh
    /// instance. An instance is never shared between jobs and is dropped after any
    /// failure.
    pub task_instance_reuse: u32,
    /// `flint.driver.maxResultSize` (default 1g, as Spark): the most a job's task
    /// results may add up to on the driver; a job over it fails, naming the key.
    pub driver_max_result_size: u64,
    /// `flint.driver.memory` (default 2g; Spark's `spark.driver.memory`): the memory
    /// each merge and finish on the driver may grow to (a job's fold runs in one
    /// instance, holding the running result and the next output at once), at most the
    /// 4 GiB a wasm32 memory can address. `flint.driver.maxResultSize` must fit in half
    /// of it.
    pub driver_memory: u64,
    /// `flint.network.idleTimeout` (default 3s): a connection that hears nothing, not
    /// even a keep-alive, for this long is closed, so a peer that died is noticed in
    /// seconds. Keep-alives go out at a third of it.
    pub network_idle_timeout: Duration,
    /// `flint.task.maxLogSize` (default 1m): guest stdout and stderr kept per task.
    pub task_max_log_size: u64,
    /// `flint.merge.deadline` (default 10m): a merge or finish on the driver running or
    /// waiting longer is interrupted and fails its job.
    pub merge_deadline: Duration,
    /// `flint.driver.retainedJobs` (default 1000, as `spark.ui.retainedJobs`): finished
    /// jobs the driver lists; older ones are forgotten.
    pub retained_jobs: u32,
    /// `flint.driver.maxRunningJobs` (default 16): jobs the driver runs at once; each
    /// holds a record, a fold and its tasks' places in the queue. Submissions past it
    /// wait their turn.
    pub max_running_jobs: u32,
    /// `flint.driver.maxWaitingJobs` (default 1000): submissions that may wait for a
    /// running job to end; past it a submission is refused, naming both keys.
    pub max_waiting_jobs: u32,
    /// `flint.executor.componentCacheSize` (default 256m): compiled components an
    /// executor keeps in memory; past it the least recently used are dropped (and read
    /// back from the disk cache when needed again).
    pub component_cache_size: u64,
    /// `flint.input.roots` (default none): the directories, comma-separated and
    /// absolute, that jobs may name input files under. Set on the driver; a job cannot
    /// widen it. `flint run` allows the files named on its own command line.
    pub input_roots: Vec<String>,
    /// `flint.output.roots` (default none): the absolute directories under which a
    /// map/reduce job may write its part files (`--output DIR`); checked by the driver
    /// and by each executor against its own value. `flint run` allows its `--output`.
    pub output_roots: Vec<String>,
    /// `flint.local.dir` (default: the executor's `--work-dir`, else the system's
    /// temporary folder), comma-separated, as `spark.local.dir`: where executors write
    /// shuffle files, spread over the folders. An executor's own value wins over the
    /// driver's.
    pub local_dirs: Vec<String>,
    /// `flint.reducer.maxSizeInFlight` (default 48m, as Spark's): the bytes a reduce
    /// task asks its map outputs' holders for at once, several holders at a time; one
    /// holder with more goes alone.
    pub reducer_max_size_in_flight: u64,
    /// `flint.shuffle.maxDiskSize` (default: 90% of what the local directories had free
    /// when the executor started): the most shuffle bytes (map outputs, spills, fetched
    /// slices spilled) an executor keeps on disk at once; a task that would pass it fails
    /// as `disk-full`. An executor's own value wins.
    pub shuffle_max_disk_size: Option<u64>,
    /// `flint.local.dir.minFree` (default 256m): what an executor leaves free on each
    /// local directory's disk; a shuffle write that would leave less fails as
    /// `disk-full`.
    pub local_dir_min_free: u64,
    /// `flint.executor.heartbeatInterval` (default 10s).
    pub heartbeat_interval: Duration,
    /// `flint.network.timeout` (default 120s): an executor silent this long is lost.
    pub network_timeout: Duration,
    /// `flint.decommission.timeout` (default 20s): how long a leaving executor (told to
    /// by dynamic allocation, or by SIGTERM, as a pod being deleted is) may take to copy
    /// its map outputs to the executors that stay, once its running tasks are done; past
    /// it, it leaves anyway and what it still held runs again. Keep it under a pod's
    /// `terminationGracePeriodSeconds`.
    pub decommission_timeout: Duration,
    /// `flint.executor.startTimeout` (default 60s): how long an executor a backend was
    /// asked to start has to register (a wait for room on a standalone master starts
    /// it again); past it, the start is abandoned and counts as a failed start.
    pub executor_start_timeout: Duration,
    /// `flint.excludeOnFailure.enabled` (default false): exclude executors that keep
    /// failing tasks.
    pub exclude_on_failure: bool,
    /// `flint.excludeOnFailure.maxFailedTasksPerExecutor` (default 2).
    pub max_failed_tasks_per_executor: u32,
    /// `flint.speculation.*`: copies of straggling tasks; `None` unless
    /// `flint.speculation.enabled` (default false).
    pub speculation: Option<SpeculationSettings>,
    /// `flint.executor.backend` (default `static`): who starts executors. `static`:
    /// people, by hand; `local`: the driver, as processes on its own machine;
    /// `kubernetes`: pods; `standalone`: a standalone master's workers.
    pub executor_backend: Backend,
    /// `flint.master.url` (unset): the standalone master the `standalone` backend asks,
    /// as `flint master` printed it.
    pub master_url: Option<String>,
    /// `flint.cores.max` (unset: no bound): the most cores the application's executors
    /// hold at once on a standalone cluster.
    pub cores_max: Option<u32>,
    /// `flint.executor.instances` (default 2): the fleet a backend keeps when dynamic
    /// allocation is off.
    pub executor_instances: u32,
    /// `flint.dynamicAllocation.*`.
    pub dynamic_allocation: DynamicAllocation,
    /// `flint.kubernetes.*`: the `kubernetes` backend's executor pods.
    pub kubernetes: KubernetesSettings,
    /// `flint.security.credentials.*`: delegation tokens the driver renews.
    pub credentials: CredentialSettings,
    /// `flint.driver.maxUploadSize` (default 1g): the most a submission's files (inputs
    /// on the client's own disk) may hold together; the driver keeps them on its disk
    /// while the job runs.
    pub driver_max_upload_size: u64,
    /// `flint.driver.maxUploadsHeld` (default 4g): the most the files sent with all
    /// running jobs may hold together on the driver's disk.
    pub driver_max_uploads_held: u64,
    /// `flint.eventLog.dir` (unset: no event log): where the driver writes its event log
    /// (a folder per application) for `flint history`.
    pub event_log_dir: Option<String>,
    /// `flint.eventLog.rollSize` (default 128m): a log file this large is closed and the
    /// next one started.
    pub event_log_roll_size: u64,
    /// `flint.log.level` (default `info`): the log filter executors apply (`FLINT_LOG`
    /// on an executor wins), as `tracing` filters read: `debug`, `flint=debug,info`.
    pub executor_log_level: String,
    /// `flint.s3.*` and `flint.input.allowHttp`: how executors and the driver reach
    /// `s3://` and `https://` inputs.
    pub objects: ObjectSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            executor_cores: 2,
            executor_memory: 1 << 30,
            memory_fraction: 0.6,
            task_cpus: 1,
            task_max_failures: 4,
            task_max_executor_losses: 4,
            stage_max_consecutive_attempts: 4,
            task_deadline: Duration::from_secs(600),
            task_max_result_size: 64 << 20,
            task_combine: true,
            task_instance_reuse: 100,
            driver_max_result_size: 1 << 30,
            driver_memory: 2 << 30,
            network_idle_timeout: Duration::from_secs(3),
            task_max_log_size: 1 << 20,
            input_roots: Vec::new(),
            output_roots: Vec::new(),
            local_dirs: Vec::new(),
            reducer_max_size_in_flight: 48 << 20,
            shuffle_max_disk_size: None,
            local_dir_min_free: 256 << 20,
            component_cache_size: 256 << 20,
            retained_jobs: 1000,
            max_running_jobs: 16,
            max_waiting_jobs: 1000,
            merge_deadline: Duration::from_secs(600),
            heartbeat_interval: Duration::from_secs(10),
            network_timeout: Duration::from_secs(120),
            decommission_timeout: Duration::from_secs(20),
            executor_start_timeout: Duration::from_secs(60),
            exclude_on_failure: false,
            max_failed_tasks_per_executor: 2,
            speculation: None,
            executor_backend: Backend::Static,
            master_url: None,
            cores_max: None,
            executor_instances: 2,
            dynamic_allocation: DynamicAllocation::default(),
            kubernetes: KubernetesSettings::default(),
            credentials: CredentialSettings::default(),
            objects: ObjectSettings::default(),
            driver_max_upload_size: 1 << 30,
            driver_max_uploads_held: 4 << 30,
            event_log_dir: None,
            event_log_roll_size: 128 << 20,
            executor_log_level: "info".into(),
        }
    }
}

impl Settings {
    /// Every `flint.` key this version knows.
    pub const KEYS: &'static [&'static str] = &[
        "flint.executor.cores",
        "flint.executor.memory",
        "flint.memory.fraction",
        "flint.task.cpus",
        "flint.task.maxFailures",
        "flint.task.maxExecutorLosses",
        "flint.stage.maxConsecutiveAttempts",
        "flint.task.deadline",
        "flint.task.maxResultSize",
        "flint.task.combine",
        "flint.task.instanceReuse",
        "flint.task.maxLogSize",
        "flint.driver.maxResultSize",
        "flint.driver.memory",
        "flint.input.roots",
        "flint.output.roots",
        "flint.local.dir",
        "flint.reducer.maxSizeInFlight",
        "flint.shuffle.maxDiskSize",
        "flint.local.dir.minFree",
        "flint.executor.componentCacheSize",
        "flint.driver.retainedJobs",
        "flint.driver.maxRunningJobs",
        "flint.driver.maxWaitingJobs",
        "flint.merge.deadline",
        "flint.network.idleTimeout",
        "flint.executor.heartbeatInterval",
        "flint.network.timeout",
        "flint.decommission.timeout",
        "flint.executor.startTimeout",
        "flint.excludeOnFailure.enabled",
        "flint.excludeOnFailure.maxFailedTasksPerExecutor",
        "flint.speculation.enabled",
        "flint.speculation.multiplier",
        "flint.speculation.quantile",
        "flint.speculation.minTaskRuntime",
        "flint.speculation.interval",
        "flint.executor.backend",
        "flint.master.url",
        "flint.cores.max",
        "flint.executor.instances",
        "flint.dynamicAllocation.enabled",
        "flint.dynamicAllocation.minExecutors",
        "flint.dynamicAllocation.maxExecutors",
        "flint.dynamicAllocation.initialExecutors",
        "flint.dynamicAllocation.schedulerBacklogTimeout",
        "flint.dynamicAllocation.sustainedSchedulerBacklogTimeout",
        "flint.dynamicAllocation.executorIdleTimeout",
        "flint.dynamicAllocation.executorAllocationRatio",
        "flint.dynamicAllocation.cooldown",
        "flint.dynamicAllocation.maxPendingExecutors",
        "flint.dynamicAllocation.maxStartFailures",
        "flint.dynamicAllocation.startBackoff",
        "flint.kubernetes.namespace",
        "flint.kubernetes.container.image",
        "flint.kubernetes.container.image.pullPolicy",
        "flint.kubernetes.memoryOverheadFactor",
        "flint.kubernetes.allocation.batch.size",
        "flint.kubernetes.allocation.batch.delay",
        "flint.kubernetes.executor.podTemplateFile",
        "flint.kubernetes.executor.secretName",
        "flint.kubernetes.driver.pod.name",
        "flint.kubernetes.executor.apiPollingInterval",
        "flint.security.credentials.renewalRatio",
        "flint.security.credentials.renewalMargin",
        "flint.security.credentials.retryWait",
        "flint.security.credentials.<service>.command",
        "flint.security.credentials.<service>.file",
        "flint.security.credentials.flint.lifetime",
        "flint.s3.endpoint",
        "flint.s3.region",
        "flint.input.allowHttp",
        "flint.driver.maxUploadSize",
        "flint.driver.maxUploadsHeld",
        "flint.log.level",
        "flint.eventLog.dir",
        "flint.eventLog.rollSize",
    ];

    /// Reads the settings from `conf` over the defaults. An unknown `flint.` key or a
    /// value that does not parse is an error naming the key.
    pub fn from_conf(conf: &Conf) -> Result<Settings, ConfError> {
        let mut s = Settings::default();
        // Whether speculation is on, and its settings (taken whatever the order of keys).
        let mut speculation = (false, SpeculationSettings::default());
        for (key, value) in conf.iter().filter(|(k, _)| k.starts_with("flint.")) {
            let invalid =
                |reason: String| ConfError::Invalid { key: key.clone(), value: value.clone(), reason };
            let unreadable = |e: ValueError| invalid(e.to_string());
            let positive = |n: u64| {
                if n == 0 { Err(invalid("must be positive".into())) } else { Ok(n) }
            };
            match key.as_str() {
                "flint.executor.cores" => {
                    s.executor_cores = positive(parse_u32(value).map_err(unreadable)?.into())? as u32
                }
                "flint.executor.memory" => {
                    s.executor_memory = positive(parse_size(value).map_err(unreadable)?)?
                }
                "flint.memory.fraction" => {
                    s.memory_fraction = match value.trim().parse::<f64>() {
                        Ok(f) if f > 0.0 && f <= 1.0 => f,
                        _ => return Err(invalid("must be a number in (0, 1]".into())),
                    }
                }
                "flint.task.cpus" => {
                    s.task_cpus = positive(parse_u32(value).map_err(unreadable)?.into())? as u32
                }
                "flint.task.maxFailures" => {
                    let n = positive(parse_u32(value).map_err(unreadable)?.into())? as u32;
                    if n > MAX_TASK_FAILURES {
                        return Err(invalid(format!("must be at most {MAX_TASK_FAILURES}")));
                    }
                    s.task_max_failures = n
                }
                "flint.task.maxExecutorLosses" => {
                    s.task_max_executor_losses = parse_u32(value).map_err(unreadable)?
                }
                "flint.stage.maxConsecutiveAttempts" => {
                    s.stage_max_consecutive_attempts =
                        positive(parse_u32(value).map_err(unreadable)?.into())? as u32
                }
                "flint.task.deadline" => s.task_deadline = parse_duration(value).map_err(unreadable)?,
                "flint.task.maxResultSize" => {
                    s.task_max_result_size = positive(parse_size(value).map_err(unreadable)?)?
                }
                "flint.task.combine" => {
                    s.task_combine =
                        value.trim().parse().map_err(|_| invalid("must be true or false".into()))?
                }
                "flint.task.instanceReuse" => {
                    s.task_instance_reuse = positive(parse_u32(value).map_err(unreadable)?.into())? as u32
                }
                "flint.input.roots" => s.input_roots = absolute_dirs(value).map_err(invalid)?,
                "flint.output.roots" => s.output_roots = absolute_dirs(value).map_err(invalid)?,
                "flint.reducer.maxSizeInFlight" => {
                    s.reducer_max_size_in_flight = positive(parse_size(value).map_err(unreadable)?)?
                }
                "flint.shuffle.maxDiskSize" => {
                    s.shuffle_max_disk_size = Some(positive(parse_size(value).map_err(unreadable)?)?)
                }
                "flint.local.dir.minFree" => s.local_dir_min_free = parse_size(value).map_err(unreadable)?,
                "flint.local.dir" => {
                    s.local_dirs =
                        value.split(',').map(str::trim).filter(|d| !d.is_empty()).map(str::to_owned).collect()
                }
                "flint.merge.deadline" => s.merge_deadline = parse_duration(value).map_err(unreadable)?,
                "flint.driver.retainedJobs" => s.retained_jobs = parse_u32(value).map_err(unreadable)?,
                "flint.driver.maxRunningJobs" => {
                    let n = positive(parse_u32(value).map_err(unreadable)?.into())? as u32;
                    // Each may hold a merge instance of the driver's pool for its run.
                    if n > MAX_RUNNING_JOBS {
                        return Err(invalid(format!("must be at most {MAX_RUNNING_JOBS}")));
                    }
                    s.max_running_jobs = n
                }
                "flint.driver.maxWaitingJobs" => s.max_waiting_jobs = parse_u32(value).map_err(unreadable)?,
                "flint.executor.componentCacheSize" => {
                    s.component_cache_size = parse_size(value).map_err(unreadable)?
                }
                "flint.driver.maxResultSize" => {
                    s.driver_max_result_size = positive(parse_size(value).map_err(unreadable)?)?
                }
                "flint.driver.memory" => s.driver_memory = positive(parse_size(value).map_err(unreadable)?)?,
                "flint.network.idleTimeout" => {
                    let d = parse_duration(value).map_err(unreadable)?;
                    if d < Duration::from_millis(100) {
                        return Err(invalid("must be at least 100ms".into()));
                    }
                    s.network_idle_timeout = d
                }
                "flint.task.maxLogSize" => {
                    s.task_max_log_size = parse_size(value).map_err(unreadable)?;
                    if s.task_max_log_size > MAX_TASK_LOG {
                        return Err(invalid(format!("must be at most {}m", MAX_TASK_LOG >> 20)));
                    }
                }
                "flint.executor.heartbeatInterval" => {
                    s.heartbeat_interval = parse_duration(value).map_err(unreadable)?
                }
                "flint.network.timeout" => s.network_timeout = parse_duration(value).map_err(unreadable)?,
                "flint.decommission.timeout" => {
                    s.decommission_timeout = parse_duration(value).map_err(unreadable)?
                }
                "flint.executor.startTimeout" => {
                    s.executor_start_timeout = parse_duration(value).map_err(unreadable)?;
                    if s.executor_start_timeout.is_zero() {
                        return Err(invalid("must be more than 0".into()));
                    }
                }
                "flint.speculation.enabled" => {
                    let on: bool =
                        value.trim().parse().map_err(|_| invalid("must be true or false".into()))?;
                    speculation.0 = on;
                }
                "flint.speculation.multiplier" => {
                    speculation.1.multiplier = match value.trim().parse::<f64>() {
                        Ok(m) if m.is_finite() && m >= 1.0 => m,
                        _ => return Err(invalid("must be a number of at least 1".into())),
                    }
                }
                "flint.speculation.quantile" => {
                    speculation.1.quantile = match value.trim().parse::<f64>() {
                        Ok(q) if (0.0..=1.0).contains(&q) => q,
                        _ => return Err(invalid("must be a number from 0 to 1".into())),
                    }
                }
                "flint.speculation.minTaskRuntime" => {
                    speculation.1.min_task_runtime = parse_duration(value).map_err(unreadable)?
                }
                "flint.speculation.interval" => {
                    let d = parse_duration(value).map_err(unreadable)?;
                    speculation.1.interval = d.max(Duration::from_millis(10));
                }
                "flint.excludeOnFailure.enabled" => {
                    s.exclude_on_failure =
                        value.trim().parse().map_err(|_| invalid("must be true or false".into()))?
                }
                "flint.excludeOnFailure.maxFailedTasksPerExecutor" => {
                    s.max_failed_tasks_per_executor =
                        positive(parse_u32(value).map_err(unreadable)?.into())? as u32
                }
                "flint.executor.backend" => {
                    s.executor_backend = match value.trim() {
                        "static" => Backend::Static,
                        "local" => Backend::Local,
                        "kubernetes" => Backend::Kubernetes,
                        "standalone" => Backend::Standalone,
                        _ => return Err(invalid("must be static, local, kubernetes or standalone".into())),
                    }
                }
                "flint.master.url" => s.master_url = Some(non_empty(value).map_err(unreadable)?),
                "flint.cores.max" => {
                    s.cores_max = Some(positive(parse_u32(value).map_err(unreadable)?.into())? as u32)
                }
                "flint.executor.instances" => s.executor_instances = parse_u32(value).map_err(unreadable)?,
                "flint.dynamicAllocation.enabled" => {
                    s.dynamic_allocation.enabled =
                        value.trim().parse().map_err(|_| invalid("must be true or false".into()))?
                }
                "flint.dynamicAllocation.minExecutors" => {
                    s.dynamic_allocation.min_executors = parse_u32(value).map_err(unreadable)?
                }
                "flint.dynamicAllocation.maxExecutors" => {
                    s.dynamic_allocation.max_executors =
                        positive(parse_u32(value).map_err(unreadable)?.into())? as u32
                }
                "flint.dynamicAllocation.initialExecutors" => {
                    s.dynamic_allocation.initial_executors = Some(parse_u32(value).map_err(unreadable)?)
                }
                "flint.dynamicAllocation.schedulerBacklogTimeout" => {
                    s.dynamic_allocation.backlog_timeout = parse_duration(value).map_err(unreadable)?
                }
                "flint.dynamicAllocation.sustainedSchedulerBacklogTimeout" => {
                    s.dynamic_allocation.sustained_backlog_timeout =
                        Some(parse_duration(value).map_err(unreadable)?)
                }
                "flint.dynamicAllocation.executorIdleTimeout" => {
                    s.dynamic_allocation.idle_timeout = parse_duration(value).map_err(unreadable)?
                }
                "flint.dynamicAllocation.executorAllocationRatio" => {
                    s.dynamic_allocation.ratio = match value.trim().parse::<f64>() {
                        Ok(f) if f > 0.0 && f <= 1.0 => f,
                        _ => return Err(invalid("must be a number in (0, 1]".into())),
                    }
                }
                "flint.dynamicAllocation.cooldown" => {
                    s.dynamic_allocation.cooldown = parse_duration(value).map_err(unreadable)?
                }
                "flint.dynamicAllocation.maxPendingExecutors" => {
                    s.dynamic_allocation.max_pending =
                        positive(parse_u32(value).map_err(unreadable)?.into())? as u32
                }
                "flint.dynamicAllocation.maxStartFailures" => {
                    s.dynamic_allocation.max_start_failures =
                        positive(parse_u32(value).map_err(unreadable)?.into())? as u32
                }
                "flint.dynamicAllocation.startBackoff" => {
                    s.dynamic_allocation.start_backoff = parse_duration(value).map_err(unreadable)?
                }
                "flint.kubernetes.namespace" => {
                    s.kubernetes.namespace = Some(dns_label(value).map_err(unreadable)?)
                }
                "flint.kubernetes.container.image" => {
                    s.kubernetes.image = non_empty(value).map_err(unreadable)?
                }
                "flint.kubernetes.container.image.pullPolicy" => {
                    s.kubernetes.image_pull_policy = match value.trim() {
                        p @ ("Always" | "IfNotPresent" | "Never") => p.to_owned(),
                        _ => return Err(invalid("must be Always, IfNotPresent or Never".into())),
                    }
                }
                "flint.kubernetes.memoryOverheadFactor" => {
                    s.kubernetes.memory_overhead_factor = match value.trim().parse::<f64>() {
                        Ok(f) if (0.0..=10.0).contains(&f) => f,
                        _ => return Err(invalid("must be a number in [0, 10]".into())),
                    }
                }
                "flint.kubernetes.allocation.batch.size" => {
                    s.kubernetes.batch_size = positive(parse_u32(value).map_err(unreadable)?.into())? as u32
                }
                "flint.kubernetes.allocation.batch.delay" => {
                    s.kubernetes.batch_delay = parse_duration(value).map_err(unreadable)?
                }
                "flint.kubernetes.executor.podTemplateFile" => {
                    s.kubernetes.pod_template_file = Some(non_empty(value).map_err(unreadable)?)
                }
                "flint.kubernetes.executor.secretName" => {
                    s.kubernetes.secret_name = Some(dns_label(value).map_err(unreadable)?)
                }
                "flint.kubernetes.driver.pod.name" => {
                    s.kubernetes.driver_pod_name = Some(non_empty(value).map_err(unreadable)?)
                }
                "flint.kubernetes.executor.apiPollingInterval" => {
                    let d = parse_duration(value).map_err(unreadable)?;
                    s.kubernetes.api_polling_interval = Duration::from_millis(positive(d.as_millis() as u64)?)
                }
                "flint.security.credentials.renewalRatio" => {
                    s.credentials.renewal_ratio = match value.trim().parse::<f64>() {
                        Ok(f) if f > 0.0 && f <= 1.0 => f,
                        _ => return Err(invalid("must be a number in (0, 1]".into())),
                    }
                }
                "flint.security.credentials.renewalMargin" => {
                    s.credentials.renewal_margin = parse_duration(value).map_err(unreadable)?
                }
                "flint.security.credentials.retryWait" => {
                    let d = parse_duration(value).map_err(unreadable)?;
                    s.credentials.retry_wait = Duration::from_millis(positive(d.as_millis() as u64)?)
                }
                "flint.security.credentials.flint.lifetime" => {
                    let d = parse_duration(value).map_err(unreadable)?;
                    if d < Duration::from_secs(1) {
                        return Err(invalid("must be at least 1s".into()));
                    }
                    s.credentials.flint_lifetime = d
                }
                "flint.s3.endpoint" => {
                    let url = non_empty(value).map_err(unreadable)?;
                    if !(url.starts_with("https://") || url.starts_with("http://")) {
                        return Err(invalid("must be an http:// or https:// URL".into()));
                    }
                    s.objects.s3_endpoint = Some(url)
                }
                "flint.s3.region" => s.objects.s3_region = non_empty(value).map_err(unreadable)?,
                "flint.log.level" => s.executor_log_level = non_empty(value).map_err(unreadable)?,
                "flint.driver.maxUploadSize" => {
                    s.driver_max_upload_size = parse_size(value).map_err(unreadable)?
                }
                "flint.driver.maxUploadsHeld" => {
                    s.driver_max_uploads_held = parse_size(value).map_err(unreadable)?
                }
                "flint.eventLog.dir" => s.event_log_dir = Some(non_empty(value).map_err(unreadable)?),
                "flint.eventLog.rollSize" => {
                    s.event_log_roll_size = parse_size(value).map_err(unreadable)?;
                    if s.event_log_roll_size < 1 << 20 {
                        return Err(invalid("must be at least 1m".into()));
                    }
                }
                "flint.input.allowHttp" => {
                    s.objects.allow_http =
                        value.trim().parse().map_err(|_| invalid("must be true or false".into()))?
                }
                other => {
                    let rest = other.strip_prefix("flint.security.credentials.");
                    let (service, kind) = match rest.and_then(|r| r.rsplit_once('.')) {
                        Some((service, kind @ ("command" | "file"))) => (service, kind),
                        _ => {
                            let nearest = nearest(key, Settings::KEYS);
                            return Err(ConfError::UnknownKey { key: key.clone(), nearest });
                        }
                    };
                    let named = !service.is_empty()
                        && service.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
                    if !named {
                        return Err(invalid(format!("{service:?} is not a service name")));
                    }
                    if service == FLINT_SERVICE {
                        return Err(invalid(format!(
                            "the {FLINT_SERVICE} service's tokens are the driver's own; it has no provider to set"
                        )));
                    }
                    let given = non_empty(value).map_err(unreadable)?;
                    let other_kind =
                        if kind == "command" { &s.credentials.files } else { &s.credentials.commands };
                    if other_kind.contains_key(service) {
                        return Err(invalid(format!(
                            "service {service} has a command and a file: one provider each"
                        )));
                    }
                    let providers = if kind == "command" {
                        &mut s.credentials.commands
                    } else {
                        &mut s.credentials.files
                    };
                    providers.insert(service.to_owned(), given);
                }
            }
        }
        s.speculation = speculation.0.then_some(speculation.1);
        let c = &s.credentials;
        if c.flint_lifetime <= c.renewal_margin {
            // Every token would be due for renewal the moment it came.
            return Err(ConfError::Invalid {
                key: "flint.security.credentials.flint.lifetime".into(),
                value: format!("{}ms", c.flint_lifetime.as_millis()),
                reason: format!(
                    "must be longer than flint.security.credentials.renewalMargin ({}ms)",
                    c.renewal_margin.as_millis()
                ),
            });
        }
        if let Some(endpoint) = s.objects.s3_endpoint.as_ref().filter(|e| e.starts_with("http://"))
            && !s.objects.allow_http
        {
            return Err(ConfError::Invalid {
                key: "flint.s3.endpoint".into(),
                value: endpoint.clone(),
                reason: "plain HTTP, and flint.input.allowHttp is false: use https:// or set flint.input.allowHttp=true".into(),
            });
        }
        let d = &s.dynamic_allocation;
        if d.min_executors > d.max_executors {
            return Err(ConfError::Invalid {
                key: "flint.dynamicAllocation.minExecutors".into(),
                value: d.min_executors.to_string(),
                reason: format!("more than flint.dynamicAllocation.maxExecutors ({})", d.max_executors),
            });
        }
        let at_least = |key: &str, value: Duration, min: Duration| {
            if value < min {
                Err(ConfError::Invalid {
                    key: key.into(),
                    value: format!("{}ms", value.as_millis()),
                    reason: format!("must be at least {}ms", min.as_millis()),
                })
            } else {
                Ok(())
            }
        };
        at_least("flint.executor.heartbeatInterval", s.heartbeat_interval, Duration::from_millis(10))?;
        // The epoch ticker runs every 10 ms: a shorter deadline could not be kept.
        at_least("flint.task.deadline", s.task_deadline, Duration::from_millis(10))?;
        at_least("flint.merge.deadline", s.merge_deadline, Duration::from_millis(10))?;
        if s.network_timeout <= s.heartbeat_interval {
            return Err(ConfError::Invalid {
                key: "flint.network.timeout".into(),
                value: format!("{}ms", s.network_timeout.as_millis()),
                reason: format!(
                    "must be longer than flint.executor.heartbeatInterval ({}ms), or every executor would expire",
                    s.heartbeat_interval.as_millis()
                ),
            });
        }
        // The fold holds the running result and the next output at once.
        if s.driver_max_result_size > s.merge_memory() / 2 {
            return Err(ConfError::Invalid {
                key: "flint.driver.maxResultSize".into(),
                value: s.driver_max_result_size.to_string(),
                reason: format!(
                    "must fit in half of flint.driver.memory ({} bytes for merges), which folds it",
                    s.merge_memory()
                ),
            });
        }
        if s.task_cpus > s.executor_cores {
            return Err(ConfError::Invalid {
                key: "flint.task.cpus".into(),
                value: s.task_cpus.to_string(),
                reason: format!("more than flint.executor.cores ({})", s.executor_cores),
            });
        }
        Ok(s)
    }

    /// The memory cap of a merge or finish on the driver: `flint.driver.memory`, within
    /// what a wasm32 memory can address.
    pub fn merge_memory(&self) -> u64 {
        self.driver_memory.min(4 << 30)
    }

    /// Task slots per executor: cores ÷ cpus per task.
    pub fn slots(&self) -> u32 {
        (self.executor_cores / self.task_cpus).max(1)
    }

    /// Memory for all of an executor's task instances.
    pub fn task_memory_pool(&self) -> u64 {
        (self.executor_memory as f64 * self.memory_fraction) as u64
    }

    /// The memory cap of one task instance: the pool shared evenly by the slots.
    /// What an executor may hold of outputs waiting for the driver to fetch them: the
    /// share of `flint.executor.memory` not given to tasks (at least 64 MiB).
    pub fn block_memory(&self) -> u64 {
        self.executor_memory.saturating_sub(self.task_memory_pool()).max(64 << 20)
    }

    pub fn instance_memory(&self) -> u64 {
        self.task_memory_pool() / u64::from(self.slots())
    }
}

/// A comma-separated list of absolute directories.
fn absolute_dirs(value: &str) -> Result<Vec<String>, String> {
    let dirs: Vec<String> =
        value.split(',').map(str::trim).filter(|r| !r.is_empty()).map(str::to_owned).collect();
    match dirs.iter().find(|r| !r.starts_with('/')) {
        Some(relative) => Err(format!("{relative:?} is not an absolute path")),
        None => Ok(dirs),
    }
}

#[cfg(test)]
mod tests;
