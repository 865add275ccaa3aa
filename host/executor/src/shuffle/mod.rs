//! The executor's half of the shuffle: map outputs written sorted into one data file
//! and one index per map task, read back by reduce tasks (from this executor's disk or
//! fetched from the executor holding them), merged by key, and deleted with their job.
//!
//! On disk, under each of `flint.local.dir`'s folders, `shuffle/job-<id>/`:
//! `map-<m>.data` holds each reduce partition's records in key order, one zstd frame a
//! partition (an empty partition takes no bytes); `map-<m>.index` holds the partitions'
//! offsets and a CRC-32 of each stored slice, which the reader checks before it
//! decompresses a byte. A record in a slice is its key's and its value's lengths (u32 LE
//! each), then the key, then the value.

pub(crate) mod adopt;
pub(crate) mod combine;
pub(crate) mod disk;
pub(crate) mod files;
pub(crate) mod frames;
pub(crate) mod gather;
pub(crate) mod index;
pub(crate) mod merge;
pub(crate) mod parts;
pub(crate) mod read;
pub(crate) mod stages;
pub(crate) mod tasks;
pub(crate) mod write;

pub use adopt::Output;
pub use files::{ShuffleFiles, local_dirs};
pub use read::{FetchError, Located, ShuffleFetch, Slice};
pub use tasks::Refusal;
pub use write::MapWriter;

#[cfg(test)]
mod tests;
