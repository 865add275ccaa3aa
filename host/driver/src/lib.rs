//! Flint's driver: job planning and ordered folding of task outputs, the event loop
//! around the control core (`flint-core`), the links to executors, the QUIC front, and
//! the embedded cluster behind `flint run`.

pub mod backend;
pub mod credentials;
pub mod data;
mod driver;
pub mod eventlog;
pub mod fold;
pub mod history;
mod http;
mod job;
pub mod journal;
pub mod link;
pub mod metrics;
pub mod page;
pub mod server;
pub mod ui;

pub use driver::{Driver, DriverConfig, JobHandle, MAX_TASKS, NoToken, merge_runtime};
pub use flint_core::{ExecutorInfo, Incarnation, RenewalConfig};
pub use job::{JobRequest, SubmitError};
pub use link::{Blocks, ChannelLink, ExecutorLink, Fetch};
