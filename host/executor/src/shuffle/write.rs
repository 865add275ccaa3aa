//! A map task's records, from the guest's batches to one sorted data file and its
//! index: kept in memory up to the task's shuffle budget, spilled as sorted runs past
//! it, and merged once at the end.

use super::combine::{Combine, Combiner};
use super::disk::{Reservation, disk_full};
use super::files::ShuffleFiles;
use super::frames::Slices;
use super::index::Index;
use super::merge::{FRAME, SortedRuns};
use flint_proto::{INLINE_PER_MAP, INLINE_SLICE, InlineSlice, JobId, MapStatus, TaskFailure};
use flint_runtime::{RECORD_HEADER, RecordSink, ShuffleError};
use sha2::{Digest as _, Sha256};
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

/// Each record kept in memory costs its bytes and one index entry.
const ENTRY: usize = std::mem::size_of::<Entry>();

/// A record's place in memory, with what sorts most records without touching their
/// bytes: its partition and its key's first eight bytes, big-endian (Spark's prefix
/// sort); the full keys are compared only on a tie.
#[derive(Clone, Copy)]
struct Entry {
    partition: u32,
    prefix: u64,
    offset: usize,
}

fn prefix_of(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

/// A map task's output while it is written.
pub struct MapWriter {
    files: ShuffleFiles,
    job: JobId,
    map: u32,
    reduces: u32,
    /// Bytes of records (and their index) kept in memory before a spill.
    budget: usize,
    /// Records as the guest laid them out (header, key, value), in emit order.
    data: Vec<u8>,
    /// Where each record is in `data`, in emit order until sorted.
    index: Vec<Entry>,
    /// Sorted runs on disk: the file, each partition's byte range in it, and what it
    /// holds of the disk budget.
    pub(super) spills: Vec<(PathBuf, Vec<u64>, Reservation)>,
    pub(super) records: u64,
    /// Why a spill was refused room on disk: the map's failure, whatever the guest
    /// makes of the error its `emit` got.
    refused: Option<TaskFailure>,
}

/// Reads a record's three header fields at `at` (checked by `emit`).
fn header(data: &[u8], at: usize) -> (u32, usize, usize) {
    let field = |i: usize| u32::from_le_bytes(data[at + i..at + i + 4].try_into().expect("4 bytes"));
    (field(0), field(4) as usize, field(8) as usize)
}

fn key_of(data: &[u8], at: usize) -> &[u8] {
    let (_, klen, _) = header(data, at);
    &data[at + RECORD_HEADER..at + RECORD_HEADER + klen]
}

fn host_error(what: &str, e: io::Error) -> ShuffleError {
    ShuffleError { message: format!("{what}: {e}"), retryable: true }
}

impl MapWriter {
    pub fn new(files: ShuffleFiles, job: JobId, map: u32, reduces: u32, budget: usize) -> MapWriter {
        MapWriter {
            files,
            job,
            map,
            reduces,
            budget: budget.max(1 << 20),
            data: Vec::new(),
            index: Vec::new(),
            spills: Vec::new(),
            records: 0,
            refused: None,
        }
    }

    /// Sorts what is in memory by (partition, key), values of one key in the order
    /// they were emitted (their offsets grow with it: the unstable sort keeps it).
    fn sort(&mut self) {
        let data = &self.data;
        self.index.sort_unstable_by(|a, b| {
            (a.partition, a.prefix)
                .cmp(&(b.partition, b.prefix))
                .then_with(|| key_of(data, a.offset).cmp(key_of(data, b.offset)))
                .then(a.offset.cmp(&b.offset))
        });
    }

    /// Writes the sorted records in memory as one zstd frame per partition into `out`,
    /// streamed (no copy of a partition is made), returning each partition's start
    /// offset (and the end), and each slice's CRC. The final write (`last`) shows every
    /// record to the digest and, for a combining job, hands keys seen twice to its
    /// combine; a spill does neither.
    fn write_sorted<W: Write>(
        &mut self,
        out: &mut Slices<W>,
        mut last: Option<(&mut Sha256, Option<&mut Combiner<'_>>)>,
    ) -> io::Result<()> {
        self.sort();
        let mut at = 0;
        for partition in 0..self.reduces {
            let mut frame = out.begin();
            while let Some(&Entry { partition: p, offset, .. }) = self.index.get(at) {
                if p != partition {
                    break;
                }
                let (_, klen, vlen) = header(&self.data, offset);
                let key = &self.data[offset + RECORD_HEADER..offset + RECORD_HEADER + klen];
                let value = &self.data[offset + RECORD_HEADER + klen..offset + RECORD_HEADER + klen + vlen];
                match &mut last {
                    Some((digest, Some(combiner))) => {
                        combiner.record(&mut frame, partition, (key, value), digest)?
                    }
                    Some((digest, None)) => frame.record(partition, key, value, Some(&mut **digest))?,
                    None => frame.record(partition, key, value, None)?,
                }
                at += 1;
            }
            if let Some((digest, Some(combiner))) = &mut last {
                combiner.end(&mut frame, partition, digest)?;
            }
            frame.end()?;
        }
        self.data = Vec::new();
        self.index = Vec::new();
        Ok(())
    }

    fn spill(&mut self) -> Result<(), ShuffleError> {
        let dir = self.files.spill_dir(self.job, self.map);
        std::fs::create_dir_all(&dir).map_err(|e| host_error("cannot make the spill folder", e))?;
        let path = dir.join(format!("run-{}-{}", self.spills.len(), rand::random::<u64>()));
        let file = File::create(&path).map_err(|e| host_error("cannot spill", e))?;
        let mut out = Slices::new(BufWriter::new(file), self.files.reserve(self.job, self.map));
        let written = self.write_sorted(&mut out, None).and_then(|()| out.finish());
        let (offsets, _, held) = match written {
            Ok(done) => done,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                self.refused = disk_full(&e);
                return Err(host_error("cannot spill", e));
            }
        };
        tracing::debug!(
            map = self.map,
            run = self.spills.len(),
            bytes = offsets.last().copied().unwrap_or(0),
            "spilled a sorted run"
        );
        self.spills.push((path, offsets, held));
        Ok(())
    }

    /// Why the map's records were refused room on disk, if they were.
    pub fn refused(&self) -> Option<&TaskFailure> {
        self.refused.as_ref()
    }

    /// Ends the map: one data file and its index, renamed into place whole. With the
    /// job's `combine` (a combining job's, called after its map), a key that reaches
    /// the file more than once leaves as one record. A failure of the job's combine
    /// fails the map as it failed; the host's own, as `host`.
    pub fn finish(mut self, combine: Option<Combine<'_>>) -> Result<MapStatus, TaskFailure> {
        let host = |e: ShuffleError| TaskFailure::Host { message: e.message };
        let mut combiner = match combine {
            Some(combine) => Combiner::new(combine)?,
            None => None,
        };
        let (data_path, index_path) = self.files.paths(self.job, self.map);
        let dir = data_path.parent().expect("a job folder").to_owned();
        std::fs::create_dir_all(&dir).map_err(|e| host(host_error("cannot make the shuffle folder", e)))?;
        let tag = rand::random::<u64>();
        let tmp_data = dir.join(format!("map-{}.data.{tag:x}", self.map));
        let result = self.write_files(&tmp_data, combiner.as_mut());
        for (path, ..) in std::mem::take(&mut self.spills) {
            let _ = std::fs::remove_file(path);
        }
        let Written { offsets, crcs, digest, mut held } = match result {
            Ok(done) => done,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp_data);
                let refused = self.refused.take().or_else(|| disk_full(&e));
                return Err(match combiner.and_then(|c| c.failed).or(refused) {
                    Some(failure) => failure,
                    None => host(host_error("cannot write the map output", e)),
                });
            }
        };
        if let Some(Combiner { folded: (before, after), .. }) = combiner
            && before > 0
        {
            tracing::debug!(map = self.map, before, after, "combined keys the map wrote more than once");
        }
        let index = Index::encode(&offsets, &crcs, &digest);
        let tmp_index = dir.join(format!("map-{}.index.{tag:x}", self.map));
        let placed = held
            .grow(index.len() as u64)
            .and_then(|()| std::fs::write(&tmp_index, &index))
            .and_then(|()| std::fs::rename(&tmp_data, &data_path))
            .and_then(|()| std::fs::rename(&tmp_index, &index_path));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&tmp_data);
            let _ = std::fs::remove_file(&tmp_index);
            return Err(disk_full(&e).unwrap_or_else(|| host(host_error("cannot place the map output", e))));
        }
        self.files.keep(self.job, held);
        let sizes: Vec<u64> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
        let inline = inline_slices(&data_path, &offsets, &crcs);
        Ok(MapStatus { sizes, digest, records: self.records, inline })
    }

    /// Writes the data file: straight from memory, or by merging the spilled runs
    /// (what is still in memory spilled last). Returns the partitions' offsets and the
    /// digest of the framed records.
    fn write_files(
        &mut self,
        path: &PathBuf,
        mut combiner: Option<&mut Combiner<'_>>,
    ) -> io::Result<Written> {
        let mut out =
            Slices::new(BufWriter::new(File::create(path)?), self.files.reserve(self.job, self.map));
        let mut digest = Sha256::new();
        if self.spills.is_empty() {
            self.write_sorted(&mut out, Some((&mut digest, combiner)))?;
        } else {
            if !self.index.is_empty() {
                // A refusal is kept in `refused`, which the caller reads first.
                self.spill().map_err(|e| io::Error::other(e.message))?;
            }
            for partition in 0..self.reduces as usize {
                let mut runs = SortedRuns::new(partition as u32);
                for (run, bounds, _) in &self.spills {
                    let (start, end) = (bounds[partition], bounds[partition + 1]);
                    if end > start {
                        let mut file = File::open(run)?;
                        file.seek(SeekFrom::Start(start))?;
                        runs.push(zstd::Decoder::new(file.take(end - start))?)?;
                    }
                }
                let mut frame = out.begin();
                let mut failed = None;
                let partition = partition as u32;
                while runs.pop(|_, key, value| {
                    let written = match combiner.as_deref_mut() {
                        _ if failed.is_some() => return,
                        Some(combiner) => combiner.record(&mut frame, partition, (key, value), &mut digest),
                        None => frame.record(partition, key, value, Some(&mut digest)),
                    };
                    if let Err(e) = written {
                        failed = Some(e);
                    }
                })? {}
                if let Some(e) = failed {
                    return Err(e);
                }
                if let Some(combiner) = combiner.as_deref_mut() {
                    combiner.end(&mut frame, partition, &mut digest)?;
                }
                frame.end()?;
            }
        }
        let (offsets, crcs, held) = out.finish()?;
        Ok(Written { offsets, crcs, digest: digest.finalize().into(), held })
    }
}

