//! Word count. Each task counts the words of its file split; merging adds the counts;
//! finishing keeps the totals and the ten most frequent words (ties by word, ascending).

use flint_guest::{Aggregate, Error, Partition, Task};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

const TOP: usize = 10;

#[derive(Serialize, Deserialize, Default)]
pub struct Counts(HashMap<String, u64>);

#[derive(Serialize)]
pub struct Summary {
    pub total_words: u64,
    pub distinct_words: u64,
    pub top: Vec<(String, u64)>,
}

pub fn count_words(text: &[u8]) -> HashMap<String, u64> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    for word in text.split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty()) {
        match std::str::from_utf8(word) {
            Ok(w) => match counts.get_mut(w) {
                Some(n) => *n += 1,
                None => {
                    counts.insert(w.to_owned(), 1);
                }
            },
            Err(_) => *counts.entry(String::from_utf8_lossy(word).into_owned()).or_default() += 1,
        }
    }
    counts
}

pub struct WordCount;

impl Task for WordCount {
    type Output = Counts;

    fn run(input: Partition) -> Result<Counts, Error> {
        match input {
            Partition::Lines { data, .. } => Ok(Counts(count_words(&data))),
            _ => Err(Error::fatal("word-count reads input files: pass --input PATH")),
        }
    }
}

impl Aggregate for WordCount {
    type Result = Summary;

    fn merge(a: Counts, b: Counts) -> Result<Counts, Error> {
        let (mut big, small) = if a.0.len() >= b.0.len() { (a, b) } else { (b, a) };
        for (word, n) in small.0 {
            *big.0.entry(word).or_default() += n;
        }
        Ok(big)
    }

    fn finish(c: Counts) -> Result<Summary, Error> {
        let total_words = c.0.values().sum();
        let distinct_words = c.0.len() as u64;
        let mut top: Vec<(String, u64)> = c.0.into_iter().collect();
        top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top.truncate(TOP);
        Ok(Summary { total_words, distinct_words, top })
    }
}

flint_guest::export_aggregate!(WordCount);
