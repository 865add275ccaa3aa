//! Why a task failed: a closed set of reasons, never a bare string.

use crate::ExecutorId;
use serde::{Deserialize, Serialize};

/// Externally tagged on the wire (postcard cannot decode an internally tagged enum);
/// the CLI's JSON shows it as `{"kind": …, …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "kebab-case")]
pub enum TaskFailure {
    /// The guest trapped: `unreachable`, a panic, an out-of-bounds access.
    #[error("trap: {message}")]
    Trap { message: String, backtrace: Option<String> },
    /// The guest tried to grow its memory past the instance's cap.
    #[error("memory limit: the task needed more than its cap of {limit} bytes")]
    MemoryLimit { limit: u64 },
    /// The guest ran past its deadline (computing or waiting) and was interrupted; `key`
    /// names the setting (`flint.task.deadline`, `flint.merge.deadline`).
    #[error("deadline: interrupted after {deadline_ms} ms ({key})")]
    Deadline { deadline_ms: u64, key: String },
    /// The guest returned more than `flint.task.maxResultSize`.
    #[error("result too large: {size} bytes, over flint.task.maxResultSize of {limit} bytes")]
    ResultTooLarge { size: u64, limit: u64 },
    /// The job's own code reported an error.
    #[error("guest error: {message}")]
    Guest { message: String, retryable: bool },
    /// Something on the host side went wrong (an unreadable input, say).
    #[error("host error: {message}")]
    Host { message: String },
    /// The task was killed on request.
    #[error("killed: {reason}")]
    Killed { reason: String },
    /// The executor running the task went away.
    #[error("executor lost: {executor}: {reason}")]
    ExecutorLost { executor: ExecutorId, reason: String },
    /// The task's input could not be read: the source refused or went away, or it holds
    /// what no read can hand a task (a line over 64 MiB). The task fails with it
    /// whatever it did with the error.
    #[error("input: {message}")]
    Input { message: String, retryable: bool },
    /// A reduce task could not read map outputs held by `executor` (its incarnation):
    /// unreachable, refused, or not matching their checksums. Not the reduce task's
    /// fault: those maps run again, then the task.
    #[error("fetch failed: map outputs {maps:?} of shuffle {shuffle} on executor {executor}: {reason}")]
    FetchFailed {
        executor: ExecutorId,
        incarnation: u64,
        /// The shuffle they belong to: the stage of the job that wrote it.
        #[serde(default)]
        shuffle: u32,
        maps: Vec<u32>,
        reason: String,
    },
    /// The executor would not write more shuffle files: `key` names the bound it would
    /// have passed (`flint.shuffle.maxDiskSize`, or `flint.local.dir.minFree` left free
    /// on the disk). Another attempt may run where there is room.
    #[error("disk full: {message} ({key})")]
    DiskFull { key: String, message: String },
}

impl TaskFailure {
    /// A short name for the failure's kind, for summaries and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            TaskFailure::Trap { .. } => "trap",
            TaskFailure::MemoryLimit { .. } => "memory-limit",
            TaskFailure::Deadline { .. } => "deadline",
            TaskFailure::ResultTooLarge { .. } => "result-too-large",
            TaskFailure::Guest { .. } => "guest-error",
            TaskFailure::Host { .. } => "host-error",
            TaskFailure::Killed { .. } => "killed",
            TaskFailure::ExecutorLost { .. } => "executor-lost",
            TaskFailure::Input { .. } => "input",
            TaskFailure::FetchFailed { .. } => "fetch-failed",
            TaskFailure::DiskFull { .. } => "disk-full",
        }
    }

    /// Whether another attempt may succeed. As in Spark, most failures are retried; a
    /// result over the size limit, a job error marked fatal and a kill are not.
    pub fn retryable(&self) -> bool {
        match self {
            TaskFailure::ResultTooLarge { .. } | TaskFailure::Killed { .. } => false,
            TaskFailure::Guest { retryable, .. } | TaskFailure::Input { retryable, .. } => *retryable,
            _ => true,
        }
    }

    /// Whether the failure counts against `flint.task.maxFailures`. Losing an executor
    /// is not the task's fault.
    pub fn counts_against_task(&self) -> bool {
        !matches!(self, TaskFailure::ExecutorLost { .. } | TaskFailure::FetchFailed { .. })
    }
}

