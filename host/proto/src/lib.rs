//! Flint's domain and wire types, shared by driver, executors and clients: ids,
//! configuration, job manifests and plans, tasks, reports, typed failures, and the
//! messages peers exchange, and the buffers they are carried in. Nothing here does IO.

pub mod bundle;
pub mod config;
pub mod failure;
pub mod ids;
pub mod job;
pub mod plan;
pub mod program;
pub mod recycle;
pub mod report;
pub mod standalone;
pub mod task;
pub mod wire;

pub use bundle::{Bundle, BundleError};
pub use config::held::JOB_KEYS;
pub use config::{
    Backend, Conf, ConfError, CredentialSettings, DynamicAllocation, FLINT_SERVICE, KubernetesSettings,
    ObjectSettings, Settings,
};
pub use failure::TaskFailure;
pub use ids::{AppId, ExecutorId, Incarnation, JobId, WorkerId};
pub use job::{
    Compression, LimitError, Limits, Manifest, MapSource, PartitionSpec, ShuffleEndpoint, ShuffleInput,
    Source, World,
};
pub use plan::{JobPlan, MAX_TASKS, StageInput, StageSpec};
pub use report::{
    AttemptState, ClusterStatus, ExecutorState, ExecutorStatus, FailureRecord, JobError, JobProgress,
    JobReport, JobState, JobStatus, LOG_TAIL, SKEW_FACTOR, SKEW_MIN_BYTES, ShuffleSizes, StageKind,
    StageReport, TaskRecord, log_tail,
};
pub use task::{
    Adopted, Adoption, Attempt, BlockId, BlockRef, Digest, ExecutorCommand, INLINE_PER_LAUNCH,
    INLINE_PER_MAP, INLINE_SLICE, InlineSlice, JobDescriptor, MAX_ASKED, MAX_ASKED_KEY, MAX_HELD_PER_SLOT,
    MAX_PARTIAL_TASKS, MapStatus, Partial, Parts, ShuffleSpec, StatusUpdate, TaskLaunch, TaskMetrics,
    TaskOutput, TaskState, Token,
};
