//! {{description}}
//!
//! Word count as a map/reduce job, as Spark's
//! `flatMap(split).map((_, 1)).reduceByKey(_ + _)`: each map task emits `(word, 1)` for
//! every word of its split (a word is a run of bytes that are not ASCII white space),
//! combined per word where it runs; the host moves the records by word to the reduce
//! tasks (`--reduce-partitions`); each reduce task sums its words' counts and keeps its
//! totals and most frequent words; the driver joins those, keeping the `top` (config,
//! default 10). With `--output DIR`, each reduce task also writes `word<TAB>count` lines,
//! in key order, to its part file.

use flint_guest::{Emitter, Error, MapReduce, Partition, Values, config_or, part};
use serde::{Deserialize, Serialize};

/// What a reduce task found, and the job's result.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Words in all the input.
    pub total_words: u64,
    /// Different words.
    pub distinct_words: u64,
    /// The most frequent words and their counts, most frequent first.
    pub top: Vec<(String, u64)>,
}

/// Keeps the `keep` most frequent of `top`, ties by word.
fn keep_top(top: &mut Vec<(String, u64)>, keep: usize) {
    top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top.truncate(keep);
}

/// The job.
pub struct Job;

impl MapReduce for Job {
    type Key = String;
    type Value = u64;
    type Output = Summary;
    type Result = Summary;
    const COMBINE: bool = true;

    fn map(input: Partition, out: &mut Emitter<Self>) -> Result<(), Error> {
        input.lines()?.for_each_batch(|batch| {
            for word in batch.split(u8::is_ascii_whitespace).filter(|w| !w.is_empty()) {
                out.emit(String::from_utf8_lossy(word).as_ref(), 1)?;
            }
            Ok(())
        })
    }

    fn combine(acc: &mut u64, value: u64) -> Result<(), Error> {
        *acc += value;
        Ok(())
    }

    fn empty() -> Summary {
        Summary::default()
    }

    fn reduce(word: String, counts: &mut Values<'_, u64>, out: &mut Summary) -> Result<(), Error> {
        let n: u64 = counts.sum();
        if part::wanted() {
            part::line(format_args!("{word}\t{n}"))?;
        }
        out.total_words += n;
        out.distinct_words += 1;
        out.top.push((word, n));
        let keep = config_or("top", 10)?;
        if out.top.len() >= 4 * keep.max(1) {
            keep_top(&mut out.top, keep);
        }
        Ok(())
    }

    fn merge(mut a: Summary, b: Summary) -> Result<Summary, Error> {
        a.total_words += b.total_words;
        a.distinct_words += b.distinct_words;
        a.top.extend(b.top);
        keep_top(&mut a.top, config_or("top", 10)?);
        Ok(a)
    }

    fn finish(mut s: Summary) -> Result<Summary, Error> {
        keep_top(&mut s.top, config_or("top", 10)?);
        Ok(s)
    }
}

flint_guest::export_map_reduce!(Job);

#[cfg(test)]
mod tests {
    use super::*;
    use flint_guest::testing::{Input, Local};

    #[test]
    fn counts_words_across_maps_and_reduce_partitions() {
        let inputs = [Input::text("the cat\nthe dog\n"), Input::text("a cat"), Input::text("the end\n")];
        let run = Local::new().config("top", 2).map_reduce::<Job>(inputs, 3).unwrap();
        assert_eq!(run.result["total_words"], 8);
        assert_eq!(run.result["distinct_words"], 5);
        assert_eq!(run.result["top"], serde_json::json!([["the", 3], ["cat", 2]]));
    }

    #[test]
    fn each_reduce_partition_writes_its_words_in_key_order() {
        let run = Local::new().with_parts().map_reduce::<Job>([Input::text("b a b\n")], 1).unwrap();
        assert_eq!(run.parts, vec![b"a\t1\nb\t2\n".to_vec()]);
    }
}
