//! A running job's record in the loop: its descriptor and partitions, its fold, its
//! progress and the submitter's reply, and the report made when it ends.

use flint_core::JobCounts;
use flint_proto::{ExecutorId, FailureRecord, JobDescriptor, JobId, JobProgress, JobReport};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{oneshot, watch};

use super::budget::ResultBudget;
use super::events::PreparedJob;
use super::fold_worker::Fold;

/// A job accepted and given its id, waiting for one of the `flint.driver.maxRunningJobs`
/// places (its submitter holds its handle already).
pub(super) struct Waiting {
    pub(super) id: JobId,
    pub(super) job: PreparedJob,
    pub(super) progress: watch::Sender<JobProgress>,
    pub(super) report: oneshot::Sender<JobReport>,
    pub(super) submitted: Instant,
}

pub(super) struct JobRecord {
    pub(super) descriptor: Arc<JobDescriptor>,
    /// Its partitions, made as its tasks are launched.
    pub(super) plan: flint_proto::JobPlan,
    pub(super) fold: Fold,
    pub(super) progress: watch::Sender<JobProgress>,
    pub(super) reply: Option<oneshot::Sender<JobReport>>,
    pub(super) started: Instant,
    /// The job's counts and stages as the core gave them when it ended the job (it
    /// forgets the job then); while the job runs they are read from the core, where
    /// they are kept.
    pub(super) ended: Option<(JobCounts, Vec<flint_proto::StageReport>)>,
    pub(super) failures: Vec<FailureRecord>,
    /// A task's output came as a block: the core was told (`LargeOutputs`).
    pub(super) large_outputs: bool,
    /// Bytes of task results charged so far, against `flint.driver.maxResultSize`.
    pub(super) budget: ResultBudget,
    /// Executors that were sent attempts of this job, told when it ends.
    pub(super) executors: BTreeSet<ExecutorId>,
    pub(super) span: tracing::Span,
    /// Files sent with the job: removed when the record goes (the job ended).
    pub(super) _uploads: Option<Arc<crate::job::Uploads>>,
    /// Where its reduce tasks' parts are committed; taken when the job starts to end.
    pub(super) output: Option<super::output::Committer>,
    /// Its output is being ended: the job ends when that is done, and only then.
    pub(super) ending: bool,
    /// The configuration keys its tasks and its merge asked for, on every host.
    pub(super) asked: Arc<flint_runtime::ConfAsked>,
}
