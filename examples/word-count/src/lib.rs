//! Word count. Each task counts the words of its file split; merging adds the counts;
//! finishing keeps the totals and the ten most frequent words (ties by word, ascending).
//! Adding counts is commutative, so the job implements `Combine`: the splits one slot
//! runs are counted into one table where they run, as the native reference's threads
//! do, instead of a table per split merged afterwards.

mod count;

use flint_guest::{Aggregate, Combine, Error, Partition, Task};
use serde::{Deserialize, Serialize};

pub use count::count_words;

const TOP: usize = 10;

#[derive(Serialize, Deserialize, Default)]
pub struct Counts(count::Counts);

#[derive(Serialize)]
pub struct Summary {
    pub total_words: u64,
    pub distinct_words: u64,
    pub top: Vec<(Box<str>, u64)>,
}

pub struct WordCount;

impl Task for WordCount {
    type Output = Counts;

    fn run(input: Partition) -> Result<Counts, Error> {
        let mut counts = Counts::default();
        Self::add(&mut counts, input)?;
        Ok(counts)
    }
}

impl Combine for WordCount {
    fn empty() -> Counts {
        Counts::default()
    }

    fn add(acc: &mut Counts, input: Partition) -> Result<(), Error> {
        // A batch of whole lines at a time: no word spans two.
        input.lines()?.for_each_batch(|batch| {
            count_words(batch, &mut acc.0);
            Ok(())
        })
    }
}

impl Aggregate for WordCount {
    type Result = Summary;

    fn merge(a: Counts, b: Counts) -> Result<Counts, Error> {
        Ok(Counts(count::merge(a.0, b.0)))
    }

    fn finish(c: Counts) -> Result<Summary, Error> {
        let total_words = c.0.values().sum();
        let distinct_words = c.0.len() as u64;
        let mut top: Vec<(Box<str>, u64)> = c.0.into_iter().collect();
        let order = |a: &(Box<str>, u64), b: &(Box<str>, u64)| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0));
        if top.len() > TOP {
            top.select_nth_unstable_by(TOP, order);
            top.truncate(TOP);
        }
        top.sort_unstable_by(order);
        Ok(Summary { total_words, distinct_words, top })
    }
}

flint_guest::export_combine!(WordCount);