/// A data file written: each partition's offset (and the end), each slice's CRC, the
/// digest of its records, and what it holds of the disk budget.
struct Written {
    offsets: Vec<u64>,
    crcs: Vec<u32>,
    digest: [u8; 32],
    held: Reservation,
}

/// The data file's smallest slices, read back (from the page cache) to ride in the
/// map's report: in partition order, each at most [`INLINE_SLICE`] bytes, at most
/// [`INLINE_PER_MAP`] together. A slice that cannot be read back is left to be fetched.
fn inline_slices(path: &std::path::Path, offsets: &[u64], crcs: &[u32]) -> Vec<(u32, InlineSlice)> {
    use std::os::unix::fs::FileExt;
    let mut inline = Vec::new();
    let Ok(file) = File::open(path) else { return inline };
    let mut room = INLINE_PER_MAP;
    for (partition, (bounds, &crc)) in offsets.windows(2).zip(crcs).enumerate() {
        let len = (bounds[1] - bounds[0]) as usize;
        if len == 0 || len > INLINE_SLICE.min(room) {
            continue;
        }
        let mut bytes = vec![0; len];
        if file.read_exact_at(&mut bytes, bounds[0]).is_ok() {
            room -= len;
            inline.push((partition as u32, InlineSlice { crc, bytes }));
        }
    }
    inline
}

