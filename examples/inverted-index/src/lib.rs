//! An inverted index over several input files: for every word, the sorted list of the
//! documents it appears in. Maps emit `(word, document)` once per word and split, with
//! the document's name as the path's last component; the shuffle brings each word's
//! documents together in one reduce task, which writes `word<TAB>doc1,doc2,…` to its part
//! file (`--output DIR`), in word order. The index is as large as the input's
//! vocabulary times its documents, so it is never gathered in one place: the job's result
//! is only its size, `{"words": …, "postings": …}`.
//!
//! A word is a run of ASCII letters and digits, lowercased.

use flint_guest::{Emitter, Error, MapReduce, Partition, Values, part};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

#[derive(Serialize, Deserialize, Default)]
pub struct Size {
    pub words: u64,
    pub postings: u64,
}

pub struct InvertedIndex;

impl MapReduce for InvertedIndex {
    type Key = String;
    type Value = String;
    type Output = Size;
    type Result = Size;

    fn map(input: Partition, out: &mut Emitter<Self>) -> Result<(), Error> {
        let mut split = input.lines()?;
        let document = split.path.rsplit('/').next().unwrap_or(&split.path).to_owned();
        // Each word once per split: the reducer removes the repeats across splits.
        let mut seen = HashSet::new();
        split.for_each_batch(|batch| {
            for word in batch.split(|b| !b.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
                seen.insert(word.to_ascii_lowercase());
            }
            Ok(())
        })?;
        for word in seen {
            let word = String::from_utf8(word).expect("ASCII letters and digits");
            out.emit(&word, document.clone())?;
        }
        Ok(())
    }

    fn empty() -> Size {
        Size::default()
    }

    fn reduce(word: String, documents: &mut Values<'_, String>, out: &mut Size) -> Result<(), Error> {
        let mut documents: Vec<String> = documents.collect();
        documents.sort_unstable();
        documents.dedup();
        if part::wanted() {
            part::line(format_args!("{word}\t{}", documents.join(",")))?;
        }
        out.words += 1;
        out.postings += documents.len() as u64;
        Ok(())
    }

    fn merge(a: Size, b: Size) -> Result<Size, Error> {
        Ok(Size { words: a.words + b.words, postings: a.postings + b.postings })
    }

    fn finish(size: Size) -> Result<Size, Error> {
        Ok(size)
    }
}

flint_guest::export_map_reduce!(InvertedIndex);
