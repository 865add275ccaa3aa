//! Monte Carlo pi. Task t of T seeds SplitMix64 with state t, draws `points` pairs
//! (x, y the top 32 bits of two successive outputs) and counts x² + y² < 2⁶⁴.

use flint_guest::{Aggregate, Combine, Error, Partition, Task, config_or, task_info};
use serde::{Deserialize, Serialize};

mod count;
pub use count::{SplitMix64, count_inside};

#[derive(Serialize, Deserialize)]
pub struct Count {
    pub inside: u64,
    pub total: u64,
}

#[derive(Serialize)]
pub struct Estimate {
    pub inside: u64,
    pub total: u64,
    pub pi: f64,
}

pub struct Pi;

impl Task for Pi {
    type Output = Count;

    fn run(_: Partition) -> Result<Count, Error> {
        let points: u64 = config_or("points", 1_000_000)?;
        let inside = count_inside(u64::from(task_info().task_index), points);
        Ok(Count { inside, total: points })
    }
}

impl Aggregate for Pi {
    type Result = Estimate;

    fn merge(a: Count, b: Count) -> Result<Count, Error> {
        Ok(Count { inside: a.inside + b.inside, total: a.total + b.total })
    }

    fn finish(c: Count) -> Result<Estimate, Error> {
        let pi = if c.total == 0 { 0.0 } else { 4.0 * c.inside as f64 / c.total as f64 };
        Ok(Estimate { inside: c.inside, total: c.total, pi })
    }
}

/// Sums are commutative: the tasks one slot runs are added up where they run.
impl Combine for Pi {
    fn empty() -> Count {
        Count { inside: 0, total: 0 }
    }
}

flint_guest::export_combine!(Pi);
