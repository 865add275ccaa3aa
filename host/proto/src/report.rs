//! How jobs and executors are doing, as the driver reports them to clients.

use crate::failure::TaskFailure;
use crate::task::{Attempt, ExecutorId, JobId};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Declares a state shown on pages and in the API: serialized as its lowercase name
/// (the JSON status API and the event log keep the words they always had).
macro_rules! shown_state {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $word:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            pub const ALL: &[$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

shown_state!(
    /// Where a job is in its life.
    JobState {
        /// Submitted; waits for one of `flint.driver.maxRunningJobs` to end.
        Waiting => "waiting",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
        /// Stopped on request (`flint cancel`), or by its driver stopping.
        Cancelled => "cancelled",
        /// Still running when its job ended.
        Killed => "killed",
        /// It succeeded, but its output was lost before the driver had it: it runs again.
        Lost => "lost",
    }
);

impl JobState {
    pub fn is_finished(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed | JobState::Cancelled)
    }
}

shown_state!(
    /// Where an executor is, as pages show it.
    ExecutorState {
        Registered => "registered",
        /// It finishes what it runs and takes nothing new.
        Draining => "draining",
        /// It failed too many tasks: it gets no new ones.
        Excluded => "excluded",
        Removed => "removed",
    }
);

shown_state!(
    /// Where a task's latest attempt is.
    AttemptState {
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
        /// Stopped on request (`flint cancel`), or by its driver stopping.
        Cancelled => "cancelled",
        /// Still running when its job ended.
        Killed => "killed",
        /// It succeeded, but its output was lost before the driver had it: it runs again.
        Lost => "lost",
    }
);

/// Why a job failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum JobError {
    #[error(
        "task {index} failed {attempts} time(s); last attempt (#{last_attempt}) on executor {executor}: {failure}"
    )]
    TaskFailed {
        index: u32,
        attempts: u32,
        last_attempt: u32,
        executor: ExecutorId,
        failure: Box<TaskFailure>,
    },
    #[error("merging task outputs failed: {0}{hint}", hint = on_driver(.0))]
    Merge(TaskFailure),
    #[error("finishing the job failed: {0}{hint}", hint = on_driver(.0))]
    Finish(TaskFailure),
    #[error("cancelled: {0}")]
    Cancelled(String),
    #[error(
        "total size of task results ({size} bytes) is over flint.driver.maxResultSize ({limit} bytes); raise it or return less from each task"
    )]
    ResultTooLarge { size: u64, limit: u64 },
    #[error("no executor to run it: {0}")]
    NoExecutors(String),
    #[error(
        "task {index} was running on {losses} executors that were lost (flint.task.maxExecutorLosses): the task may be what takes them down; the last: {last}"
    )]
    ExecutorsLost { index: u32, losses: u32, last: String },
    #[error(
        "map task {map} ran again and wrote other records than before: a map must be deterministic (draw random numbers from a seed), or its reducers would mix two runs"
    )]
    Nondeterministic { map: u32 },
    #[error("the shuffle cannot be planned: {0}")]
    Shuffle(String),
    #[error(
        "stage {stage} could not read its inputs in {attempts} attempts in a row (flint.stage.maxConsecutiveAttempts): {last}"
    )]
    StageFailed { stage: u32, attempts: u32, last: String },
    /// The job's part files could not be put in place.
    #[error("output: {0}")]
    Output(String),
    /// A program's `main` failed (or gave up on what its datasets' calls said).
    #[error("the program failed: {0}{hint}", hint = on_driver(.0))]
    Program(Box<TaskFailure>),
}

/// What to change when a merge on the driver runs out of memory: the driver's key, not
/// the task's.
fn on_driver(failure: &TaskFailure) -> &'static str {
    match failure {
        TaskFailure::MemoryLimit { .. } => " (merges on the driver are capped by flint.driver.memory)",
        _ => "",
    }
}

