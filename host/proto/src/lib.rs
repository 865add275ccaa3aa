//! Flint's domain types, shared by driver, executors and clients: ids, configuration,
//! job manifests and plans, tasks and typed task failures. Nothing here does IO.

pub mod config;
pub mod failure;
pub mod job;
pub mod task;

pub use config::{Conf, ConfError, Settings};
pub use failure::TaskFailure;
pub use job::{JobPlan, Limits, Manifest, PartitionSpec, World};
pub use task::{
    Attempt, Digest, ExecutorCommand, ExecutorId, JobDescriptor, JobId, StatusUpdate, TaskLaunch,
    TaskState, Token,
};