impl RecordSink for MapWriter {
    fn partitions(&self) -> u32 {
        self.reduces
    }

    fn emit(&mut self, batch: &[u8]) -> Result<(), ShuffleError> {
        // The whole batch is checked before any of it is kept.
        let bad = |message: String| ShuffleError { message, retryable: false };
        let base = self.data.len();
        let mut at = 0;
        let mut entries = Vec::new();
        while at < batch.len() {
            if batch.len() - at < RECORD_HEADER {
                return Err(bad(format!("a batch ends inside a record header at byte {at}")));
            }
            let (partition, klen, vlen) = header(batch, at);
            if partition >= self.reduces {
                return Err(bad(format!(
                    "a record for partition {partition}, but the job has {} reduce partitions",
                    self.reduces
                )));
            }
            let end = at.checked_add(RECORD_HEADER + klen).and_then(|e| e.checked_add(vlen));
            match end {
                Some(end) if end <= batch.len() => {
                    let key = &batch[at + RECORD_HEADER..at + RECORD_HEADER + klen];
                    entries.push(Entry { partition, prefix: prefix_of(key), offset: base + at });
                    at = end;
                }
                _ => return Err(bad(format!("a record at byte {at} runs past the end of its batch"))),
            }
        }
        self.records += entries.len() as u64;
        self.data.extend_from_slice(batch);
        self.index.extend(entries);
        if self.data.len() + self.index.len() * ENTRY > self.budget {
            self.spill()?;
        }
        Ok(())
    }
}

/// The framed bytes per record on disk, beside the header the guest sends.
const _: () = assert!(FRAME + 4 == RECORD_HEADER);