/// How far a job has got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobProgress {
    pub total: u32,
    pub done: u32,
    pub running: u32,
    pub failed_attempts: u32,
    pub executors: u32,
    /// Done tasks whose outputs were lost (map outputs with their executor, or that a
    /// reducer could not read) and which ran again.
    #[serde(default)]
    pub outputs_lost: u32,
    /// A map/reduce job's shuffle, once every map's output is in (its map stage done).
    #[serde(default)]
    pub shuffle: Option<ShuffleSizes>,
    /// Copies of straggling attempts started (`flint.speculation.*`), and those of them
    /// that finished first.
    #[serde(default)]
    pub speculative: u32,
    #[serde(default)]
    pub speculative_won: u32,
}

/// What a stage is for: writing a shuffle its children read, or the job's own output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StageKind {
    Shuffle,
    Result,
}

/// One stage of a job, as the report, the status API, history and the page show it
/// (each serializes this record as it is, so they agree).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageReport {
    /// Its place in the job's plan.
    pub id: u32,
    pub kind: StageKind,
    /// Its tasks are the job's `first..first + tasks`.
    pub first: u32,
    pub tasks: u32,
    /// Its tasks done now (at the job's end: then).
    pub done: u32,
    /// The stages whose shuffles it reads.
    pub parents: Vec<u32>,
    /// Attempts launched, retries and reruns included.
    pub attempts: u32,
    /// Done tasks run again because their outputs were lost.
    pub rerun_tasks: u32,
    /// Attempts that could not read the shuffles they were given.
    pub fetch_failures: u32,
    /// The shuffle it wrote, as its outputs held it (stored bytes; 0 until every map
    /// of it is in).
    pub shuffle_write_bytes: u64,
    /// The bytes of its parents' shuffles, which its tasks read between them.
    pub shuffle_read_bytes: u64,
    /// None of its tasks had to run: its outputs were there already.
    pub skipped: bool,
}

/// A reduce partition is skewed when it holds more than this many times the median…
pub const SKEW_FACTOR: u64 = 5;
/// …and more than this many bytes (Spark's adaptive execution uses the same rule).
pub const SKEW_MIN_BYTES: u64 = 256 << 20;

/// A map/reduce job's shuffle as written (stored bytes, compressed, each map's slice
/// counted as its map status keeps it: at most 10% over): how its bytes spread over
/// the reduce partitions, and how many partitions are skewed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleSizes {
    pub bytes: u64,
    pub partitions: u32,
    /// The median partition's bytes.
    pub median: u64,
    pub largest: u64,
    pub largest_partition: u32,
    /// Partitions over [`SKEW_FACTOR`] times the median and [`SKEW_MIN_BYTES`].
    pub skewed: u32,
}

impl ShuffleSizes {
    /// The sizes of partitions holding `bytes` each, in partition order.
    pub fn of(bytes: &[u64]) -> ShuffleSizes {
        let mut sorted = bytes.to_vec();
        sorted.sort_unstable();
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
        let (largest_partition, largest) = bytes
            .iter()
            .enumerate()
            .max_by_key(|(p, b)| (**b, std::cmp::Reverse(*p)))
            .map_or((0, 0), |(p, b)| (p as u32, *b));
        let skewed =
            bytes.iter().filter(|&&b| b > SKEW_MIN_BYTES && b > median.saturating_mul(SKEW_FACTOR)).count();
        ShuffleSizes {
            bytes: bytes.iter().sum(),
            partitions: bytes.len() as u32,
            median,
            largest,
            largest_partition,
            skewed: skewed as u32,
        }
    }
}

/// A failed attempt, kept for the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureRecord {
    pub task: u32,
    pub attempt: u32,
    pub executor: ExecutorId,
    pub failure: TaskFailure,
    /// The end of the task's captured output.
    pub log_tail: String,
}