/// The most of a failure's message or backtrace a report carries.
pub const MAX_MESSAGE: usize = 16 << 10;

impl TaskFailure {
    /// The failure with every message and backtrace cut to [`MAX_MESSAGE`] bytes; a cut
    /// text says how much was dropped.
    pub fn bounded(self) -> TaskFailure {
        let cut = |s: String| if s.len() <= MAX_MESSAGE { s } else { head(&s, MAX_MESSAGE) };
        match self {
            TaskFailure::Trap { message, backtrace } => {
                TaskFailure::Trap { message: cut(message), backtrace: backtrace.map(cut) }
            }
            TaskFailure::Guest { message, retryable } => {
                TaskFailure::Guest { message: cut(message), retryable }
            }
            TaskFailure::Host { message } => TaskFailure::Host { message: cut(message) },
            TaskFailure::Killed { reason } => TaskFailure::Killed { reason: cut(reason) },
            TaskFailure::ExecutorLost { executor, reason } => TaskFailure::ExecutorLost {
                executor: cut(executor.into_string()).into(),
                reason: cut(reason),
            },
            TaskFailure::Deadline { deadline_ms, key } => {
                TaskFailure::Deadline { deadline_ms, key: cut(key) }
            }
            TaskFailure::Input { message, retryable } => {
                TaskFailure::Input { message: cut(message), retryable }
            }
            TaskFailure::FetchFailed { executor, incarnation, shuffle, mut maps, reason } => {
                maps.truncate(MAX_MESSAGE / 4);
                let executor = cut(executor.into_string()).into();
                TaskFailure::FetchFailed { executor, incarnation, shuffle, maps, reason: cut(reason) }
            }
            TaskFailure::DiskFull { key, message } => {
                TaskFailure::DiskFull { key: cut(key), message: cut(message) }
            }
            other => other,
        }
    }
}

/// The first `max` bytes of `text` (on a character boundary), saying how many were dropped.
pub fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes dropped]", &text[..end], text.len() - end)
}

/// The last `max` bytes of `text` (on a character boundary), saying how many were dropped.
pub fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[{} bytes dropped] …{}", start, &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_and_say_so() {
        let failure = TaskFailure::Guest { message: "é".repeat(MAX_MESSAGE), retryable: true }.bounded();
        let TaskFailure::Guest { message, .. } = failure else { unreachable!() };
        assert!(message.len() < MAX_MESSAGE + 64, "{}", message.len());
        assert!(
            message.ends_with(&format!("[{} bytes dropped]", MAX_MESSAGE)),
            "{}",
            &message[message.len() - 40..]
        );
        let t = tail("abcdef", 2);
        assert_eq!(t, "[4 bytes dropped] …ef");
        assert_eq!(tail("ab", 2), "ab");
    }

    #[test]
    fn every_failure_crosses_the_wire() {
        let all = [
            TaskFailure::Trap { message: "unreachable".into(), backtrace: Some("0: f".into()) },
            TaskFailure::MemoryLimit { limit: 1 },
            TaskFailure::Deadline { deadline_ms: 2, key: "flint.task.deadline".into() },
            TaskFailure::ResultTooLarge { size: 3, limit: 2 },
            TaskFailure::Guest { message: "no".into(), retryable: false },
            TaskFailure::Host { message: "disk".into() },
            TaskFailure::Killed { reason: "asked".into() },
            TaskFailure::ExecutorLost { executor: "e".into(), reason: "gone".into() },
        ];
        for failure in all {
            let bytes = postcard::to_stdvec(&failure).unwrap();
            assert_eq!(postcard::from_bytes::<TaskFailure>(&bytes).unwrap(), failure);
        }
    }
}
