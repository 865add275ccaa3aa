//! The ten most frequent words of the input, as a program: Spark's
//! `textFile(..).flatMap(split).map((_, 1)).reduceByKey(_ + _)` followed by a ranking.
//! A word is a maximal run of bytes that are not white space (space, tab, CR, LF, VT,
//! FF); the top ten go by count, most first, then by word (bytewise). The result:
//! `{"distinct_words": N, "top": [[word, count], …]}`.

use flint_guest::Error;
use flint_guest::program::{Program, text_file};
use serde::Serialize;

flint_guest::functions! {
    /// A line's words.
    pub fn words(line: String) -> Vec<String> {
        line.split([' ', '\t', '\r', '\n', '\x0b', '\x0c'])
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    }
    pub fn one(word: String) -> (String, u64) { (word, 1) }
    pub fn add(a: u64, b: u64) -> u64 { a + b }
    /// A word's place: keys that sort most counted first, then by word.
    pub fn rank(entry: (String, u64)) -> ((u64, String), ()) { ((u64::MAX - entry.1, entry.0), ()) }
    pub fn unrank(entry: ((u64, String), ())) -> (String, u64) { (entry.0.1, u64::MAX - entry.0.0) }
}

#[derive(Serialize)]
pub struct Top {
    pub distinct_words: u64,
    pub top: Vec<(String, u64)>,
}

pub struct TopWords;

impl Program for TopWords {
    type Result = Top;

    fn main() -> Result<Top, Error> {
        let counts = text_file("*").flat_map(words).map(one).reduce_by_key(add, 0);
        // Sorted by count across the partitions (a second shuffle): the first ten of
        // the first partitions are the top ten.
        let top = counts.map(rank).sort_by_key(true, 0).map(unrank).take(10)?;
        Ok(Top { distinct_words: counts.count()?, top })
    }
}

flint_guest::export_program!(TopWords, [words, one, add, rank, unrank]);

#[cfg(test)]
mod tests {
    use super::*;
    use flint_guest::testing::{Input, Local};
    use std::collections::HashMap;

    #[test]
    fn the_top_ten_are_counted_and_ranked_as_a_plain_loop_would() {
        let mut text = String::new();
        for i in 0..3000u32 {
            let words: Vec<String> =
                (0..(i % 7)).map(|j| format!("w{}", (i * 31 + j * 17) % 97 % (j + 3))).collect();
            text.push_str(&words.join(if i % 2 == 0 { " " } else { "\t\x0b " }));
            text.push('\n');
        }
        let halves = text.split_at(text.len() / 2 + text[text.len() / 2..].find('\n').unwrap() + 1);
        let out = Local::new().program::<TopWords>([Input::text(halves.0), Input::text(halves.1)]).unwrap();
        let mut counts: HashMap<&str, u64> = HashMap::new();
        for word in text.split(|c: char| " \t\r\n\x0b\x0c".contains(c)).filter(|w| !w.is_empty()) {
            *counts.entry(word).or_default() += 1;
        }
        let mut top: Vec<(&str, u64)> = counts.iter().map(|(w, c)| (*w, *c)).collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        top.truncate(10);
        assert_eq!(out.result["distinct_words"], counts.len());
        assert_eq!(out.result["top"], serde_json::json!(top));
    }
}