impl FailureRecord {
    pub fn new(attempt: Attempt, executor: ExecutorId, failure: TaskFailure, log: &str) -> Self {
        FailureRecord {
            task: attempt.index,
            attempt: attempt.number,
            executor,
            failure,
            log_tail: log_tail(log),
        }
    }
}

/// The bytes of a task's log that reports and the status page keep: its end.
pub const LOG_TAIL: usize = 2048;

/// The last [`LOG_TAIL`] bytes of `log`, cut at a character boundary.
pub fn log_tail(log: &str) -> String {
    let mut cut = log.len().saturating_sub(LOG_TAIL);
    while !log.is_char_boundary(cut) {
        cut += 1;
    }
    log[cut..].to_owned()
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobReport {
    pub job: JobId,
    pub name: String,
    /// The job's output bytes (JSON from SDK jobs), or why it failed.
    pub outcome: Result<Vec<u8>, JobError>,
    pub tasks: u32,
    /// Attempts launched, retries included.
    pub attempts: u32,
    /// Map tasks run again because their outputs were lost (their executor gone, or a
    /// reducer could not read them).
    pub maps_rerun: u32,
    /// Map outputs copied off executors that left (decommissioned) before they went,
    /// so that their maps did not run again.
    pub outputs_handed_over: u32,
    pub failures: Vec<FailureRecord>,
    /// Failed attempts left out of `failures` to keep the report within
    /// [`REPORT_FAILURE_BYTES`] (the status page lists up to 1,000 of them).
    pub failures_dropped: u32,
    pub elapsed: Duration,
    /// A map/reduce job's shuffle, as its map outputs held it at the end.
    pub shuffle: Option<ShuffleSizes>,
    /// Copies of straggling attempts started, and those of them that finished first.
    pub speculative: u32,
    pub speculative_won: u32,
    /// Its stages, in plan order.
    #[serde(default)]
    pub stages: Vec<StageReport>,
    /// What its user may have got wrong though it succeeded: a configuration key it
    /// was given and never read.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// About the most bytes of failure records a report carries: it travels in one frame.
pub const REPORT_FAILURE_BYTES: usize = 2 << 20;

impl JobReport {
    /// Keeps the first failures whose messages and log tails fit in `budget` bytes, and
    /// counts the rest in `failures_dropped`.
    pub fn fit_failures(&mut self, budget: usize) {
        let mut used = 0;
        let kept = self
            .failures
            .iter()
            .take_while(|f| {
                used += 64 + f.executor.len() + f.log_tail.len() + f.failure.to_string().len();
                used <= budget
            })
            .count();
        self.failures_dropped += (self.failures.len() - kept) as u32;
        self.failures.truncate(kept);
    }
}

/// An executor as the driver sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorStatus {
    pub id: ExecutorId,
    pub host: String,
    pub cores: u32,
    pub memory: u64,
    pub slots: u32,
    pub running: u32,
    pub tasks_done: u64,
    pub tasks_failed: u64,
    /// Milliseconds since the last heartbeat, while it is live.
    pub last_heartbeat_ms: Option<u64>,
    /// Excluded for failing too many tasks: it gets no new ones.
    pub excluded: bool,
    /// Why it was removed, once it has been.
    pub removed: Option<String>,
    /// Who started it: `static` (by hand) or the driver's backend (`local`,
    /// `kubernetes`).
    pub backend: String,
    /// The pod it runs in, on Kubernetes.
    pub pod: Option<String>,
    pub state: ExecutorState,
    /// When it registered, and when it was removed, in milliseconds since the Unix
    /// epoch (the status store's record; the control core keeps no wall clock).
    #[serde(default)]
    pub added_ms: Option<u64>,
    #[serde(default)]
    pub removed_ms: Option<u64>,
    /// Bytes its tasks read (splits' lines, reduce tasks' records) and map outputs it
    /// wrote, summed over the attempts the status store saw end.
    #[serde(default)]
    pub input_bytes: u64,
    #[serde(default)]
    pub shuffle_write_bytes: u64,
}

/// A job as the driver lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStatus {
    pub job: JobId,
    pub name: String,
    pub state: JobState,
    pub progress: JobProgress,
    /// When it began running, and ended, in milliseconds since the Unix epoch (a job
    /// still waiting for a slot in `maxRunningJobs` has neither).
    #[serde(default)]
    pub started_ms: Option<u64>,
    #[serde(default)]
    pub ended_ms: Option<u64>,
    /// Its stages (a job that never started has none).
    #[serde(default)]
    pub stages: Vec<StageReport>,
}

