//! {{description}}
//!
//! Each task counts the lines of its split of the input files; the driver adds the
//! counts in partition order (Spark's `aggregate`) and `finish` makes the result.

use flint_guest::{Aggregate, Error, Partition, Task};
use serde::Serialize;

/// The job's result, as `flint run` prints it.
#[derive(Debug, Serialize)]
pub struct LineCount {
    /// Lines in all the input.
    pub lines: u64,
}

/// The job.
pub struct Job;

impl Task for Job {
    /// One split's lines.
    type Output = u64;

    fn run(input: Partition) -> Result<u64, Error> {
        let mut lines = 0;
        input.lines()?.for_each_batch(|batch| {
            // Whole lines: one newline each, but perhaps the input's last.
            lines += batch.iter().filter(|b| **b == b'\n').count() as u64;
            lines += u64::from(!batch.ends_with(b"\n"));
            Ok(())
        })?;
        Ok(lines)
    }
}

impl Aggregate for Job {
    type Result = LineCount;

    fn merge(a: u64, b: u64) -> Result<u64, Error> {
        Ok(a + b)
    }

    fn finish(lines: u64) -> Result<LineCount, Error> {
        Ok(LineCount { lines })
    }
}

flint_guest::export_aggregate!(Job);

#[cfg(test)]
mod tests {
    use super::*;
    use flint_guest::testing::{Input, Local};

    #[test]
    fn counts_every_line_of_every_split() {
        let inputs = [Input::text("a\nb\n"), Input::text("c\n"), Input::text("d")];
        let run = Local::new().aggregate::<Job>(inputs).unwrap();
        assert_eq!(run.result["lines"], 4);
    }
}
