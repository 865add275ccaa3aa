//! What the control core is told ([`Event`]) and what it decides ([`Action`]), and a
//! running job's counts.

use crate::registry::{ExecutorInfo, Incarnation};
use crate::scheduler::Decided;
use crate::shuffle::{ReduceInput, ShuffleId};
use flint_proto::{Attempt, ExecutorId, JobError, JobId, StageReport, StageSpec, TaskFailure};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Registered {
        id: ExecutorId,
        incarnation: Incarnation,
        info: ExecutorInfo,
    },
    Heartbeat {
        id: ExecutorId,
        incarnation: Incarnation,
        /// How far its attempts are through their inputs (empty where none is known).
        progress: Vec<flint_proto::wire::Progress>,
    },
    /// The executor finishes what it runs and takes nothing new.
    Draining {
        id: ExecutorId,
        incarnation: Incarnation,
    },
    /// The executor is gone (its connection closed, its process exited): its attempts
    /// run elsewhere without counting as failures.
    Lost {
        id: ExecutorId,
        incarnation: Incarnation,
        reason: String,
    },
    JobSubmitted {
        job: JobId,
        /// Its stages, its tasks numbered stage after stage: a stage that writes a
        /// shuffle reports each task's output as [`Event::MapSucceeded`], and a stage
        /// that reads shuffles waits until every output of them is there.
        stages: Vec<StageSpec>,
        max_failures: u32,
        /// A recurring job's period: each run's time against it sizes the fleet.
        period: Option<Duration>,
        /// Its straggling tasks may get copies, when the policy speculates (its
        /// manifest can say no: its tasks must not run twice).
        speculate: bool,
        /// Its tasks read their splits across the network (the driver's data service,
        /// an object store): short ones are sent one ahead, their first read begun.
        remote_input: bool,
    },
    /// A map task's attempt succeeded: its output is on the executor, `status` says
    /// what it holds.
    MapSucceeded {
        id: ExecutorId,
        incarnation: Incarnation,
        attempt: Attempt,
        elapsed: Duration,
        status: flint_proto::MapStatus,
    },
    TaskSucceeded {
        id: ExecutorId,
        incarnation: Incarnation,
        attempt: Attempt,
        elapsed: Duration,
    },
    TaskFailed {
        id: ExecutorId,
        incarnation: Incarnation,
        attempt: Attempt,
        failure: TaskFailure,
    },
    /// The attempt succeeded and the executor holds its output combined with others
    /// (see `scheduler::Input::TaskCombined`).
    TaskCombined {
        id: ExecutorId,
        incarnation: Incarnation,
        attempt: Attempt,
        elapsed: Duration,
    },
    /// A partial result of combined outputs arrived (its bytes are in).
    Partial {
        id: ExecutorId,
        incarnation: Incarnation,
        job: JobId,
        tasks: Vec<u32>,
    },
    /// The executor lost combined outputs (or its partial could not be fetched).
    CombinedLost {
        id: ExecutorId,
        incarnation: Incarnation,
        job: JobId,
        tasks: Vec<u32>,
    },
    CancelJob {
        job: JobId,
        reason: String,
    },
    /// A task of the job gave an output too large for its report (see
    /// `scheduler::Input::LargeOutputs`).
    LargeOutputs {
        job: JobId,
    },
    /// A process (or pod) the backend started for `id` ended, for `reason`: a
    /// registered executor is removed with it; one that never registered failed to
    /// start.
    BackendExited {
        id: ExecutorId,
        reason: String,
    },
    /// The start of `id` is under way and not stuck (its pod waits for a node or an
    /// image, or its process runs): it has the whole bootstrap timeout again from now.
    /// A pod waiting for room is thus never abandoned for being slow to schedule, as
    /// long as its backend keeps seeing it wait.
    BackendProgress {
        id: ExecutorId,
    },
    /// The start of `id` waits for room (a standalone master has no worker with the
    /// cores it needs, or the application is at its `flint.cores.max`): no bootstrap
    /// timeout runs until a [`Event::BackendProgress`] says it has room, however long
    /// it waits.
    BackendWaiting {
        id: ExecutorId,
    },
    /// A token fetch brought this token; `now_ms` is the wall clock now.
    TokenObtained {
        token: flint_proto::Token,
        now_ms: u64,
    },
    /// A token fetch for `service` failed.
    TokenFailed {
        service: String,
    },
    /// An executor asked to adopt map outputs of `shuffle` from the executor life
    /// `from` copied `maps` and holds them now; it could not copy `failed`.
    Adopted {
        id: ExecutorId,
        incarnation: Incarnation,
        shuffle: ShuffleId,
        from: Incarnation,
        maps: Vec<u32>,
        failed: Vec<(u32, String)>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A task done, lost or retried, a partial result accepted, an executor excluded:
    /// as the scheduler decided it.
    Decided(Decided),
    /// Run these attempts on the executor (one batch per executor per event), each
    /// with where its inputs are.
    Launch {
        executor: ExecutorId,
        incarnation: Incarnation,
        attempts: Vec<Launch>,
    },
    Kill {
        executor: ExecutorId,
        incarnation: Incarnation,
        attempt: Attempt,
    },
    /// Ask the executor for the partial results it holds for the job.
    Collect {
        executor: ExecutorId,
        incarnation: Incarnation,
        job: JobId,
    },
    /// The attempt's failure was accepted (it is in the job's record).
    TaskFailed {
        attempt: Attempt,
        executor: ExecutorId,
        failure: TaskFailure,
    },
    /// The executor's life ended: drop its link. Sent for every removal, whoever
    /// noticed it.
    ExecutorRemoved {
        executor: ExecutorId,
        incarnation: Incarnation,
        reason: String,
    },
    /// Every task of the job succeeded; `counts` are its final counts, `stages` its
    /// stages' (as [`crate::ControlCore::stages`] gave them).
    JobSucceeded {
        job: JobId,
        counts: JobCounts,
        stages: Vec<StageReport>,
    },
    JobFailed {
        job: JobId,
        reason: JobError,
        counts: JobCounts,
        stages: Vec<StageReport>,
    },
    /// Ask the backend for executors with these ids.
    StartExecutors {
        ids: Vec<ExecutorId>,
    },
    /// A start that did not register in time counts as failed: the backend stops it, so
    /// that it cannot register later unasked.
    AbandonStart {
        executor: ExecutorId,
    },
    /// Tell an idle executor to leave (dynamic allocation gives it back).
    Decommission {
        executor: ExecutorId,
        incarnation: Incarnation,
    },
    /// Copy these map outputs of `shuffle` from the leaving executor `from` and hold
    /// them: each its map, digest and most bytes.
    Adopt {
        executor: ExecutorId,
        incarnation: Incarnation,
        shuffle: ShuffleId,
        from: (ExecutorId, Incarnation),
        outputs: Vec<(u32, [u8; 32], u64)>,
    },
    /// A drained executor may go: its map outputs are handed over, or given up.
    Leave {
        executor: ExecutorId,
        incarnation: Incarnation,
    },
    /// Fetch a new token for `service` from its provider (renewal is due).
    FetchToken {
        service: String,
    },
    /// The valid tokens changed (one renewed, or one expired unrenewed): hand these to
    /// every executor.
    TokensChanged {
        tokens: Vec<flint_proto::Token>,
    },
    /// A fetch failed; the next try is in `wait`.
    TokenRetry {
        service: String,
        failures: u32,
        wait: Duration,
    },
}

