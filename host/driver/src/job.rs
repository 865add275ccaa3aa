//! What a submitter hands the driver, and what it gets back.

use crate::scheduler::JobFailure;
use flint_proto::{Attempt, Conf, ConfError, ExecutorId, JobId, TaskFailure, World};
use flint_runtime::LoadError;
use serde::Serialize;
use std::time::Duration;

/// A job to run: a component, its configuration and its inputs.
#[derive(Debug, Clone, Default)]
pub struct JobRequest {
    pub name: String,
    pub component: Vec<u8>,
    /// The job's configuration (manifest, then `--conf`). `flint.task.*` keys here set
    /// this job's task limits.
    pub config: Conf,
    /// Input files, split by byte range; none for generated or value partitions.
    pub inputs: Vec<String>,
    /// Input values, one task each.
    pub values: Vec<serde_json::Value>,
    /// Partitions: how many generated tasks, or about how many file splits.
    pub partitions: Option<u32>,
    /// A memory cap per task below the executor's.
    pub memory_limit: Option<u64>,
    /// A deadline per task, overriding `flint.task.deadline`.
    pub deadline: Option<Duration>,
    pub token_services: Vec<String>,
    /// The world the manifest declares; the component must implement it.
    pub world: Option<World>,
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("{0}")]
    Component(#[from] LoadError),
    #[error("the manifest declares world {declared:?} but the component implements {found:?}")]
    WorldMismatch { declared: World, found: World },
    #[error("input {path}: {reason}")]
    Input { path: String, reason: String },
    #[error(transparent)]
    Conf(#[from] ConfError),
    #[error("the driver has stopped")]
    DriverStopped,
}

/// How far a job has got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JobProgress {
    pub total: u32,
    pub done: u32,
    pub running: u32,
    pub failed_attempts: u32,
    pub executors: u32,
}

/// A failed attempt, kept for the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailureRecord {
    pub task: u32,
    pub attempt: u32,
    pub executor: ExecutorId,
    pub failure: TaskFailure,
    /// The end of the task's captured output.
    pub log_tail: String,
}

impl FailureRecord {
    pub(crate) fn new(
        attempt: Attempt,
        executor: ExecutorId,
        failure: TaskFailure,
        log: &str,
    ) -> Self {
        const TAIL: usize = 2048;
        let mut cut = log.len().saturating_sub(TAIL);
        while !log.is_char_boundary(cut) {
            cut += 1;
        }
        FailureRecord {
            task: attempt.index,
            attempt: attempt.number,
            executor,
            failure,
            log_tail: log[cut..].to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Task(#[from] JobFailure),
    #[error("merging task outputs failed: {0}")]
    Merge(TaskFailure),
    #[error("finishing the job failed: {0}")]
    Finish(TaskFailure),
}

/// How a job ended.
#[derive(Debug, Clone)]
pub struct JobReport {
    pub job: JobId,
    pub name: String,
    /// The job's output bytes (JSON from SDK jobs), or why it failed.
    pub outcome: Result<Vec<u8>, JobError>,
    pub tasks: u32,
    /// Attempts launched, retries included.
    pub attempts: u32,
    pub failures: Vec<FailureRecord>,
    pub elapsed: Duration,
}
