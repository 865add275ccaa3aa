//! Flint's executor core: runs launched tasks on the sandboxed runtime and reports how
//! each ended. The transport that brings launches and carries reports (in-process
//! channels for `flint run`, QUIC for a cluster) lives outside this crate.

pub mod blocks;
mod core;
pub mod inputs;
pub mod lifecycle;
pub mod remote;

pub use blocks::BlockStore;
pub use core::{DriverSource, ExecutorCore, INLINE_OUTPUT, SourceError};
pub use inputs::InputReader;