/// A task of a job as the status page shows it: its latest attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub index: u32,
    /// The latest attempt's number (0 for the first).
    pub attempt: u32,
    pub executor: ExecutorId,
    pub state: AttemptState,
    /// When the attempt was launched, in milliseconds since the Unix epoch.
    pub launched_ms: u64,
    /// How long it ran, as its executor measured it, once it has ended.
    pub duration_ms: Option<u64>,
    /// When the driver heard that it ended.
    #[serde(default)]
    pub ended_ms: Option<u64>,
    /// What its executor's host measured of its input (zeros for a task without one).
    #[serde(default)]
    pub metrics: crate::TaskMetrics,
    /// Why it failed, when it did.
    pub failure: Option<TaskFailure>,
    /// The end of what it printed, while the job's budget for logs lasts (failed
    /// attempts always keep theirs in the job's failures).
    pub log_tail: Option<String>,
}

/// The driver's view of its application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub app_id: String,
    pub executors: Vec<ExecutorStatus>,
    pub jobs: Vec<JobStatus>,
    /// Executors asked of the backend and not yet registered.
    #[serde(default)]
    pub executors_starting: u32,
    /// Why the driver stopped asking its backend for executors, once it has.
    #[serde(default)]
    pub allocation_stopped: Option<String>,
    /// Why executors asked of the backend are not starting yet, as it last said (a
    /// standalone master with no worker that fits them).
    #[serde(default)]
    pub executors_waiting: Option<String>,
    /// How many executors the driver's backend is asked to keep now, when it starts
    /// them.
    #[serde(default)]
    pub allocation_target: Option<u32>,
    /// Finished jobs and removed executors left out so the reply fits in one message
    /// (oldest first; see [`ClusterStatus::fit`]).
    #[serde(default)]
    pub left_out: u32,
}

