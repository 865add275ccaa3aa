//! Flint's driver: the scheduler state machine, job planning and folding, the executor
//! core that runs tasks on a runtime, and the embedded cluster behind `flint run`.

pub mod scheduler;
