//! Flint's wasmtime sandbox. One [`Runtime`] per executor: one `Engine` with the pooling
//! allocator, copy-on-write memory images and epoch interruption from one ticker thread;
//! components identified by SHA-256 digest, compiled once and kept on disk; one
//! `InstancePre` per component; a store per instance that always carries the memory cap,
//! the deadline and a WASI context without ambient authority, and that each call into
//! the instance enters as its own task. No networking here.

mod asked;
mod blocking;
mod capture;
mod component;
mod engine;
mod host;
mod limits;
mod program;
mod random;
mod records;
mod sandbox;

pub use asked::ConfAsked;
pub use component::{JobComponent, LoadError};
pub use engine::{Runtime, RuntimeConfig, RuntimeError, Variant};
pub use host::{DatasetError, DatasetsHost};
pub use limits::{KillSwitch, RuntimeStats};
pub use program::StageInput;
pub use records::{LineSource, PartSink, RECORD_HEADER, RecordSink, RecordSource, Records, ShuffleError};
pub use sandbox::{Accumulator, Call, Folder, Instance, Outcome, TaskContext, TaskInput};

/// The version of the WIT contract (`package flint:task@…`) this runtime implements;
/// a component built against another is refused with both versions named.
pub const CONTRACT: &str = "0.3.0";

/// Host bindings generated from the WIT contract in `wit/`, the one source of truth.
mod bindings {
    wasmtime::component::bindgen!({
        world: "all-exports",
        path: "../../wit",
        with: {
            "flint:task/types.split-reader": crate::records::SplitReader,
            "flint:task/shuffle.emitter": crate::records::Emitter,
            "flint:task/shuffle.sorted-input": crate::records::SortedInput,
            "flint:task/shuffle.part-writer": crate::records::PartWriter,
        },
    });
}
