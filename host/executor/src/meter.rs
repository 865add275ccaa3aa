//! What an attempt's input cost, measured by the host as the task reads it: bytes and
//! lines (or records) handed over, the time the task waited for them and for its job's
//! component. The pages show these per task, beside the attempt's duration (the rest of
//! which is compute).

use flint_proto::{TaskFailure, TaskMetrics};
use flint_runtime::{LineSource, RECORD_HEADER, RecordSource, ShuffleError};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// One attempt's counts. Shared between the source the task reads and the slot that
/// reports the attempt; only the task's own thread adds to them.
#[derive(Debug, Default)]
pub struct InputMeter {
    bytes: AtomicU64,
    records: AtomicU64,
    read_ns: AtomicU64,
    /// Waiting for the job's component, before anything was read.
    compile_us: AtomicU64,
    /// The input's size where it is known before reading (a split's byte range), else 0.
    of: AtomicU64,
}

impl InputMeter {
    /// The input holds `bytes` (a split's range): progress is measured against it.
    pub fn expect(&self, bytes: u64) {
        self.of.store(bytes, Relaxed);
    }

    /// The attempt waited `took` for its job's component (compiled, or found).
    pub fn compiled(&self, took: Duration) {
        self.compile_us.store(took.as_micros().min(u128::from(u64::MAX)) as u64, Relaxed);
    }

    /// How far the attempt is through an input of known size, for the heartbeat.
    pub fn progress(&self, attempt: flint_proto::Attempt) -> Option<flint_proto::wire::Progress> {
        let of = self.of.load(Relaxed);
        (of > 0).then(|| flint_proto::wire::Progress { attempt, read: self.bytes.load(Relaxed), of })
    }

    /// The counts so far, with `gathering` (time spent on the input before the call
    /// began, as a reduce task's fetches) added to the time read.
    pub fn metrics(&self, gathering: Duration) -> TaskMetrics {
        let read = Duration::from_nanos(self.read_ns.load(Relaxed)) + gathering;
        TaskMetrics {
            input_bytes: self.bytes.load(Relaxed),
            input_records: self.records.load(Relaxed),
            read_us: read.as_micros().min(u128::from(u64::MAX)) as u64,
            compile_us: self.compile_us.load(Relaxed),
            shuffle_write_bytes: 0,
        }
    }

    fn add(&self, started: Instant, bytes: usize, records: u64) {
        self.read_ns.fetch_add(started.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64, Relaxed);
        self.bytes.fetch_add(bytes as u64, Relaxed);
        self.records.fetch_add(records, Relaxed);
    }
}

/// A source counted into a meter as it is read.
pub struct Metered<S> {
    inner: S,
    meter: Arc<InputMeter>,
}

impl<S> Metered<S> {
    pub fn new(inner: S, meter: Arc<InputMeter>) -> Metered<S> {
        Metered { inner, meter }
    }
}

impl LineSource for Metered<Box<dyn LineSource>> {
    fn next(&mut self, max: usize) -> Result<Vec<u8>, TaskFailure> {
        let started = Instant::now();
        let batch = self.inner.next(max)?;
        self.meter.add(started, batch.len(), lines_in(&batch));
        Ok(batch)
    }
}

impl<S: RecordSource> RecordSource for Metered<S> {
    fn next(&mut self, max: usize) -> Result<Vec<u8>, ShuffleError> {
        let started = Instant::now();
        let batch = self.inner.next(max)?;
        self.meter.add(started, batch.len(), records_in(&batch));
        Ok(batch)
    }
}

/// Lines in a batch of whole lines: one per newline, and the input's last line if it
/// has none.
fn lines_in(batch: &[u8]) -> u64 {
    let ends = memchr::memchr_iter(b'\n', batch).count() as u64;
    ends + u64::from(batch.last().is_some_and(|&b| b != b'\n'))
}

/// Records in a batch of whole records (a header of partition, key length and value
/// length, then the key and value), as the merge hands them to a reduce task.
fn records_in(batch: &[u8]) -> u64 {
    let (mut at, mut n) = (0usize, 0);
    while let Some(header) = batch.get(at..at + RECORD_HEADER) {
        let len = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().expect("4 bytes")) as usize;
        at = at.saturating_add(RECORD_HEADER).saturating_add(len(4)).saturating_add(len(8));
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_a_last_line_without_its_newline() {
        assert_eq!(lines_in(b""), 0);
        assert_eq!(lines_in(b"a\nb\n"), 2);
        assert_eq!(lines_in(b"a\nb"), 2);
        assert_eq!(lines_in(b"\n\n"), 2);
    }

    #[test]
    fn records_are_counted_by_their_headers() {
        let mut batch = Vec::new();
        for (key, value) in [(&b"k"[..], &b"value"[..]), (b"", b""), (b"key", b"v")] {
            batch.extend(7u32.to_le_bytes());
            batch.extend((key.len() as u32).to_le_bytes());
            batch.extend((value.len() as u32).to_le_bytes());
            batch.extend(key);
            batch.extend(value);
        }
        assert_eq!(records_in(&batch), 3);
        assert_eq!(records_in(&[]), 0);
    }
}
