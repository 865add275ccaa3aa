//! The smallest job: each task outputs 1, and the job adds them up: the task count.

use flint_guest::{Aggregate, Error, Partition, Task};

pub struct Noop;

impl Task for Noop {
    type Output = u64;

    fn run(_: Partition) -> Result<u64, Error> {
        Ok(1)
    }
}

impl Aggregate for Noop {
    type Result = u64;

    fn merge(a: u64, b: u64) -> Result<u64, Error> {
        Ok(a + b)
    }

    fn finish(count: u64) -> Result<u64, Error> {
        Ok(count)
    }
}

flint_guest::export_aggregate!(Noop);
