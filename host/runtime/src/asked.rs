//! The configuration keys a job's calls asked for: what lets the driver tell a user of
//! a key given to a job that never read it (`--conf topp=3`), and of the key it asked
//! for instead.

use std::collections::BTreeSet;
use std::sync::Mutex;

use flint_proto::{MAX_ASKED, MAX_ASKED_KEY};

/// The keys a job's calls on this host asked for, given or not, each once; those not
/// taken yet go with the next report.
#[derive(Debug, Default)]
pub struct ConfAsked {
    inner: Mutex<Asked>,
}

#[derive(Debug, Default)]
struct Asked {
    seen: BTreeSet<String>,
    new: Vec<String>,
}

impl ConfAsked {
    pub fn record(&self, key: &str) {
        if key.len() > MAX_ASKED_KEY {
            return;
        }
        let mut asked = self.inner.lock().expect("asked lock");
        if asked.seen.len() < MAX_ASKED && !asked.seen.contains(key) {
            asked.seen.insert(key.to_owned());
            asked.new.push(key.to_owned());
        }
    }

    /// Every key asked for (at most [`MAX_ASKED`]), and whether the bound was met (so
    /// some may be missing).
    pub fn seen(&self) -> (std::collections::BTreeSet<String>, bool) {
        let asked = self.inner.lock().expect("asked lock");
        (asked.seen.clone(), asked.seen.len() >= MAX_ASKED)
    }

    /// The keys asked for since the last take.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.inner.lock().expect("asked lock").new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_goes_once_and_the_record_is_bounded() {
        let asked = ConfAsked::default();
        asked.record("top");
        asked.record("top");
        asked.record(&"k".repeat(MAX_ASKED_KEY + 1));
        assert_eq!(asked.take(), ["top"]);
        asked.record("top");
        assert!(asked.take().is_empty());
        for i in 0..1000 {
            asked.record(&format!("key{i}"));
        }
        assert_eq!(asked.take().len(), MAX_ASKED - 1);
    }
}
