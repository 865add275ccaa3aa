//! The state behind every store, and the host side of `flint:task/host`, of a file
//! split's `split-reader` and of `flint:task/shuffle` (a map's emitter, a reduce's
//! sorted input).

use crate::bindings::flint::task::datasets;
use crate::bindings::flint::task::host::{self, Level, TaskInfo};
use crate::bindings::flint::task::shuffle::{self, HostEmitter, HostPartWriter, HostSortedInput};
use crate::bindings::flint::task::types::{self, HostSplitReader, TaskError};
use crate::capture::TaskLogSink;
use crate::limits::{KillSwitch, MemoryCap};
use crate::records::{
    Emitter, LineSource, MAX_NEXT, PartSink, PartWriter, Records, ShuffleError, SortedInput, SplitReader,
};
use flint_proto::program::{DatasetSource, Dependency, Step};
use flint_proto::{Conf, TaskFailure, Token};
use std::sync::Arc;
use wasmtime::component::Resource;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub(crate) struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limits: MemoryCap,
    pub(crate) info: TaskInfo,
    pub(crate) config: Arc<Conf>,
    pub(crate) asked: Arc<crate::ConfAsked>,
    pub(crate) tokens: Arc<Vec<Token>>,
    pub(crate) log: TaskLogSink,
    /// When the running call must end; the epoch callback and the waiting WASI calls
    /// check it.
    pub(crate) deadline: std::time::Instant,
    /// Thrown to stop the call; the same checks look at it.
    pub(crate) kill: KillSwitch,
    /// Guest log lines this store may still copy into the process's own log.
    pub(crate) echo: EchoBudget,
    /// What a map call emits into, or a reduce call reads.
    pub(crate) records: Records,
    /// The running call's file split, read as the guest asks.
    pub(crate) input: Option<Box<dyn LineSource>>,
    /// Why reading it failed: the call's failure, whatever the guest returns after.
    pub(crate) input_failed: Option<TaskFailure>,
    /// The table entry of its `split-reader`.
    pub(crate) input_handle: Option<u32>,
    /// Where a reduce call's part file goes, when its job writes files.
    pub(crate) part: Option<Box<dyn PartSink>>,
    /// What `wasi:random` reads, reseeded as each call begins.
    pub(crate) random: crate::random::TaskRandom,
    /// A program's `main`: where its datasets go.
    pub(crate) program: Option<ProgramState>,
}

/// How much of a guest's logging reaches the process's log: every line goes to the
/// task's bounded log, but only the first [`ECHO_LINES`] lines, each cut to
/// [`ECHO_LINE`] bytes, are echoed to the executor's (or driver's) own log; the rest are
/// counted and said once.
pub(crate) struct EchoBudget {
    lines: u32,
    dropped: u64,
}

const ECHO_LINES: u32 = 200;
const ECHO_LINE: usize = 1024;

impl EchoBudget {
    pub(crate) fn new() -> EchoBudget {
        EchoBudget { lines: ECHO_LINES, dropped: 0 }
    }

