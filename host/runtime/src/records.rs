//! What a call reads and writes in batches: a task's file split (`split-reader`), a map
//! task's `emitter` and a reduce task's `sorted-input` (their host calls are `host`'s).
//! The runtime only carries batches between the guest and what the executor gives a
//! call (a [`LineSource`], a [`RecordSink`] or a [`RecordSource`]); reading inputs,
//! sorting, spilling and fetching are the executor's.

use std::any::Any;

/// A record's header: partition, key length, value length, each a little-endian u32.
pub const RECORD_HEADER: usize = 12;

/// The most bytes one `next` call hands a task (a line longer than that aside),
/// whatever it asks for. Under the allocator's 1 MiB mmap threshold (`flint`'s
/// `main`): a batch's buffer, freed once the guest has its copy, is then reused from
/// the heap by the next call, where a mapped one would cost a page fault and a zeroed
/// page every 4 KiB, every call (measured: half the time of reading a local split).
/// The guest SDK's `Split::BATCH` says the same.
pub(crate) const MAX_NEXT: usize = 960 << 10;

/// Why a batch could not be taken or given: the task fails with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ShuffleError {
    pub message: String,
    /// False when the guest sent what no retry mends (a malformed batch, a partition
    /// out of range); true for the host's own trouble (a full disk).
    pub retryable: bool,
}

/// Takes a map task's batches (each checked whole before any of it is kept).
pub trait RecordSink: Any + Send {
    /// The job's reduce partitions.
    fn partitions(&self) -> u32;
    fn emit(&mut self, batch: &[u8]) -> Result<(), ShuffleError>;
}

/// Gives a reduce task its records in key order, whole records up to about `max`
/// bytes a batch (at least one), and an empty batch at the end.
pub trait RecordSource: Any + Send {
    fn next(&mut self, max: usize) -> Result<Vec<u8>, ShuffleError>;
}

/// A file split's lines as the executor reads them for a task: whole lines, about
/// `max` bytes a batch, an empty batch at the end. A failure (the source gone, the
/// deadline passed, a line too long) is the task's, whatever the guest does with it.
pub trait LineSource: Send {
    fn next(&mut self, max: usize) -> Result<Vec<u8>, flint_proto::TaskFailure>;
}

/// The `split-reader` a call's file split carries: a handle to the store's
/// [`LineSource`].
pub struct SplitReader;

/// Where a reduce call's part file goes (`--output DIR`): bytes appended as they come.
pub trait PartSink: Any + Send {
    fn write(&mut self, bytes: &[u8]) -> Result<(), ShuffleError>;
}

/// The `part-writer` a reduce call is given when its job writes files: a handle to the
/// store's part sink.
pub struct PartWriter;

/// What the running call reads or writes, if it is a map or a reduce.
#[derive(Default)]
pub enum Records {
    #[default]
    None,
    Sink(Box<dyn RecordSink>),
    Source(Box<dyn RecordSource>),
    /// A program's task that reads shuffles and writes one.
    Both(Box<dyn RecordSource>, Box<dyn RecordSink>),
}

/// The `emitter` a map call is given: a handle to the store's [`Records::Sink`].
pub struct Emitter;

/// The `sorted-input` a reduce call is given: a handle to the store's
/// [`Records::Source`].
pub struct SortedInput;

impl Records {
    /// The sink given to a map call, back as its own type.
    pub fn into_sink<S: RecordSink>(self) -> Option<S> {
        match self {
            Records::Sink(sink) | Records::Both(_, sink) => {
                (sink as Box<dyn Any>).downcast::<S>().ok().map(|s| *s)
            }
            _ => None,
        }
    }
}
