//! What the driver's parts tell the event loop: submissions, executors' registrations,
//! reports and losses, fetched blocks, fold results, token news and snapshots.

use crate::link::ExecutorLink;
use flint_core::{ExecutorInfo, Incarnation};
use flint_proto::wire::Rejection;
use flint_proto::{
    ClusterStatus, Conf, ExecutorId, JobError, JobId, JobPlan, Partial, Settings, StatusUpdate, TaskFailure,
};
use flint_runtime::JobComponent;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

use super::budget::Charged;
use crate::backend::News;
use crate::backend::Reporter;
use crate::credentials::TokenProvider;
use crate::job::SubmitError;
use flint_proto::{JobProgress, JobReport};
use tokio::sync::{mpsc, watch};

/// A submitted job: its progress as it runs, and its report when it ends.
pub struct JobHandle {
    pub id: JobId,
    pub progress: watch::Receiver<JobProgress>,
    pub report: oneshot::Receiver<JobReport>,
}

pub(super) enum Event {
    /// A job id taken for a program, which runs its actions as jobs of their own.
    NewJobId {
        reply: oneshot::Sender<flint_proto::JobId>,
    },
    Submit {
        job: Box<PreparedJob>,
        reply: oneshot::Sender<Result<JobHandle, SubmitError>>,
    },
    Reserve {
        requested: Option<ExecutorId>,
        pod_name: Option<String>,
        reply: oneshot::Sender<Result<(ExecutorId, Incarnation), Rejection>>,
    },
    ExecutorUp {
        id: ExecutorId,
        incarnation: Incarnation,
        info: ExecutorInfo,
        link: Arc<dyn ExecutorLink>,
    },
    Heartbeat {
        id: ExecutorId,
        incarnation: Incarnation,
        progress: Vec<flint_proto::wire::Progress>,
    },
    Decommissioning {
        id: ExecutorId,
        incarnation: Incarnation,
    },
    /// An executor's answer to an adoption.
    Adopted {
        id: ExecutorId,
        incarnation: Incarnation,
        adopted: flint_proto::Adopted,
    },
    ExecutorLost {
        id: ExecutorId,
        incarnation: Incarnation,
        reason: String,
    },
    Status {
        incarnation: Incarnation,
        update: StatusUpdate,
    },
    Fetched {
        incarnation: Incarnation,
        update: StatusUpdate,
        /// The bytes, still charged to the job (a failed fetch gave its charge back).
        result: Result<Charged, TaskFailure>,
    },
    /// An executor handed over combined outputs.
    Partial {
        id: ExecutorId,
        incarnation: Incarnation,
        partial: Partial,
    },
    /// A partial result's block arrived, or could not be had.
    PartialFetched {
        id: ExecutorId,
        incarnation: Incarnation,
        job: JobId,
        tasks: Vec<u32>,
        result: Result<Charged, PartialLoss>,
    },
    Folded {
        job: JobId,
        result: Result<Vec<u8>, JobError>,
    },
    /// A job's part output was ended (its commits in, its leftovers swept, `_SUCCESS`
    /// written if it succeeded): the job ends with this.
    OutputEnded {
        job: JobId,
        outcome: Result<Vec<u8>, JobError>,
    },
    Snapshot(oneshot::Sender<ClusterStatus>),
    /// Stop a job at a client's request.
    Cancel {
        job: JobId,
        reply: oneshot::Sender<flint_proto::wire::CancelReply>,
    },
    /// A backend was attached: the allocation policy may want executors at once.
    BackendAttached,
    /// The delegation tokens changed: push them to every live executor.
    TokensChanged,
    /// Renew tokens from these providers.
    RenewTokens {
        providers: HashMap<String, Arc<dyn TokenProvider>>,
        config: flint_core::RenewalConfig,
        initial: Vec<flint_proto::Token>,
    },
    /// A provider's fetch ended. At most one fetch per service is under way (the core
    /// asks again only after an answer), so these add one event per service at a time.
    TokenFetched {
        service: String,
        result: Result<flint_proto::Token, crate::credentials::TokenError>,
    },
    /// The backend's news of an executor it started.
    Backend {
        id: ExecutorId,
        news: News,
    },
    /// Fail every running job with `reason` and take no more (the driver is stopping).
    Shutdown {
        reason: String,
        done: oneshot::Sender<()>,
    },
}

pub(super) struct PreparedJob {
    pub(super) name: String,
    pub(super) component: Arc<JobComponent>,
    pub(super) plan: JobPlan,
    pub(super) config: Conf,
    pub(super) settings: Settings,
    pub(super) memory_limit: Option<u64>,
    pub(super) deadline: Duration,
    pub(super) token_services: Vec<String>,
    pub(super) every: Option<Duration>,
    /// A map/reduce job's (maps, reduces): its plan's first `maps` partitions are map
    /// tasks' and the rest reduce tasks'.
    pub(super) shuffle: Option<(u32, u32)>,
    /// A program's action: the plan of each of its stages.
    pub(super) program: Option<Arc<Vec<flint_proto::program::ProgramStage>>>,
    /// Where the keys its calls read are noted, when not in a record of its own (a
    /// program's action: its program's).
    pub(super) asked: Option<Arc<flint_runtime::ConfAsked>>,
    /// Where a map/reduce job's part output goes (a directory or prefix made ready).
    pub(super) parts: Option<flint_proto::Parts>,
    /// That output, claimed: released when the job (or its refusal) goes.
    pub(super) output: Option<super::output::Output>,
    /// Files sent with the job, kept until it ends.
    pub(super) uploads: Option<Arc<crate::job::Uploads>>,
    /// Its straggling tasks may get copies (the driver speculates, its manifest lets it).
    pub(super) speculate: bool,
}

/// Peer events queued for the loop before their readers wait.
pub(super) const PEER_QUEUE: usize = 1024;

/// Carries a backend's news (an executor's start under way, its process or pod ended)
/// to the loop.
pub(super) fn reporter(events: &mpsc::UnboundedSender<Event>) -> Reporter {
    let events = events.clone();
    Reporter::new(move |id, news| {
        let _ = events.send(Event::Backend { id, news });
    })
}

/// Why a block fetch gave no bytes.
#[derive(Debug, thiserror::Error)]
pub(super) enum FetchFailure {
    /// The bytes that came are not the block the executor named.
    #[error("{0}")]
    Mismatch(String),
    /// None came: the stream or the executor went, or the time ran out.
    #[error("{0}")]
    Lost(String),
}

/// Why an executor's combined value never reached the driver: the tasks it holds run
/// again.
#[derive(Debug, thiserror::Error)]
pub(super) enum PartialLoss {
    /// No honest executor names this many.
    #[error("a partial result may name at most {} tasks", flint_proto::MAX_PARTIAL_TASKS)]
    TooManyTasks,
    #[error("a partial result must hold a value")]
    NoValue,
    /// The executor says so (its combining instance failed, its store had no room).
    #[error("{0}")]
    OnExecutor(String),
    #[error("fetching it failed: {0}")]
    Fetch(FetchFailure),
}
