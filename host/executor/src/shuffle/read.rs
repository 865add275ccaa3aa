//! Reading map outputs back: a partition's stored slices from this executor's files,
//! checked against the CRCs their index holds, and the seam through which a reduce
//! task fetches slices other executors hold.

use super::files::ShuffleFiles;
use super::index::Index;
use flint_proto::{JobId, MapSource};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::time::Instant;

/// One map's stored slice of a reduce partition: zstd-compressed framed records and the
/// CRC-32 the map's index holds for them. The reader checks the CRC before it
/// decompresses, so a slice corrupted on disk or on the way is caught where it is read.
#[derive(Clone, PartialEq, Eq)]
pub struct Slice {
    pub map: u32,
    pub crc: u32,
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for Slice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slice {{ map: {}, crc: {:08x}, {} bytes }}", self.map, self.crc, self.bytes.len())
    }
}

impl Slice {
    pub fn intact(&self) -> bool {
        crc32fast::hash(&self.bytes) == self.crc
    }
}

/// Why map outputs could not be read: the maps, and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct FetchError {
    pub maps: Vec<u32>,
    pub reason: String,
}

/// Fetches the slices of a reduce partition that another executor holds: one request
/// per holder, carrying every map it holds for the partition. Each slice goes to `each`
/// as it arrives, so that the reader decides where it waits (in memory or spilled).
pub trait ShuffleFetch: Send + Sync {
    fn fetch(
        &self,
        job: JobId,
        token: &[u8; 32],
        partition: u32,
        source: &MapSource,
        deadline: Instant,
        each: &mut dyn FnMut(Slice) -> Result<(), FetchError>,
    ) -> Result<(), FetchError>;

    /// Copies one map's whole output from the executor `adoption` names: its data
    /// file's bytes go to `data` as they arrive (at most `bounds.0` of them), and its
    /// index (at most `bounds.1` bytes) is returned.
    fn fetch_output(
        &self,
        adoption: &flint_proto::Adoption,
        map: u32,
        bounds: (u64, usize),
        data: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<Vec<u8>, String>;
}

/// The CRC-32 of `len` bytes of `path` from `start`, read a piece at a time.
pub(crate) fn file_crc(path: &std::path::Path, start: u64, len: u64) -> std::io::Result<u32> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut piece = vec![0u8; (1 << 20).min(len as usize)];
    let mut left = len;
    while left > 0 {
        let n = piece.len().min(left as usize);
        file.read_exact(&mut piece[..n])?;
        hasher.update(&piece[..n]);
        left -= n as u64;
    }
    Ok(hasher.finalize())
}

/// Where one stored slice is: read it when it is to be sent, not before.
#[derive(Debug, Clone)]
pub struct Located {
    pub map: u32,
    pub crc: u32,
    path: std::path::PathBuf,
    start: u64,
    len: u64,
}

impl Located {
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slice's bytes, as stored.
    pub fn read(&self) -> std::io::Result<Slice> {
        let mut file = File::open(&self.path)?;
        file.seek(SeekFrom::Start(self.start))?;
        let mut bytes = vec![0; self.len as usize];
        file.read_exact(&mut bytes)?;
        Ok(Slice { map: self.map, crc: self.crc, bytes })
    }
}

impl ShuffleFiles {
    /// Where the stored slices of `partition` from `maps`' outputs are. A map whose
    /// files are missing or unreadable fails the whole, named.
    pub fn locate_slices(
        &self,
        job: JobId,
        partition: u32,
        maps: &[u32],
    ) -> Result<Vec<Located>, FetchError> {
        let mut located = Vec::with_capacity(maps.len());
        let mut failed = Vec::new();
        let mut reason = String::new();
        for &map in maps {
            match self.slice_location(job, partition, map) {
                Ok((path, start, end, crc)) => {
                    located.push(Located { map, crc, path, start, len: end - start })
                }
                Err(e) => {
                    if failed.is_empty() {
                        reason = format!("map {map}'s output: {e}");
                    }
                    failed.push(map);
                }
            }
        }
        match failed.is_empty() {
            true => Ok(located),
            false => Err(FetchError { maps: failed, reason }),
        }
    }

    /// Where a map's slice of `partition` is on this executor's disk: its data file,
    /// byte range and CRC, from the map's index.
    pub(crate) fn slice_location(
        &self,
        job: JobId,
        partition: u32,
        map: u32,
    ) -> std::io::Result<(std::path::PathBuf, u64, u64, u32)> {
        let (data_path, index_path) = self.paths(job, map);
        let (start, end, crc) = Index::read(&index_path)?.slice(partition).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "its index does not match the job's partitions",
            )
        })?;
        // The index is checked against the file it describes before any of its sizes
        // is used: a corrupt offset must fail the read, not size an allocation.
        let held = std::fs::metadata(&data_path)?.len();
        if end > held {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("its index places a slice at bytes {start}..{end} of a {held}-byte data file"),
            ));
        }
        Ok((data_path, start, end, crc))
    }
}
