//! Flint's domain types, shared by driver, executors and clients: ids, configuration,
//! job manifests and plans, and typed task failures. Nothing here does IO.

pub mod config;
pub mod failure;
pub mod job;

pub use config::{Conf, ConfError, Settings};
pub use failure::TaskFailure;
pub use job::{JobPlan, Manifest, PartitionSpec, World};
