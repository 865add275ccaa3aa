//! Sorted runs of framed records, merged by key: a map task's spills into its data
//! file, and a reduce task's slices into the batches its guest reads. Ties go to the
//! earlier run (the earlier spill, the lower map index), so a merge is deterministic.

use super::disk::Reservation;
use flint_runtime::{RECORD_HEADER, RecordSource, ShuffleError};
use std::io::{self, Read};

/// A stored record's frame: key length and value length, u32 LE each.
pub(crate) const FRAME: usize = 8;

/// A record longer than this in a run is taken for corruption, not allocated.
const MAX_RECORD: usize = 1 << 30;

/// Framed records (key length, value length, key, value) read one at a time.
pub(crate) struct FramedReader<R> {
    reader: R,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl<R: Read> FramedReader<R> {
    /// A reader at its first record, or `None` when there is none.
    pub(crate) fn open(reader: R) -> io::Result<Option<FramedReader<R>>> {
        let mut framed = FramedReader { reader, key: Vec::new(), value: Vec::new() };
        Ok(framed.advance()?.then_some(framed))
    }

    /// Moves to the next record; false at the end.
    fn advance(&mut self) -> io::Result<bool> {
        let mut header = [0u8; FRAME];
        let mut got = 0;
        while got < FRAME {
            match self.reader.read(&mut header[got..])? {
                0 if got == 0 => return Ok(false),
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a run ends inside a record")),
                n => got += n,
            }
        }
        let klen = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let vlen = u32::from_le_bytes(header[4..].try_into().expect("4 bytes")) as usize;
        if klen + vlen > MAX_RECORD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a run holds an impossible record length",
            ));
        }
        self.key.resize(klen, 0);
        self.reader.read_exact(&mut self.key)?;
        self.value.resize(vlen, 0);
        self.reader.read_exact(&mut self.value)?;
        Ok(true)
    }
}

/// One run as the merge sees it.
trait Run: Send {
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
    fn advance(&mut self) -> io::Result<bool>;
}

impl<R: Read + Send> Run for FramedReader<R> {
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn value(&self) -> &[u8] {
        &self.value
    }
    fn advance(&mut self) -> io::Result<bool> {
        FramedReader::advance(self)
    }
}

/// A k-way merge of sorted runs, smallest key first, earlier run first among equals.
/// Files it was given to own (a reducer's spills) are deleted when it goes.
pub(crate) struct SortedRuns {
    /// Files to delete, with what they hold of the disk budget.
    owned: Vec<(std::path::PathBuf, Reservation)>,
    runs: Vec<Box<dyn Run>>,
    /// A binary min-heap of indices into `runs` (runs that still have a record).
    heap: Vec<usize>,
    /// What each record a guest reads carries in its partition field: the reduce
    /// partition, or for a merge of several shuffles, which one its run is of.
    partition: u32,
    tags: Vec<u32>,
    failed: bool,
}

impl SortedRuns {
    pub(crate) fn new(partition: u32) -> SortedRuns {
        SortedRuns {
            owned: Vec::new(),
            runs: Vec::new(),
            heap: Vec::new(),
            partition,
            tags: Vec::new(),
            failed: false,
        }
    }

    /// One merge of `parts`' runs, each record tagged with the index of the part it
    /// came from (ties to the earlier part).
    pub(crate) fn tagged(parts: Vec<SortedRuns>) -> SortedRuns {
        let mut merged = SortedRuns::new(0);
        for (tag, mut part) in (0..).zip(parts) {
            merged.owned.append(&mut part.owned);
            for run in std::mem::take(&mut part.runs) {
                merged.runs.push(run);
                merged.tags.push(tag);
            }
        }
        // Every run has a record (as `push` keeps them): the heap holds them all.
        merged.heap = (0..merged.runs.len()).collect();
        for i in (0..merged.heap.len()).rev() {
            merged.sift_down(i);
        }
        merged
    }

    /// Deletes `path` when the merge is dropped, and gives back what it held.
    pub(crate) fn own(&mut self, path: std::path::PathBuf, held: Reservation) {
        self.owned.push((path, held));
    }

    /// Adds a run in its order (each later run loses ties to earlier ones).
    pub(crate) fn push<R: Read + Send + 'static>(&mut self, reader: R) -> io::Result<()> {
        if let Some(run) = FramedReader::open(reader)? {
            self.runs.push(Box::new(run));
            let at = self.runs.len() - 1;
            self.heap.push(at);
            self.sift_up(self.heap.len() - 1);
        }
        Ok(())
    }

    fn less(&self, a: usize, b: usize) -> bool {
        (self.runs[a].key(), a) < (self.runs[b].key(), b)
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.less(self.heap[i], self.heap[parent]) {
                break;
            }
            self.heap.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < self.heap.len() && self.less(self.heap[l], self.heap[least]) {
                least = l;
            }
            if r < self.heap.len() && self.less(self.heap[r], self.heap[least]) {
                least = r;
            }
            if least == i {
                return;
            }
            self.heap.swap(i, least);
            i = least;
        }
    }

    /// Hands the smallest record (with its run's tag) to `take` and moves past it;
    /// false when all runs ended.
    pub(crate) fn pop(&mut self, take: impl FnOnce(u32, &[u8], &[u8])) -> io::Result<bool> {
        let Some(&top) = self.heap.first() else { return Ok(false) };
        let tag = self.tags.get(top).copied().unwrap_or(self.partition);
        take(tag, self.runs[top].key(), self.runs[top].value());
        if !self.runs[top].advance()? {
            let last = self.heap.pop().expect("not empty");
            if !self.heap.is_empty() {
                self.heap[0] = last;
            }
        }
        self.sift_down(0);
        Ok(true)
    }
}

impl Drop for SortedRuns {
    fn drop(&mut self) {
        self.runs.clear();
        for (path, _) in &self.owned {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl RecordSource for SortedRuns {
    fn next(&mut self, max: usize) -> Result<Vec<u8>, ShuffleError> {
        if self.failed {
            return Err(ShuffleError {
                message: "the task's sorted input failed before".into(),
                retryable: true,
            });
        }
        let mut batch = Vec::with_capacity(max.min(1 << 20));
        while batch.len() < max {
            let more = self.pop(|tag, key, value| {
                batch.extend_from_slice(&tag.to_le_bytes());
                batch.extend_from_slice(&(key.len() as u32).to_le_bytes());
                batch.extend_from_slice(&(value.len() as u32).to_le_bytes());
                batch.extend_from_slice(key);
                batch.extend_from_slice(value);
            });
            match more {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    self.failed = true;
                    return Err(ShuffleError {
                        message: format!("reading the shuffle's records: {e}"),
                        retryable: true,
                    });
                }
            }
        }
        debug_assert!(batch.is_empty() || batch.len() >= RECORD_HEADER);
        Ok(batch)
    }
}
