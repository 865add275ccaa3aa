//! Compute shapes for `make bench` (see `shapes.rs`): each task runs `shape` (`hash`,
//! `float`, `float-by-four` or `table`) for `n` steps, seeded with its index, and outputs the digest;
//! the job's result is the digests' sum.

use flint_guest::{Aggregate, Error, Partition, Task, config_or, task_info};

mod shapes;
pub use shapes::{float, float_by_four, hash, table};

/// Entries of the `table` shape: 32 MiB of successors, well past the caches.
pub const TABLE_ENTRIES: usize = 8 << 20;

pub struct Shapes;

impl Task for Shapes {
    type Output = u64;

    fn run(_: Partition) -> Result<u64, Error> {
        let steps: u64 = config_or("n", 10_000_000)?;
        let seed = u64::from(task_info().task_index);
        let shape: String = config_or("shape", "hash".to_owned())?;
        match shape.as_str() {
            "hash" => Ok(hash(seed, steps)),
            "float" => Ok(float(seed, steps)),
            "float-by-four" => Ok(float_by_four(seed, steps)),
            "table" => Ok(table(seed, steps, TABLE_ENTRIES)),
            other => Err(Error::fatal(format!("shape {other:?}: hash, float, float-by-four or table"))),
        }
    }
}

impl Aggregate for Shapes {
    type Result = u64;

    fn merge(a: u64, b: u64) -> Result<u64, Error> {
        Ok(a + b)
    }

    fn finish(sum: u64) -> Result<u64, Error> {
        Ok(sum)
    }
}

flint_guest::export_aggregate!(Shapes);