    /// The line to echo, cut to size, or `None` once the budget is spent.
    fn take(&mut self, message: &str) -> Option<String> {
        if self.lines == 0 {
            self.dropped += 1;
            return None;
        }
        self.lines -= 1;
        Some(flint_proto::failure::head(message, ECHO_LINE))
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl host::Host for HostState {
    fn current_task(&mut self) -> TaskInfo {
        self.info.clone()
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.asked.record(&key);
        self.config.get(&key).cloned()
    }

    fn get_token(&mut self, service: String) -> Option<host::Token> {
        // A token past its expiry is handed out no more, whatever the driver last sent.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let found = self.tokens.iter().find(|t| t.service == service && t.expires_at_ms > now_ms);
        if found.is_none() {
            // Only the tokens of services the job's manifest names reach a task: a task
            // asking for another is worth an operator's look. The service name is
            // clipped, as the guest chose it.
            let TaskInfo { job_id, task_index, attempt, .. } = &self.info;
            let asked: String = service.chars().take(64).collect();
            tracing::warn!(job_id, task_index, attempt, service = %asked, "a task asked for a token it may not read or that is not valid now: none given");
        }
        found.map(|t| host::Token {
            service: t.service.clone(),
            secret: t.secret.clone(),
            expires_at_ms: t.expires_at_ms,
        })
    }

    fn log(&mut self, level: Level, message: String) {
        let TaskInfo { job_id, task_index, attempt, .. } = &self.info;
        let first_dropped = self.echo.lines == 0 && self.echo.dropped == 0;
        let line = match self.echo.take(&message) {
            Some(line) => line,
            // Said once, at the level of the first line it holds back.
            None if first_dropped => format!(
                "the task logs more than {ECHO_LINES} lines: the rest go to its task log only (flint.task.maxLogSize)"
            ),
            None => String::new(),
        };
        if !line.is_empty() {
            match level {
                Level::Trace => tracing::trace!(job_id, task = task_index, attempt, "{line}"),
                Level::Debug => tracing::debug!(job_id, task = task_index, attempt, "{line}"),
                Level::Info => tracing::info!(job_id, task = task_index, attempt, "{line}"),
                Level::Warn => tracing::warn!(job_id, task = task_index, attempt, "{line}"),
                Level::Error => tracing::error!(job_id, task = task_index, attempt, "{line}"),
            }
        }
        let tag = match level {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        };
        // In pieces: the message may be large, and the sink keeps only what fits.
        self.log.append(format!("[{tag}] ").as_bytes());
        self.log.append(message.as_bytes());
        self.log.append(b"\n");
    }
}

impl types::Host for HostState {}

impl HostSplitReader for HostState {
    fn next(&mut self, _: Resource<SplitReader>, max_bytes: u32) -> Result<Vec<u8>, TaskError> {
        let max = (max_bytes as usize).clamp(1, MAX_NEXT);
        let read = match (&self.input_failed, &mut self.input) {
            (Some(failure), _) => Err(failure.clone()),
            _ if self.kill.is_killed() => Err(TaskFailure::Killed { reason: "killed on request".into() }),
            (None, Some(source)) => source.next(max),
            (None, None) => {
                return Err(TaskError { message: "a split read outside its task".into(), retryable: false });
            }
        };
        read.map_err(|failure| {
            let error = TaskError { message: failure.to_string(), retryable: failure.retryable() };
            self.input_failed = Some(failure);
            error
        })
    }

    fn drop(&mut self, rep: Resource<SplitReader>) -> wasmtime::Result<()> {
        // A handle kept past its call was deleted when the call ended.
        let _ = self.table.delete(rep);
        Ok(())
    }
}

fn task_error(e: ShuffleError) -> TaskError {
    TaskError { message: e.message, retryable: e.retryable }
}

impl shuffle::Host for HostState {}

impl HostEmitter for HostState {
    fn partitions(&mut self, _: Resource<Emitter>) -> u32 {
        match &self.records {
            Records::Sink(sink) | Records::Both(_, sink) => sink.partitions(),
            _ => 0,
        }
    }

    fn emit(&mut self, _: Resource<Emitter>, batch: Vec<u8>) -> Result<(), TaskError> {
        match &mut self.records {
            Records::Sink(sink) | Records::Both(_, sink) => sink.emit(&batch).map_err(task_error),
            _ => Err(TaskError { message: "records emitted outside a map task".into(), retryable: false }),
        }
    }

    fn drop(&mut self, rep: Resource<Emitter>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

impl HostSortedInput for HostState {
    fn next(&mut self, _: Resource<SortedInput>, max_bytes: u32) -> Result<Vec<u8>, TaskError> {
        let max = (max_bytes as usize).clamp(1, MAX_NEXT);
        match &mut self.records {
            Records::Source(source) | Records::Both(source, _) => source.next(max).map_err(task_error),
            _ => {
                Err(TaskError { message: "sorted input read outside a reduce task".into(), retryable: false })
            }
        }
    }

    fn drop(&mut self, rep: Resource<SortedInput>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

impl HostPartWriter for HostState {
    fn write(&mut self, _: Resource<PartWriter>, bytes: Vec<u8>) -> Result<(), TaskError> {
        match &mut self.part {
            Some(part) => part.write(&bytes).map_err(task_error),
            None => Err(TaskError {
                message: "a part file written outside its reduce task".into(),
                retryable: false,
            }),
        }
    }

    fn drop(&mut self, rep: Resource<PartWriter>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

/// Why a program's datasets call did not do what it asked: the program's to see (and,
/// when it gives up on it, its failure).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatasetError {
    /// The driver does not take the plan (an unknown dataset, kind or input, a bound).
    #[error("{0}")]
    Refused(String),
    /// The action's job ran and failed (or could not be submitted).
    #[error("the action's job failed: {0}")]
    ActionFailed(String),
}

/// The driver's side of a program's datasets: what the calls of its `main` do.
pub trait DatasetsHost: Send {
    fn source(&mut self, source: DatasetSource) -> Result<u32, DatasetError>;
    fn narrow(&mut self, parent: u32, step: Step) -> Result<u32, DatasetError>;
    fn wide(&mut self, parents: Vec<u32>, dependency: Dependency) -> Result<u32, DatasetError>;
    fn partitions(&mut self, dataset: u32) -> Result<u32, DatasetError>;
    /// Runs a job computing `dataset`; its partitions' records, in order.
    fn collect(&mut self, dataset: u32) -> Result<Vec<Vec<u8>>, DatasetError>;
}

/// A program's instance: its driver side, and the functions its component declares.
pub(crate) struct ProgramState {
    pub(crate) host: Box<dyn DatasetsHost>,
    pub(crate) functions: std::collections::HashSet<String>,
}

fn refused(message: String) -> TaskError {
    TaskError { message, retryable: false }
}

fn said(e: DatasetError) -> TaskError {
    refused(e.to_string())
}

impl HostState {
    fn program(&mut self) -> Result<&mut ProgramState, TaskError> {
        self.program.as_mut().ok_or_else(|| {
            refused("datasets are made by a program's main, on the driver, not in a task".into())
        })
    }

    /// A function a plan names must be one the component declares.
    fn declared(&mut self, function: &str) -> Result<(), TaskError> {
        let program = self.program()?;
        if function.is_empty() || program.functions.contains(function) {
            return Ok(());
        }
        let mut known: Vec<&str> = program.functions.iter().map(String::as_str).collect();
        known.sort_unstable();
        Err(refused(format!(
            "the program names a function {function:?} that its component does not declare (it declares {})",
            known.join(", ")
        )))
    }
}

impl datasets::Host for HostState {
    fn from_source(&mut self, source: datasets::Source) -> Result<u32, TaskError> {
        let source = match source {
            datasets::Source::TextFile(name) => DatasetSource::TextFile(name),
            datasets::Source::Parallelize(v) => {
                DatasetSource::Parallelize { records: v.records, slices: v.slices }
            }
            datasets::Source::Range(n) => DatasetSource::Range(n),
        };
        self.program()?.host.source(source).map_err(said)
    }

    fn narrow(&mut self, parent: u32, step: datasets::Step) -> Result<u32, TaskError> {
        self.declared(&step.function)?;
        let step = Step { kind: step.kind, function: step.function, capture: step.capture };
        self.program()?.host.narrow(parent, step).map_err(said)
    }

    fn wide(&mut self, parents: Vec<u32>, dependency: datasets::Dependency) -> Result<u32, TaskError> {
        self.declared(&dependency.function)?;
        let datasets::Dependency { kind, function, capture, partitions } = dependency;
        self.program()?.host.wide(parents, Dependency { kind, function, capture, partitions }).map_err(said)
    }

    fn partitions(&mut self, dataset: u32) -> Result<u32, TaskError> {
        self.program()?.host.partitions(dataset).map_err(said)
    }

    fn collect(&mut self, dataset: u32) -> Result<Vec<Vec<u8>>, TaskError> {
        // The program waits for its job: that time is not its own, and does not count
        // against its deadline.
        let started = std::time::Instant::now();
        let result = self.program()?.host.collect(dataset).map_err(said);
        self.deadline += started.elapsed();
        result
    }
}
