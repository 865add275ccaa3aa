//! Flint's standalone cluster, Spark's standalone mode made sturdier: `flint master`
//! (`master`: a QUIC front around the control core's `flint_core::master`, and its
//! page), `flint worker` (`worker`: a daemon per machine that starts executors on the
//! master's request) and the driver's `standalone` backend (`backend`), which asks the
//! master for executors as the `local` and `kubernetes` backends ask their own.

pub mod backend;
mod frames;
pub mod master;
pub mod page;
pub mod worker;

pub use backend::{StandaloneBackend, StandaloneError, StandaloneOptions};
pub use master::{MasterHandle, MasterOptions, MasterView};
pub use worker::{WorkerError, WorkerOptions, run_worker};
