//! {{description}}
//!
//! Each task counts the words of its split (a word is a run of bytes that are not ASCII
//! white space); adding counts is commutative, so the job implements `Combine`: the
//! splits one executor slot runs are counted into one table where they run (Spark's
//! map-side combine), and the driver merges one table per slot. The result keeps the
//! totals and the `top` (config, default 10) most frequent words, ties by word.

use flint_guest::{Aggregate, Combine, Error, Partition, Task, config_or};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Counts by word: a task's output and the running value of a slot.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Counts(HashMap<String, u64>);

/// The job's result, as `flint run` prints it.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Words in all the input.
    pub total_words: u64,
    /// Different words.
    pub distinct_words: u64,
    /// The most frequent words and their counts, most frequent first.
    pub top: Vec<(String, u64)>,
}

/// The job.
pub struct Job;

impl Task for Job {
    type Output = Counts;

    fn run(input: Partition) -> Result<Counts, Error> {
        let mut counts = Counts::default();
        Self::add(&mut counts, input)?;
        Ok(counts)
    }
}

impl Combine for Job {
    fn empty() -> Counts {
        Counts::default()
    }

    fn add(acc: &mut Counts, input: Partition) -> Result<(), Error> {
        // A batch of whole lines at a time: no word spans two batches.
        input.lines()?.for_each_batch(|batch| {
            for word in batch.split(u8::is_ascii_whitespace).filter(|w| !w.is_empty()) {
                let word = String::from_utf8_lossy(word);
                match acc.0.get_mut(word.as_ref()) {
                    Some(n) => *n += 1,
                    None => {
                        acc.0.insert(word.into_owned(), 1);
                    }
                }
            }
            Ok(())
        })
    }
}

impl Aggregate for Job {
    type Result = Summary;

    fn merge(mut a: Counts, b: Counts) -> Result<Counts, Error> {
        for (word, n) in b.0 {
            *a.0.entry(word).or_default() += n;
        }
        Ok(a)
    }

    fn finish(counts: Counts) -> Result<Summary, Error> {
        let keep: usize = config_or("top", 10)?;
        let total_words = counts.0.values().sum();
        let distinct_words = counts.0.len() as u64;
        let mut top: Vec<(String, u64)> = counts.0.into_iter().collect();
        top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top.truncate(keep);
        Ok(Summary { total_words, distinct_words, top })
    }
}

flint_guest::export_combine!(Job);

#[cfg(test)]
mod tests {
    use super::*;
    use flint_guest::testing::{Input, Local};

    #[test]
    fn counts_words_across_splits() {
        let inputs = [Input::text("the cat\nthe dog\n"), Input::text("a cat"), Input::text("the end\n")];
        let run = Local::new().config("top", 2).combine::<Job>(inputs).unwrap();
        assert_eq!(run.result["total_words"], 8);
        assert_eq!(run.result["distinct_words"], 5);
        assert_eq!(run.result["top"], serde_json::json!([["the", 3], ["cat", 2]]));
    }

    #[test]
    fn combining_gives_what_merging_in_order_gives() {
        let inputs = || (0..5).map(|i| Input::text(format!("w{i} w{} shared\n", i % 2)));
        let combined = Local::new().combine::<Job>(inputs()).unwrap();
        let merged = Local::new().aggregate::<Job>(inputs()).unwrap();
        assert_eq!(combined.result, merged.result);
    }
}
