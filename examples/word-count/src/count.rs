//! The counting loop, shared with the native reference in `make bench` so that the
//! comparison measures the platform, not two programs.
//!
//! What makes it fast: a cheap hash (Fx) instead of the standard library's SipHash, and
//! a lookup by the borrowed word before anything is allocated, so a word seen before
//! costs one hash and one compare; only a new word is copied.

use rustc_hash::FxHashMap;

/// Occurrences of each word.
pub type Counts = FxHashMap<Box<str>, u64>;

/// Adds the words of `text` (separated by ASCII whitespace) to `counts`. Bytes that are
/// not UTF-8 are counted under their lossy form.
pub fn count_words(text: &[u8], counts: &mut Counts) {
    // Valid text (the usual case) is checked once, not word by word.
    if let Ok(text) = std::str::from_utf8(text) {
        for word in text.split_ascii_whitespace() {
            match counts.get_mut(word) {
                Some(n) => *n += 1,
                None => {
                    counts.insert(word.into(), 1);
                }
            }
        }
        return;
    }
    for word in text.split(u8::is_ascii_whitespace).filter(|w| !w.is_empty()) {
        match std::str::from_utf8(word) {
            Ok(w) => match counts.get_mut(w) {
                Some(n) => *n += 1,
                None => {
                    counts.insert(w.into(), 1);
                }
            },
            Err(_) => *counts.entry(String::from_utf8_lossy(word).into()).or_default() += 1,
        }
    }
}

/// Adds two tables, the smaller into the larger.
pub fn merge(a: Counts, b: Counts) -> Counts {
    let (mut big, small) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    big.reserve(small.len());
    for (word, n) in small {
        *big.entry(word).or_default() += n;
    }
    big
}
