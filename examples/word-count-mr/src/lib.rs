//! Word count as a map/reduce job, as Spark's `flatMap(split).map((_, 1)).reduceByKey(_ + _)`:
//! each map task emits `(word, 1)` for every word of its split (combined per key where it
//! runs), each reduce task sums the counts of the words hashed to its partition and keeps
//! its totals and its ten most frequent words, and the job joins those. A word is a run of
//! bytes that are not ASCII white space, as in `word-count`, whose result this one equals.
//! With `--output DIR`, each reduce task also writes every word of its partition and its
//! count, `word<TAB>count` a line in key order, to its part file. For the tests of
//! committed parts, `fail_first_attempt=true` makes each reduce task's first attempt
//! write `fail_first_attempt_bytes` of junk to its part (2 MiB by default: past the
//! SDK's buffer, so it reaches the file) and fail at its next key.

use flint_guest::{Emitter, Error, MapReduce, Partition, Values, part};
use serde::{Deserialize, Serialize};

const TOP: usize = 10;

/// What a reduce task found, and the job's result: the same fields as `word-count`'s.
#[derive(Serialize, Deserialize, Default)]
pub struct Summary {
    pub total_words: u64,
    pub distinct_words: u64,
    pub top: Vec<(String, u64)>,
}

fn by_count(a: &(String, u64), b: &(String, u64)) -> std::cmp::Ordering {
    b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0))
}

/// Keeps the `TOP` first of `top` by count, then word.
fn keep_top(top: &mut Vec<(String, u64)>) {
    if top.len() > TOP {
        top.select_nth_unstable_by(TOP, by_count);
        top.truncate(TOP);
    }
    top.sort_unstable_by(by_count);
}

pub struct WordCount;

impl MapReduce for WordCount {
    type Key = String;
    type Value = u64;
    type Output = Summary;
    type Result = Summary;
    const COMBINE: bool = true;

    fn map(input: Partition, out: &mut Emitter<Self>) -> Result<(), Error> {
        input.lines()?.for_each_batch(|batch| {
            // Valid text (the usual case) is checked once a batch, not word by word.
            if let Ok(text) = std::str::from_utf8(batch) {
                return text.split_ascii_whitespace().try_for_each(|word| out.emit(word, 1));
            }
            for word in batch.split(u8::is_ascii_whitespace).filter(|w| !w.is_empty()) {
                match std::str::from_utf8(word) {
                    Ok(word) => out.emit(word, 1)?,
                    Err(_) => out.emit(&String::from_utf8_lossy(word).into_owned(), 1)?,
                }
            }
            Ok(())
        })
    }

    fn combine(acc: &mut u64, value: u64) -> Result<(), Error> {
        *acc += value;
        Ok(())
    }

    fn empty() -> Summary {
        // `reduce_pause_ms` (default 0) holds each reduce task back after it has its
        // input: time to watch a shuffle recover from a lost executor.
        let pause: u64 = flint_guest::config_or("reduce_pause_ms", 0).unwrap_or(0);
        std::thread::sleep(std::time::Duration::from_millis(pause));
        // `straggle_task=N` holds the first attempt of that task (a reduce task's
        // number counts the maps before it) back `straggle_ms` (default a minute): a
        // straggler for the speculation tests, whose copy runs as the others do.
        let me = flint_guest::task_info();
        let straggler: Option<u32> = flint_guest::config("straggle_task").and_then(|t| t.parse().ok());
        if straggler == Some(me.task_index) && me.attempt == 0 {
            let ms: u64 = flint_guest::config_or("straggle_ms", 60_000).unwrap_or(60_000);
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        Summary::default()
    }

    fn reduce(word: String, counts: &mut Values<'_, u64>, out: &mut Summary) -> Result<(), Error> {
        if part::wanted()
            && flint_guest::task_info().attempt == 0
            && flint_guest::config_or("fail_first_attempt", false)?
        {
            match out.distinct_words {
                0 => {
                    let junk: usize = flint_guest::config_or("fail_first_attempt_bytes", 2 << 20)?;
                    part::write(&vec![b'x'; junk.min(64 << 20)])?
                }
                _ => return Err(Error::new("a first attempt that fails after writing half its part")),
            }
        }
        let n: u64 = counts.sum();
        if part::wanted() {
            part::line(format_args!("{word}\t{n}"))?;
        }
        out.total_words += n;
        out.distinct_words += 1;
        out.top.push((word, n));
        if out.top.len() >= 4 * TOP {
            keep_top(&mut out.top);
        }
        Ok(())
    }

    fn merge(mut a: Summary, b: Summary) -> Result<Summary, Error> {
        a.total_words += b.total_words;
        a.distinct_words += b.distinct_words;
        a.top.extend(b.top);
        keep_top(&mut a.top);
        Ok(a)
    }

    fn finish(mut s: Summary) -> Result<Summary, Error> {
        keep_top(&mut s.top);
        Ok(s)
    }
}

flint_guest::export_map_reduce!(WordCount);
