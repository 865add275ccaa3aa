//! Flint's driver: the scheduler state machine, job planning and ordered folding of
//! task outputs, the driver's event loop, and the embedded cluster behind `flint run`.

mod driver;
pub mod fold;
mod job;
pub mod local;
pub mod scheduler;
pub mod server;

pub use driver::{Driver, DriverConfig, ExecutorInfo, JobHandle};
pub use job::{JobRequest, SubmitError};
