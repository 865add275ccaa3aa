//! Combining on the host's side of a map: as a map's output is written, records of one
//! key that reach the file more than once (the guest's combining table filled and was
//! emptied, or the records were spilled in several runs) go through the job's
//! `combine-sorted` and leave as one. What the guest gives back is checked: records of
//! the partition asked, in key order, or the task fails.

use super::frames::Frame;
use flint_proto::TaskFailure;
use flint_runtime::RECORD_HEADER;
use sha2::Sha256;
use std::io::{self, Write};

/// The job's `combine-sorted`, as the writer calls it: one partition's records sorted
/// by key, back with each key's run folded, or `None` when the job does not combine.
pub type Combine<'a> = &'a mut dyn FnMut(&[u8]) -> Result<Option<Vec<u8>>, TaskFailure>;

/// Records are handed to the guest in batches of about this many bytes, cut where the
/// key changes.
const BATCH: usize = 1 << 20;
/// A batch that grows past this within one key is handed over anyway: the key then
/// leaves as two records, which its reducer sees as two values.
const MOST: usize = 16 << 20;

/// One map's records on their way to its frames, when its job combines.
pub(super) struct Combiner<'a> {
    combine: Combine<'a>,
    /// Records of the partition being written, in the shuffle layout.
    batch: Vec<u8>,
    /// Where the batch's last key is.
    last: Option<(usize, usize)>,
    /// Whether the batch holds a key twice: else it goes to the file as it is.
    repeated: bool,
    /// The last key written to the partition's frame.
    written: Vec<u8>,
    /// Why the job's combine failed, when it did (the writer then stops).
    pub(super) failed: Option<TaskFailure>,
    /// Records in, records out, for the log.
    pub(super) folded: (u64, u64),
}

impl<'a> Combiner<'a> {
    /// The combiner for a job's map, if the job combines (asked with an empty batch).
    pub(super) fn new(combine: Combine<'a>) -> Result<Option<Combiner<'a>>, TaskFailure> {
        Ok(combine(&[])?.map(|_| Combiner {
            combine,
            batch: Vec::new(),
            last: None,
            repeated: false,
            written: Vec::new(),
            failed: None,
            folded: (0, 0),
        }))
    }

    /// One record of `partition`, in key order.
    pub(super) fn record<W: Write>(
        &mut self,
        frame: &mut Frame<'_, W>,
        partition: u32,
        (key, value): (&[u8], &[u8]),
        digest: &mut Sha256,
    ) -> io::Result<()> {
        let mut same = self.last.is_some_and(|(at, len)| &self.batch[at..at + len] == key);
        if (!same && self.batch.len() >= BATCH) || self.batch.len() >= MOST {
            self.flush(frame, partition, digest)?;
            same = false;
        }
        self.repeated |= same;
        self.batch.extend_from_slice(&partition.to_le_bytes());
        self.batch.extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.batch.extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.last = Some((self.batch.len(), key.len()));
        self.batch.extend_from_slice(key);
        self.batch.extend_from_slice(value);
        Ok(())
    }

    /// The partition's last records; the next partition starts afresh.
    pub(super) fn end<W: Write>(
        &mut self,
        frame: &mut Frame<'_, W>,
        partition: u32,
        digest: &mut Sha256,
    ) -> io::Result<()> {
        self.flush(frame, partition, digest)?;
        self.written.clear();
        Ok(())
    }

    fn flush<W: Write>(
        &mut self,
        frame: &mut Frame<'_, W>,
        partition: u32,
        digest: &mut Sha256,
    ) -> io::Result<()> {
        let mut batch = std::mem::take(&mut self.batch);
        let repeated = std::mem::take(&mut self.repeated);
        self.last = None;
        if batch.is_empty() {
            return Ok(());
        }
        let combined = match repeated {
            true => match (self.combine)(&batch) {
                Ok(Some(combined)) => Some(combined),
                Ok(None) => {
                    return self
                        .fail(guest("combine-sorted said the job does not combine after it said it does"));
                }
                Err(failure) => return self.fail(failure),
            },
            false => None,
        };
        let records = combined.as_deref().unwrap_or(&batch);
        let written = std::mem::take(&mut self.written);
        let mut last: &[u8] = &written;
        let (mut at, mut count) = (0, 0);
        while at < records.len() {
            let Some((p, key, value, end)) = record_at(records, at) else {
                return self.fail(guest("combine-sorted gave back a cut record"));
            };
            if p != partition || key < last {
                return self
                    .fail(guest("combine-sorted gave back records out of their partition or key order"));
            }
            frame.record(partition, key, value, Some(digest))?;
            (last, at, count) = (key, end, count + 1);
        }
        // The batch's last key, kept once a batch rather than once a record.
        self.written = last.to_vec();
        if repeated {
            let before = count_records(&batch);
            self.folded = (self.folded.0 + before, self.folded.1 + count);
        }
        // The buffer's room is kept for the next batch.
        batch.clear();
        self.batch = batch;
        Ok(())
    }

    fn fail(&mut self, failure: TaskFailure) -> io::Result<()> {
        let message = failure.to_string();
        self.failed = Some(failure);
        Err(io::Error::other(message))
    }
}

fn guest(message: &str) -> TaskFailure {
    TaskFailure::Guest { message: message.to_owned(), retryable: false }
}

/// A record in the shuffle layout: partition, key, value, and where the next begins.
type Flat<'a> = (u32, &'a [u8], &'a [u8], usize);

/// The record at `at`; `None` when the bytes do not hold a whole record there.
fn record_at(records: &[u8], at: usize) -> Option<Flat<'_>> {
    let field =
        |i: usize| records.get(at + i..at + i + 4).map(|b| u32::from_le_bytes(b.try_into().expect("4")));
    let (partition, klen, vlen) = (field(0)?, field(4)? as usize, field(8)? as usize);
    let key_at = at + RECORD_HEADER;
    let end = key_at.checked_add(klen)?.checked_add(vlen)?;
    (end <= records.len())
        .then(|| (partition, &records[key_at..key_at + klen], &records[key_at + klen..end], end))
}

fn count_records(records: &[u8]) -> u64 {
    let (mut at, mut count) = (0, 0);
    while let Some((_, _, _, end)) = record_at(records, at) {
        (at, count) = (end, count + 1);
    }
    count
}
