//! The driver: one event loop owns the control core (scheduler and executor registry),
//! the links to executors and every running job. Submitters, executors and fold workers
//! talk to it by events; it carries out what the core decides.
//!
//! Rooms, each importing only rooms listed before it (no circle):
//!
//! - `budget`: a job's result budget and the charges drawn on it;
//! - `fold_worker`: how outputs become a result;
//! - `output`: a map/reduce job's parts: claimed, committed, ended;
//! - `events`: what the driver's parts tell the loop, and the handle a submitter gets;
//! - `records`: a running job's record, and a waiting one's;
//! - `shared`: what the handle and the loop share (configuration, components, tokens,
//!   the status store, metrics);
//! - `plan`: a job's partitions from its inputs;
//! - `event_loop`: the loop, its turns and its dispatch;
//! - `jobs`, `reports`, `actions`: the loop's work on jobs (submitted, ended), on
//!   executors' reports, and on what the core decided;
//! - `handle`: the [`Driver`] its callers hold, which starts the loop.

mod actions;
mod budget;
mod event_loop;
mod events;
mod fold_worker;
mod handle;
mod jobs;
mod output;
mod plan;
mod program;
mod records;
mod reports;
mod shared;
mod warnings;

pub use events::JobHandle;
pub use handle::{Driver, DriverConfig, NoToken, merge_runtime};
pub use plan::MAX_TASKS;
