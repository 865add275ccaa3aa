//! {{description}}
//!
//! Each task reads its split of the input files a batch of lines at a time and reports
//! how many lines start in it; the job's result is that list, split by split (Spark's
//! `mapPartitions(..).collect()`).

use flint_guest::{Error, Partition, Task};
use serde::{Deserialize, Serialize};

/// What one task reports.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitLines {
    /// The input file.
    pub path: String,
    /// Where the split starts in it, in bytes.
    pub start: u64,
    /// Lines that start in the split.
    pub lines: u64,
}

/// The job.
pub struct Job;

impl Task for Job {
    type Output = SplitLines;

    fn run(input: Partition) -> Result<SplitLines, Error> {
        let mut split = input.lines()?;
        let mut lines = 0;
        split.for_each_line(|_| {
            lines += 1;
            Ok(())
        })?;
        flint_guest::info!("{} lines from byte {} of {}", lines, split.start, split.path);
        Ok(SplitLines { path: split.path.clone(), start: split.start, lines })
    }
}

flint_guest::export_task!(Job);

#[cfg(test)]
mod tests {
    use super::*;
    use flint_guest::testing::{Input, Local};

    #[test]
    fn each_split_reports_its_lines() {
        let run = Local::new().collect::<Job>([Input::text("one\ntwo\n"), Input::text("three")]).unwrap();
        assert_eq!(run.result[0]["lines"], 2);
        assert_eq!(run.result[1]["lines"], 1, "a last line without a newline counts");
        assert!(run.logs[0].contains("2 lines"), "{:?}", run.logs);
    }

    #[test]
    fn a_task_without_input_files_says_what_it_needs() {
        let error = Local::new().run::<Job>(Input::Generated, 0, 1).unwrap_err();
        assert!(error.to_string().contains("--input"), "{error}");
    }
}