impl ClusterStatus {
    /// Leaves out the oldest finished jobs, then the oldest removed executors, until the
    /// status encodes in at most `max` bytes (what one frame may carry), and counts them
    /// in `left_out`. Running and waiting jobs and live executors are always kept: their
    /// numbers are bounded by the driver's own limits.
    pub fn fit(&mut self, max: usize) {
        let size = |s: &ClusterStatus| postcard::to_stdvec(s).map_or(usize::MAX, |b| b.len());
        let mut over = size(self).saturating_sub(max);
        if over == 0 {
            return;
        }
        let finished = |j: &JobStatus| j.state.is_finished();
        self.jobs.sort_by_key(|j| j.job);
        let mut dropped = 0;
        self.jobs.retain(|j| {
            if over > 0 && finished(j) {
                over = over.saturating_sub(j.name.len() + 32);
                dropped += 1;
                return false;
            }
            true
        });
        self.executors.retain(|e| {
            if over > 0 && e.removed.is_some() {
                over = over.saturating_sub(e.id.len() + e.host.len() + 64);
                dropped += 1;
                return false;
            }
            true
        });
        self.left_out += dropped;
        // The estimates above are generous; should they fall short, go round again.
        if dropped > 0 && size(self) > max {
            self.fit(max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{StatusUpdate, TaskState};

    #[test]
    fn a_status_of_many_finished_jobs_fits_a_frame_keeping_the_running_ones() {
        let job = |n: u64, state: JobState| JobStatus {
            job: JobId(n),
            name: "n".repeat(256),
            state,
            progress: JobProgress::default(),
            started_ms: None,
            ended_ms: None,
            stages: Vec::new(),
        };
        let mut jobs: Vec<JobStatus> = (0..100_000).map(|n| job(n, JobState::Succeeded)).collect();
        jobs.extend((100_000..100_016).map(|n| job(n, JobState::Running)));
        let mut status = ClusterStatus {
            app_id: "a".into(),
            executors: Vec::new(),
            jobs,
            executors_starting: 0,
            allocation_stopped: None,
            executors_waiting: None,
            allocation_target: None,
            left_out: 0,
        };
        status.fit(crate::wire::MAX_FRAME);
        assert!(postcard::to_stdvec(&status).unwrap().len() <= crate::wire::MAX_FRAME);
        assert_eq!(status.jobs.iter().filter(|j| j.state == JobState::Running).count(), 16);
        assert_eq!(status.left_out as usize + status.jobs.len(), 100_016);
        // The newest finished ones stay.
        assert!(status.jobs.iter().any(|j| j.job == JobId(99_999)));
        let small = status.clone();
        status.fit(crate::wire::MAX_FRAME);
        assert_eq!(status, small, "a status that fits is left as it is");
    }

    #[test]
    fn reports_and_failed_statuses_cross_the_wire() {
        let failure = TaskFailure::Deadline { deadline_ms: 5, key: "flint.task.deadline".into() };
        let attempt = Attempt { job: JobId(1), index: 2, number: 0 };
        let report = JobReport {
            job: JobId(1),
            name: "j".into(),
            outcome: Err(JobError::TaskFailed {
                index: 2,
                attempts: 1,
                last_attempt: 0,
                executor: "e".into(),
                failure: Box::new(failure.clone()),
            }),
            tasks: 3,
            attempts: 3,
            maps_rerun: 0,
            speculative: 0,
            speculative_won: 0,
            outputs_handed_over: 0,
            failures: vec![FailureRecord::new(attempt, "e".into(), failure.clone(), "log")],
            shuffle: None,
            stages: Vec::new(),
            warnings: Vec::new(),
            failures_dropped: 0,
            elapsed: Duration::from_millis(7),
        };
        let bytes = postcard::to_stdvec(&report).unwrap();
        assert_eq!(postcard::from_bytes::<JobReport>(&bytes).unwrap(), report);
        let update = StatusUpdate {
            executor: "e".into(),
            attempt,
            state: TaskState::Failed(failure),
            log: String::new(),
            elapsed: Duration::ZERO,
            metrics: crate::TaskMetrics {
                input_bytes: 3,
                input_records: 1,
                read_us: 2,
                compile_us: 4,
                shuffle_write_bytes: 5,
            },
            asked: vec!["top".into()],
        };
        let bytes = postcard::to_stdvec(&update).unwrap();
        assert_eq!(postcard::from_bytes::<StatusUpdate>(&bytes).unwrap(), update);
    }
}

#[cfg(test)]
mod shuffle_sizes {
    use super::*;

    #[test]
    fn a_partition_is_skewed_past_five_medians_and_256_mib_both() {
        const M: u64 = 1 << 20;
        let even = ShuffleSizes::of(&[100 * M, 90 * M, 110 * M, 100 * M]);
        assert_eq!((even.bytes, even.median, even.skewed), (400 * M, 100 * M, 0));
        // 600 MiB against a 100 MiB median: skewed; 400 MiB is not (four medians).
        let one = ShuffleSizes::of(&[100 * M, 600 * M, 100 * M, 400 * M, 90 * M]);
        assert_eq!((one.largest_partition, one.largest, one.skewed), (1, 600 * M, 1));
        // Many times the median but small: not worth flagging.
        let small = ShuffleSizes::of(&[1, 1, 1, 200 * M]);
        assert_eq!(small.skewed, 0);
        assert_eq!(ShuffleSizes::of(&[]), ShuffleSizes::default());
    }
}
