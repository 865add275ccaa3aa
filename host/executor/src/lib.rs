//! Flint's executor core: runs launched tasks on the sandboxed runtime and reports how
//! each ended. The transport that brings launches and carries reports (in-process
//! channels for `flint run`, QUIC for a cluster) lives outside this crate.

pub mod blocks;
mod core;
pub mod inputs;
pub mod lifecycle;
mod meter;
pub mod peers;
pub mod remote;
pub mod shuffle;
mod source;

pub use blocks::BlockStore;
pub use core::{ExecutorCore, INLINE_OUTPUT};
pub use inputs::InputReader;
pub use shuffle::ShuffleFiles;
pub use source::{DriverSource, SourceError};