/// An attempt to run, whole: for a task of a stage that reads shuffles, where its
/// partition of each is, so that whoever carries it out never asks back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub attempt: Attempt,
    pub reads: Vec<ShuffleRead>,
}

/// One shuffle a task reads: its partition of it, and where that partition's slices are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShuffleRead {
    /// The stage that wrote it.
    pub shuffle: u32,
    pub partition: u32,
    pub input: ReduceInput,
}

/// A running job's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCounts {
    pub tasks: u32,
    pub done: u32,
    /// Tasks with an attempt on an executor now.
    pub running: u32,
    /// Attempts launched, retries included.
    pub attempts: u32,
    /// Attempts that failed (losses of executors excluded).
    pub failed_attempts: u32,
    /// Map outputs lost (their executor gone, or unreadable), so those maps ran again.
    pub maps_rerun: u32,
    /// Map outputs copied off leaving executors and switched to their copies.
    pub outputs_handed_over: u32,
    /// Done tasks whose outputs were lost, of any kind (map outputs, combined outputs
    /// held by an executor), so that they ran again.
    pub outputs_lost: u32,
    /// A map/reduce job's shuffle, once every map's output is in (at its end: as its
    /// outputs held it then).
    pub shuffle: Option<flint_proto::ShuffleSizes>,
    /// Copies of straggling attempts started, and those of them that won.
    pub speculative: u32,
    pub speculative_won: u32,
}
